package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/det"
	"github.com/stoker-dev/stoker/pipeline/internal/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

func photometricOp() optab.Op {
	return optab.Op{Kind: optab.OpRandomPhotometricDistort, P: 0.5, JitterRanges: true,
		Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}
}

// TestPhotometricDraws: RandomPhotometricDistort's steps over many keys:
// each factor at p within its range, in torchvision's order (brightness,
// contrast if before, saturation, hue, contrast if after, the
// permutation), contrast before at even odds, every permutation of the
// channels about as often (test_detection_ops.py compares the
// distributions with make_params').
func TestPhotometricDraws(t *testing.T) {
	tr := mustTransform(t, CHW, optab.Op{Kind: OpResize, Size: [2]int{8, 8}}, photometricOp())
	const keys = 12000
	var on [5]int
	before, contrast := 0, 0
	perms := map[[3]int]int{}
	for i := range uint64(keys) {
		steps := tr.sampler().DrawSteps(det.Key{Seed: 4, Index: i}, nil)
		last, sawSat := -1, false
		for _, st := range steps {
			rank := map[fn.Fn]int{fn.AdjustBrightness: 0, fn.AdjustContrast: 1, fn.AdjustSaturation: 2, fn.AdjustHue: 3, fn.PermuteChannels: 4}[st.Fn]
			switch st.Fn {
			case fn.AdjustBrightness, fn.AdjustSaturation, fn.AdjustHue:
				if st.Fn == fn.AdjustBrightness && last >= 0 || st.Fn != fn.AdjustBrightness && rank < last {
					t.Fatalf("key %d: order %v", i, steps)
				}
				last, sawSat = rank, sawSat || st.Fn != fn.AdjustBrightness
			case fn.AdjustContrast:
				contrast++
				if !sawSat && last <= 0 {
					before++
				}
			case fn.PermuteChannels:
				perms[[3]int(st.I[:3])]++
			}
			on[rank]++
			r := [5][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}, {0, 2}}[rank]
			if st.Fn != fn.PermuteChannels && !(st.F[0] >= r[0] && st.F[0] <= r[1]) {
				t.Fatalf("key %d: %v outside %v", i, st, r)
			}
		}
	}
	for i, n := range on {
		if f := float64(n) / keys; f < 0.48 || f > 0.52 {
			t.Errorf("step %d drawn in %.3f of the samples, want p = 0.5", i, f)
		}
	}
	// Contrast first of the middle ones: "before" half the time, and
	// after when neither saturation nor hue is drawn also counts as first.
	if f := float64(before) / float64(contrast); f < 0.58 || f > 0.67 {
		t.Errorf("contrast first in %.3f of its draws, want 0.5 + 0.5/4", f)
	}
	if len(perms) != 6 {
		t.Errorf("%d permutations drawn: %v", len(perms), perms)
	}
	for pm, n := range perms {
		if f := float64(n) / float64(on[4]); f < 0.15 || f > 0.185 {
			t.Errorf("permutation %v: %.3f of them, want 1/6", pm, f)
		}
	}
}

// TestPermuteChannels: output channel c is input channel perm[c]
// (torchvision's image[:, perm]), for every permutation.
func TestPermuteChannels(t *testing.T) {
	for _, pm := range [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		p := kernels.Planes{Pix: make([]byte, 3*6), W: 3, H: 2}
		for i := range p.Pix {
			p.Pix[i] = byte(i)
		}
		orig := append([]byte(nil), p.Pix...)
		fn.Apply(p, &fn.Step{Fn: fn.PermuteChannels, I: [6]int{pm[0], pm[1], pm[2]}}, nil)
		for c := range 3 {
			if string(p.Plane(c)) != string(orig[6*pm[c]:6*pm[c]+6]) {
				t.Errorf("%v: plane %d is %v", pm, c, p.Plane(c))
			}
		}
		if err := fn.Check(&fn.Step{Fn: fn.PermuteChannels, I: [6]int{pm[0], pm[1], pm[2]}}, 3, 2); err != nil {
			t.Error(err)
		}
	}
	if err := fn.Check(&fn.Step{Fn: fn.PermuteChannels, I: [6]int{0, 0, 3}}, 3, 2); err == nil {
		t.Error("permutation [0 0 3] taken")
	}
}

// TestPhotometricPlaces: before the geometry only when it ends in
// Resize((h, w)); at most maxPre; its ranges checked.
func TestPhotometricPlaces(t *testing.T) {
	resize := optab.Op{Kind: OpResize, Size: [2]int{32, 32}}
	zoom := optab.Op{Kind: OpRandomZoomOut, P: 0.5, SideRange: [2]float64{1, 4}}
	for _, ops := range [][]optab.Op{{photometricOp(), resize}, {photometricOp(), zoom, resize}, {photometricOp(), photometricOp(), iouOp(), resize},
		{resize, photometricOp()}} {
		if _, err := NewTransform(CHW, ops...); err != nil {
			t.Errorf("%s: %v", optab.OpsString(ops), err)
		}
	}
	bad := photometricOp()
	bad.Jitter[3] = [2]float64{-0.6, 0}
	for _, tc := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{photometricOp(), {Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{0.75, 4.0 / 3}}}, "needs a geometry that ends in Resize((h, w))"},
		{[]optab.Op{photometricOp(), {Kind: OpResize, Size: [2]int{32, 0}}, {Kind: OpCenterCrop, Size: [2]int{8, 8}}}, "needs a geometry that ends in Resize((h, w))"},
		{[]optab.Op{photometricOp(), zoom, {Kind: OpRandomCrop, Size: [2]int{8, 8}}}, "needs a geometry that ends in Resize((h, w))"},
		{[]optab.Op{photometricOp(), photometricOp(), photometricOp(), photometricOp(), photometricOp(), resize}, "5 ops before the geometry"},
		{[]optab.Op{resize, bad}, "hue [-0.6 0]"},
		{[]optab.Op{photometricOp()}, "no geometry op"},
	} {
		_, err := NewTransform(CHW, tc.ops...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(tc.ops), err, tc.want)
		}
	}
}
