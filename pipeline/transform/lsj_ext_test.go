package transform_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestScaleJitterDraws: ScaleJitter's sizes and FixedSizeCrop's offsets
// over many keys, as their make_params draw them
// (python/tests/test_lsj.py compares the distributions with
// torchvision's): one r for both sides, each int(side * r) with r the
// base ratio times a scale in scale_range, uniform (its mean); the crop's
// top and left one uniform times the room on each side; traced as resize
// then fixed_size_crop, which the trace parses back.
func TestScaleJitterDraws(t *testing.T) {
	const W, H, keys = 500, 375, 4000
	tr := mustTransform(t, transform.CHW, lsjOps(400, 300, [3]float64{1, 2, 3})...)
	base := min(400.0/W, 400.0/H)
	var sum float64
	crops, pads, flips := 0, 0, 0
	for i := range uint64(keys) {
		var pl transform.Plan
		if err := tr.Plan(&pl, W, H, det.Key{Seed: 3, Index: i}, transform.BoxSource{}); err != nil {
			t.Fatal(err)
		}
		p := &pl.Views[0].Geom
		s := float64(p.RW) / W / base
		if s < 0.1-0.01 || s > 2+1e-9 || p.RH < int(float64(H)*base*0.1)-1 || p.RH > int(float64(H)*base*2) {
			t.Fatalf("key %d: resized to %dx%d: scale %v outside (0.1, 2)", i, p.RW, p.RH, s)
		}
		if rw, rh := float64(p.RW)/W, float64(p.RH)/H; rw-rh > 1.0/H || rh-rw > 1.0/W {
			t.Fatalf("key %d: %dx%d is not one ratio of %dx%d", i, p.RW, p.RH, W, H)
		}
		sum += s
		offW, offH := max(p.RW-300, 0), max(p.RH-300, 0)
		if p.CX < 0 || p.CX > offW || p.CY < 0 || p.CY > offH {
			t.Fatalf("key %d: crop at %d,%d of %dx%d", i, p.CX, p.CY, p.RW, p.RH)
		}
		if offW > 0 && offH > 0 { // one r: top/offH and left/offW agree
			if d := float64(p.CX)/float64(offW) - float64(p.CY)/float64(offH); d > 1.0/float64(offH)+1e-9 || d < -1.0/float64(offW)-1e-9 {
				t.Fatalf("key %d: left %d of %d, top %d of %d: not one r", i, p.CX, offW, p.CY, offH)
			}
		}
		if offW > 0 || offH > 0 {
			crops++
		}
		if p.Padded != (p.RW < 300 || p.RH < 300) || (p.Padded && (p.PadL != 0 || p.PadT != 0 || p.RCFill != [3]float64{1, 2, 3})) {
			t.Fatalf("key %d: %dx%d padded %v at %d,%d fill %v", i, p.RW, p.RH, p.Padded, p.PadL, p.PadT, p.RCFill)
		}
		if p.Padded {
			pads++
		}
		steps := pl.Views[0].Geometry
		want := []fn.Step{{Fn: fn.Resize, I: [6]int{4: p.RH, 5: p.RW}, Antialias: true},
			{Fn: fn.FixedSizeCrop, I: [6]int{p.CY, p.CX, min(p.RH, 300), min(p.RW, 300), 300, 300}, Fill: [3]float64{1, 2, 3}}}
		if p.Flip {
			flips++
			want = append(want, fn.Step{Fn: fn.HorizontalFlip})
		}
		if !slices.Equal(steps, want) {
			t.Fatalf("key %d: traced %+v, want %+v", i, steps, want)
		}
		back, err := transform.ParseTrace(transform.AppendTrace(nil, steps))
		if err != nil || !slices.Equal(back, steps) {
			t.Fatalf("key %d: trace parsed back as %+v (%v)", i, back, err)
		}
	}
	if m := sum / keys; m < 1.05-0.03 || m > 1.05+0.03 {
		t.Errorf("mean scale %.3f, want 1.05 (uniform in (0.1, 2))", m)
	}
	if crops < keys/4 || pads < keys/4 || flips < keys/3 || flips > 2*keys/3 {
		t.Errorf("%d of %d cropped, %d padded, %d flipped", crops, keys, pads, flips)
	}
}

// TestLSJRefused: ScaleJitter's and FixedSizeCrop's arguments and places
// that are not supported are refused when the transform is made.
func TestLSJRefused(t *testing.T) {
	ops := lsjOps(1024, 1024, [3]float64{})
	jit, crop, flip := ops[0], ops[1], ops[2]
	with := func(o optab.Op, f func(*optab.Op)) optab.Op { o.Args = optab.CloneArgs(o.Args); f(&o); return o }
	for _, tc := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{jit}, "ScaleJitter gives a size that varies"},
		{[]optab.Op{jit, flip, crop}, "ScaleJitter gives a size that varies"},
		{[]optab.Op{with(jit, func(o *optab.Op) { o.Args = &transform.ScaleJitterArgs{Scale: [2]float64{0, 2}} }), crop}, "scale_range [0 2]"},
		{[]optab.Op{with(jit, func(o *optab.Op) { o.Args = &transform.ScaleJitterArgs{Scale: [2]float64{2, 1}} }), crop}, "scale_range"},
		{[]optab.Op{with(jit, func(o *optab.Op) { o.Args = &transform.ScaleJitterArgs{Scale: [2]float64{1, 17}} }), crop}, "scale_range"},
		{[]optab.Op{with(jit, func(o *optab.Op) { o.Size = [2]int{0, 0} }), crop}, "size"},
		{[]optab.Op{jit, with(crop, func(o *optab.Op) {
			o.Args = &transform.FixedSizeCropArgs{Filling: optab.Filling{Fill: [3]float64{1.5, 0, 0}}}
		})}, "fill"},
		{[]optab.Op{jit, crop, {Kind: transform.OpResize, Size: [2]int{64, 64}}}, "op 2 (Resize) after FixedSizeCrop"},
		{[]optab.Op{{Kind: transform.OpResize, Size: [2]int{64, 64}}, jit, crop}, "ScaleJitter after other ops"},
		{[]optab.Op{crop, flip, crop}, "op 2 (FixedSizeCrop): FixedSizeCrop after other ops"},
		{[]optab.Op{{Kind: transform.OpResize, Size: [2]int{64, 64}}, crop}, "FixedSizeCrop after other ops"},
		{[]optab.Op{jit, {Kind: transform.OpResize, Size: [2]int{64, 64}}, crop}, "ScaleJitter gives a size that varies"},
		{[]optab.Op{crop, crop}, "op 1 (FixedSizeCrop) after FixedSizeCrop"},
	} {
		_, err := transform.NewTransform(transform.CHW, tc.ops...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(tc.ops), err, tc.want)
		}
	}
	// A side resized to 0 pixels fails its sample, as torchvision's resize.
	tr := mustTransform(t, transform.CHW, with(jit, func(o *optab.Op) {
		o.Size = [2]int{8, 8}
		o.Args = &transform.ScaleJitterArgs{Scale: [2]float64{0.01, 0.01}}
	}), crop)
	if _, err := geomPlan(tr, 40, 30, det.Key{}); err == nil || !strings.Contains(err.Error(), "a side of 0 pixels") {
		t.Errorf("a side of 0: %v", err)
	}
}
