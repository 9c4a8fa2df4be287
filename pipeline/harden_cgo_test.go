//go:build cgo

package pipeline

import (
	"errors"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestFastOutputLength: pipeline/codec (turbo.c) is told the output buffer's length and
// refuses a view that would write past it, whatever the Go side checked
// before.
func TestFastOutputLength(t *testing.T) {
	data := decodeFuzzSeeds(t)[0]
	hd, err := parseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	tr := smallTrain(t)
	p, err := geomPlan(tr, hd.w, hd.h, det.Key{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	if err := d.decodeFast(data, &hd, &p, transform.CHW, out); err != nil {
		t.Fatal(err)
	}
	f := &d.fast
	for _, short := range []int{1, len(out)} {
		f.setJob(&d.opts, &hd, []transform.SamplePlan{p}, []int{0}, len(out)-short, transform.CHW, d.knobs())
		if err := f.s.Err(f.s.Decode(data, out, nil, nil)); !errors.Is(err, errs.Unsupported) {
			t.Errorf("an output buffer %d bytes short: %v; want the job refused", short, err)
		}
	}
	f.setJob(&d.opts, &hd, []transform.SamplePlan{p}, []int{0}, len(out), transform.CHW, d.knobs())
	if err := f.s.Err(f.s.Decode(data, out, nil, nil)); err != nil {
		t.Errorf("the whole buffer: %v", err)
	}
}
