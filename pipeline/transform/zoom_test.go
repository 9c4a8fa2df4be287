package transform

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestZoomOutDraws: RandomZoomOut's draws over many keys, as torchvision's
// make_params makes them (python/tests/test_parity_sampling.py compares the
// distributions): drawn at its p; the canvas int(side * r) a side for one
// r in side_range; the image inside it; traced as torchvision's pad, then
// the op after it.
func TestZoomOutDraws(t *testing.T) {
	const W, H, keys = 500, 375, 4000
	for _, tc := range []struct {
		next optab.Op
		fn   fn.Fn
	}{
		{optab.Op{Kind: OpResize, Size: [2]int{64, 80}}, fn.Resize},
		{optab.Op{Kind: OpRandomCrop, Size: [2]int{300, 300}}, fn.Crop},
		{optab.Op{Kind: OpCenterCrop, Size: [2]int{200, 220}}, fn.CenterCrop},
	} {
		tr := mustTransform(t, CHW, optab.Op{Kind: OpRandomZoomOut, P: 0.6, Args: &ZoomOutArgs{SideRange: [2]float64{1.5, 3}, Filling: optab.Filling{Fill: [3]float64{1, 2, 3}}}}, tc.next)
		drawn := 0
		for i := range uint64(keys) {
			p, err := tr.geomPlan(W, H, det.Key{Seed: 5, Index: i})
			if err != nil {
				t.Fatal(err)
			}
			steps := tr.geometrySteps(&p, nil)
			if !p.Zoomed {
				if len(steps) > 0 && steps[0].Fn == fn.Pad {
					t.Fatalf("key %d: not zoomed, traced %v", i, steps)
				}
				continue
			}
			drawn++
			pd := p.ZoomPad
			cw, ch := W+pd[0]+pd[2], H+pd[1]+pd[3]
			if min(pd[0], pd[1], pd[2], pd[3]) < 0 || cw != p.ZoomW || ch != p.ZoomH {
				t.Fatalf("key %d: padding %v, canvas %dx%d (plan %dx%d)", i, pd, cw, ch, p.ZoomW, p.ZoomH)
			}
			if cw < 750 || cw > 1500 || ch < 562 || ch > 1125 {
				t.Fatalf("key %d: canvas %dx%d outside side_range (1.5, 3) of %dx%d", i, cw, ch, W, H)
			}
			// One r for both sides: each truncated from side * r.
			if rw, rh := float64(cw)/W, float64(ch)/H; rw-rh > 1.0/H || rh-rw > 1.0/W {
				t.Fatalf("key %d: canvas %dx%d is not one ratio of %dx%d", i, cw, ch, W, H)
			}
			if steps[0].Fn != fn.Pad || steps[0].I != [6]int{pd[0], pd[1], pd[2], pd[3]} || steps[0].Fill != [3]float64{1, 2, 3} {
				t.Fatalf("key %d: trace %v, want pad %v first", i, steps, pd)
			}
			if steps[len(steps)-1].Fn != tc.fn && tc.fn != fn.Crop {
				t.Fatalf("key %d: trace %v, want %s last", i, steps, tc.fn)
			}
		}
		if f := float64(drawn) / keys; f < 0.57 || f > 0.63 {
			t.Errorf("%s: zoomed %.3f of the samples, want p = 0.6", tc.next.Kind, f)
		}
	}
}

// TestZoomOutRefused: RandomZoomOut's arguments and places that are not
// supported are refused when the transform is made, saying why.
func TestZoomOutRefused(t *testing.T) {
	zoom := optab.Op{Kind: OpRandomZoomOut, P: 0.5, Args: &ZoomOutArgs{SideRange: [2]float64{1, 4}}}
	resize := optab.Op{Kind: OpResize, Size: [2]int{64, 64}}
	with := func(f func(*optab.Op)) optab.Op { z := zoom; z.Args = optab.CloneArgs(zoom.Args); f(&z); return z }
	for _, tc := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{zoom}, "RandomZoomOut alone gives a size that varies"},
		{[]optab.Op{with(func(z *optab.Op) { z.Args.(*ZoomOutArgs).SideRange = [2]float64{0.5, 2} }), resize}, "side_range [0.5 2]: want 1 <= min <= max <= 16"},
		{[]optab.Op{with(func(z *optab.Op) { z.Args.(*ZoomOutArgs).SideRange = [2]float64{3, 2} }), resize}, "side_range"},
		{[]optab.Op{with(func(z *optab.Op) { z.Args.(*ZoomOutArgs).SideRange = [2]float64{1, 17} }), resize}, "side_range"},
		{[]optab.Op{with(func(z *optab.Op) { z.P = 1.5 }), resize}, "RandomZoomOut p=1.5"},
		{[]optab.Op{with(func(z *optab.Op) { z.Args.(*ZoomOutArgs).Fill = [3]float64{256, 0, 0} }), resize}, "fill [256 0 0]: want integers 0..255"},
		{[]optab.Op{zoom, {Kind: OpResize, Size: [2]int{64, 0}}}, "Resize(64) of the shorter side after RandomZoomOut"},
		{[]optab.Op{zoom, {Kind: OpRandomResizedCrop, Size: [2]int{64, 64}, Args: &RRCArgs{Scale: [2]float64{0.08, 1}, Ratio: [2]float64{0.75, 4.0 / 3}}}}, "RandomResizedCrop after RandomZoomOut"},
		{[]optab.Op{zoom, {Kind: OpPad, Args: &PadArgs{Padding: [4]int{1, 1, 1, 1}}}, {Kind: OpCenterCrop, Size: [2]int{8, 8}}}, "Pad after RandomZoomOut"},
		{[]optab.Op{zoom, resize, {Kind: OpCenterCrop, Size: [2]int{8, 8}}}, "RandomZoomOut, Resize then CenterCrop"},
		{[]optab.Op{zoom, {Kind: OpRandomCrop, Size: [2]int{8, 8}, Args: &RandomCropArgs{Padding: [4]int{2, 2, 2, 2}, Filling: optab.Filling{Fill: [3]float64{9, 9, 9}}}}}, "RandomZoomOut fill [0 0 0] then RandomCrop padding with fill [9 9 9]"},
		{[]optab.Op{resize, zoom}, "RandomZoomOut must be the first op"},
		{[]optab.Op{resize, {Kind: optab.OpRandomHorizontalFlip, P: 0.5}, zoom}, "RandomZoomOut after other ops"},
	} {
		_, err := NewTransform(CHW, tc.ops...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(tc.ops), err, tc.want)
		}
	}
}

// TestZoomOutCost: a RandomZoomOut before a Resize is predicted to cost its
// canvas, r*r times the image at worst for the largest r, which names it
// (at r = 16, 256 nominal photos of canvas, canvasNs a pixel: about 14 ms).
func TestZoomOutCost(t *testing.T) {
	resize := optab.Op{Kind: OpResize, Size: [2]int{64, 64}}
	plain := mustTransform(t, CHW, resize).Cost()
	small := mustTransform(t, CHW, optab.Op{Kind: OpRandomZoomOut, P: 0.5, Args: &ZoomOutArgs{SideRange: [2]float64{1, 4}}}, resize).Cost()
	large := mustTransform(t, CHW, optab.Op{Kind: OpRandomZoomOut, P: 0.5, Args: &ZoomOutArgs{SideRange: [2]float64{1, 16}}}, resize).Cost()
	if !(plain.Max < small.Max && small.Max < large.Max && small.Mean < small.Max) || !strings.Contains(large.Dominant, "RandomZoomOut") {
		t.Errorf("resize %v; zoom (1, 4) %v; zoom (1, 16) %v", plain, small, large)
	}
	if large.Max < time.Duration(CanvasNs*256*NominalSourcePx) {
		t.Errorf("a canvas of up to 16x16 photos predicted at %v at worst", large.Max)
	}
}
