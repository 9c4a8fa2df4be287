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

// TestSegPlans: the segmentation geometry's plans over many keys, against
// the steps they trace, as torchvision runs them: the resize's shorter
// side uniform in [lo, hi); the flip before the padding; PadIfSmaller's
// right and bottom padding exactly where the resized image is smaller than
// the crop; RandomCrop's top and left inside the padded image. The plan's
// window of the resized image, mirrored when flipped, is the traced
// crop's, and what of it shows (the padded plan's visible part) is the
// resized image inside the crop; the trace parses back.
func TestSegPlans(t *testing.T) {
	const W, H, keys, S = 500, 375, 4000, 240
	tr := mustTransform(t, transform.CHW, segOps(100, 400, S, [3]float64{1, 2, 3})...)
	shorter := map[int]int{}
	flips, pads, crops := 0, 0, 0
	for i := range uint64(keys) {
		var pl transform.Plan
		if err := tr.Plan(&pl, W, H, det.Key{Seed: 5, Index: i}, transform.BoxSource{}); err != nil {
			t.Fatal(err)
		}
		p := &pl.Views[0].Geom
		if s := min(p.RW, p.RH); s < 100 || s >= 400 || p.RH != s || p.RW != int(float64(s)*W/H) {
			t.Fatalf("key %d: resized to %dx%d", i, p.RW, p.RH)
		}
		shorter[min(p.RW, p.RH)]++
		steps := pl.Views[0].Geometry
		want := []fn.Step{{Fn: fn.Resize, I: [6]int{4: p.RH, 5: p.RW}, Antialias: true}}
		if p.Flip {
			flips++
			want = append(want, fn.Step{Fn: fn.HorizontalFlip})
		}
		pw, ph := max(p.RW, S), max(p.RH, S)
		if pw > p.RW || ph > p.RH {
			pads++
			want = append(want, fn.Step{Fn: fn.Pad, I: [6]int{0, 0, pw - p.RW, ph - p.RH}, Fill: [3]float64{1, 2, 3}, MaskFill: 255})
		}
		// The traced crop's place in the (flipped) padded image.
		top, left := 0, 0
		if pw > S || ph > S {
			crops++
			k := len(steps) - 1
			if steps[k].Fn != fn.Crop {
				t.Fatalf("key %d: traced %+v: no crop of the %dx%d padded image", i, steps, pw, ph)
			}
			top, left = steps[k].I[0], steps[k].I[1]
			if top < 0 || top > ph-S || left < 0 || left > pw-S {
				t.Fatalf("key %d: crop at %d,%d of %dx%d", i, top, left, pw, ph)
			}
			want = append(want, fn.Step{Fn: fn.Crop, I: [6]int{top, left, S, S}})
		}
		if !slices.Equal(steps, want) {
			t.Fatalf("key %d: traced %+v, want %+v", i, steps, want)
		}
		// The window of the unflipped resized image: mirrored when flipped.
		x0 := left
		if p.Flip {
			x0 = p.RW - left - S
		}
		vis := p.Visible()
		if !p.Padded {
			if p.CX != x0 || p.CY != top || p.CW != S || p.CH != S {
				t.Fatalf("key %d (flip %v): window %d,%d %dx%d, want %d,%d", i, p.Flip, p.CX, p.CY, p.CW, p.CH, x0, top)
			}
		} else if vx0 := max(x0, 0); vis.CX != vx0 || vis.CY != top || vis.CW != min(x0+S, p.RW)-vx0 || vis.CH != min(p.RH-top, S) {
			t.Fatalf("key %d (flip %v): visible %d,%d %dx%d of %dx%d, window at %d,%d", i, p.Flip, vis.CX, vis.CY, vis.CW, vis.CH, p.RW, p.RH, x0, top)
		}
		if x, y := p.PadAt(); p.Padded && (x != 0 || y != 0) { // padded on the right and bottom, flipped or not
			t.Fatalf("key %d (flip %v): the visible part at %d,%d", i, p.Flip, x, y)
		}
		back, err := transform.ParseTrace(transform.AppendTrace(nil, steps))
		for k := range steps {
			steps[k].MaskFill = 0 // the trace's fill is the pixels'
		}
		if err != nil || !slices.Equal(back, steps) {
			t.Fatalf("key %d: trace parsed back as %+v (%v)", i, back, err)
		}
	}
	if len(shorter) < 290 || flips < keys/3 || flips > 2*keys/3 || pads < keys/5 || crops < keys/2 {
		t.Errorf("%d shorter sides of 300, %d of %d flipped, %d padded, %d cropped", len(shorter), flips, keys, pads, crops)
	}
}

// TestSegRefused: PadIfSmaller and RandomResize then RandomCrop where they
// do not stand in the segmentation geometry, and two fills in one crop,
// are refused when the transform is made; a stop_epoch may switch the
// flip off.
func TestSegRefused(t *testing.T) {
	ops := segOps(100, 400, 240, [3]float64{})
	rr, flip, pad, crop := ops[0], ops[1], ops[2], ops[3]
	with := func(o optab.Op, f func(*optab.Op)) optab.Op { o.Args = optab.CloneArgs(o.Args); f(&o); return o }
	for _, tc := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{rr, pad}, "PadIfSmaller (op 1) needs a RandomCrop"},
		{[]optab.Op{rr, flip, pad, flip, crop}, "PadIfSmaller (op 2) needs a RandomCrop"},
		{[]optab.Op{{Kind: transform.OpResize, Size: [2]int{300, 300}}, pad, crop}, "PadIfSmaller is supported only"},
		{[]optab.Op{rr, crop, pad}, "op 2 (PadIfSmaller) after the RandomCrop"},
		{[]optab.Op{rr, crop, {Kind: transform.OpCenterCrop, Size: [2]int{100, 100}}}, "op 2 (CenterCrop) after the RandomCrop"},
		{[]optab.Op{rr, pad, with(crop, func(o *optab.Op) { o.Args = &transform.RandomCropArgs{Padding: [4]int{2, 2, 2, 2}} })}, "two fills"},
		{[]optab.Op{rr, pad, with(crop, func(o *optab.Op) { o.Args, o.Size = &transform.RandomCropArgs{PadIfNeeded: true}, [2]int{300, 300} })}, "two fills"},
		{[]optab.Op{rr, with(pad, func(o *optab.Op) { o.Size = [2]int{0, 0} }), crop}, "PadIfSmaller size 0"},
		{[]optab.Op{rr, with(pad, func(o *optab.Op) {
			o.Args = &transform.PadIfSmallerArgs{Filling: optab.Filling{Fill: [3]float64{256, 0, 0}}}
		}), crop}, "fill"},
		{[]optab.Op{with(rr, func(o *optab.Op) { o.Args = &transform.RandomResizeArgs{MinSize: 400, MaxSize: 100} }), pad, crop}, "min_size < max_size"},
	} {
		_, err := transform.NewTransform(transform.CHW, tc.ops...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(tc.ops), err, tc.want)
		}
	}
	// pad_if_needed of no more than PadIfSmaller's size never pads after it:
	// any fill.
	mustTransform(t, transform.CHW, rr, pad, with(crop, func(o *optab.Op) {
		o.Args = &transform.RandomCropArgs{PadIfNeeded: true, Filling: optab.Filling{Fill: [3]float64{9, 9, 9}}}
	}))
	// A stop_epoch switches the flip off (never drawn from then), the rest
	// stays.
	tr := mustTransform(t, transform.CHW, ops...)
	st, err := tr.WithStopEpoch(2, []optab.OpKind{optab.OpRandomHorizontalFlip})
	if err != nil {
		t.Fatal(err)
	}
	at := st.AtEpoch(2)
	for i := range uint64(64) {
		p, err := geomPlan(at, 500, 375, det.Key{Seed: 1, Index: i, Epoch: 2})
		if err != nil || p.Flip {
			t.Fatalf("key %d at the stop epoch: flip %v (%v)", i, p.Flip, err)
		}
	}
}
