package pipeline

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestBoundOwnSize makes a batch of the detection references' "hflip"
// recipe (no geometry: each image at its own size) under a bound, CHW and
// HWC: each sample in its slot is the bytes of a CenterCrop of its own
// size (no resampling) and the same flip, at the bound's top left with
// zeros around it, its size after it; under a bound smaller than some
// images those samples fail, naming the bound.
func TestBoundOwnSize(t *testing.T) {
	files := memDataset{goldenJPEGs()}
	flip := ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 1}
	var bw, bh int
	for _, idx := range goldenIndices {
		hd, err := parseHeader(files.files[idx])
		if err != nil {
			t.Fatal(err)
		}
		bw, bh = max(bw, hd.w), max(bh, hd.h)
	}
	for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
		tr, err := transform.NewTransformBound(layout, [2]int{bh, bw}, flip)
		if err != nil {
			t.Fatal(err)
		}
		e := NewExecutor(2)
		var b Batch
		if err := e.Fill(context.Background(), files, tr, 5, 1, goldenIndices, PadFromBatch, &b); err != nil {
			t.Fatal(err)
		}
		e.Close()
		if b.N != len(goldenIndices) || len(b.Errors) > 0 {
			t.Fatalf("batch of %d, errors %v", b.N, b.Errors)
		}
		d := NewDecoder()
		slot := tr.SampleBytes()
		for i, idx := range goldenIndices {
			hd, _ := parseHeader(files.files[idx])
			own, err := transform.NewTransform(layout, ops.Op{Kind: transform.OpCenterCrop, Size: [2]int{hd.h, hd.w}}, flip)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, own.SampleBytes())
			if err := d.Decode(files.files[idx], own, det.Key{Seed: 5, Epoch: 1, Index: uint64(idx)}, want); err != nil {
				t.Fatal(err)
			}
			got := b.Data[i*slot : (i+1)*slot]
			if binary.LittleEndian.Uint32(got[slot-8:]) != uint32(hd.h) || binary.LittleEndian.Uint32(got[slot-4:]) != uint32(hd.w) {
				t.Fatalf("sample %d: size %v, want %dx%d", idx, got[slot-8:], hd.h, hd.w)
			}
			checkCorner(t, got[:slot-8], want, hd.w, hd.h, bw, bh, layout, idx, 1)
		}
		d.Close()
	}
	tr, err := transform.NewTransformBound(transform.CHW, [2]int{bh - 1, bw}, flip)
	if err != nil {
		t.Fatal(err)
	}
	e := NewExecutor(2)
	defer e.Close()
	var b Batch
	if err := e.Fill(context.Background(), files, tr, 5, 1, goldenIndices, Drop, &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Errors) == 0 || b.N+len(b.Errors) != len(goldenIndices) {
		t.Fatalf("a bound a row under the tallest image: %d samples, errors %v", b.N, b.Errors)
	}
	for _, se := range b.Errors {
		if !strings.Contains(se.Err.Error(), "past the job's bound") {
			t.Errorf("sample %d: %v", se.Index, se.Err)
		}
	}
}
