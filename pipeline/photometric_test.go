package pipeline

import (
	"bytes"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestPhotometricBeforeLayouts: ops before the geometry give the same
// sample in HWC as in CHW (the steps run on planes either way), and change
// it (p = 1 draws every step).
func TestPhotometricBeforeLayouts(t *testing.T) {
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	all := ops.Op{Kind: ops.OpRandomPhotometricDistort, P: 1, Args: &ops.PhotometricDistortArgs{Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}}
	resize := ops.Op{Kind: transform.OpResize, Size: [2]int{40, 50}}
	decode := func(layout transform.Layout, ops ...ops.Op) []byte {
		tr := mustTransform(t, layout, ops...)
		d := NewDecoder()
		defer d.Close()
		out := make([]byte, tr.SampleBytes())
		if err := d.Decode(data, tr, det.Key{Seed: 2, Index: 5}, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	chw, hwc, plain := decode(transform.CHW, all, resize), decode(transform.HWC, all, resize), decode(transform.CHW, resize)
	packed := make([]byte, len(chw))
	kernels.CHWToHWC(chw, packed)
	if !bytes.Equal(packed, hwc) {
		t.Error("HWC differs from CHW packed")
	}
	if bytes.Equal(chw, plain) {
		t.Error("the distortion changed nothing")
	}
}
