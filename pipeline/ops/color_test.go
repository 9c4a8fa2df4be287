package ops

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
)

func photometricOp() Op {
	return Op{Kind: OpRandomPhotometricDistort, P: 0.5, Args: &PhotometricDistortArgs{Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}}}
}

// TestColorJitterDraws: ColorJitter's make_params: the four adjustments
// in an order drawn uniformly (all 24), each factor uniform in its
// range, a single number x the range [max(0, 1-x), 1+x] (hue [-x, x]),
// None (0, or a range of (1, 1)) never drawn.
func TestColorJitterDraws(t *testing.T) {
	n := compileOp(t, ColorJitterOp(0.4, 1.5, 0.2, 0.1))
	ranges := map[fn.Fn][2]float64{fn.AdjustBrightness: {0.6, 1.4}, fn.AdjustContrast: {0, 2.5},
		fn.AdjustSaturation: {0.8, 1.2}, fn.AdjustHue: {-0.1, 0.1}}
	const keys = 24000
	orders := map[[4]fn.Fn]int{}
	sums := map[fn.Fn]float64{}
	for i := range uint64(keys) {
		steps := draw(&n, 3, i)
		if len(steps) != 4 {
			t.Fatalf("sample %d drew %d steps, want the four adjustments: %+v", i, len(steps), steps)
		}
		var order [4]fn.Fn
		for j, st := range steps {
			r, ok := ranges[st.Fn]
			if !ok || !(st.F[0] >= r[0] && st.F[0] <= r[1]) {
				t.Fatalf("sample %d: %+v outside %v", i, st, r)
			}
			order[j] = st.Fn
			sums[st.Fn] += st.F[0]
		}
		orders[order]++
	}
	if len(orders) != 24 {
		t.Errorf("%d orders drawn, want all 24", len(orders))
	}
	if x := chiSquare(orders, 24, keys); x > 49.7 { // 23 degrees of freedom, p = 0.001
		t.Errorf("chi-square %.1f over the 24 orders: not uniform", x)
	}
	for f, r := range ranges {
		mean, sd := (r[0]+r[1])/2, (r[1]-r[0])/math.Sqrt(12*keys)
		if got := sums[f] / keys; math.Abs(got-mean) > 4.5*sd {
			t.Errorf("%s: mean factor %.4f, want %.4f (uniform in %v)", f, got, mean, r)
		}
	}

	// None is not drawn: brightness alone, and a range form whose
	// contrast is (1, 1).
	for _, op := range []Op{ColorJitterOp(0.4, 0, 0, 0),
		{Kind: OpColorJitter, Args: &ColorJitterArgs{Ranges: true, Jitter: [4][2]float64{{0.5, 0.9}, {1, 1}, {1, 1}, {0, 0}}}}} {
		n := compileOp(t, op)
		if n.MaxSteps != 4 {
			t.Errorf("%s: MaxSteps %d", OpsString([]Op{op}), n.MaxSteps)
		}
		for i := range uint64(200) {
			steps := draw(&n, 3, i)
			if len(steps) != 1 || steps[0].Fn != fn.AdjustBrightness || steps[0].F[0] < 0.5 || steps[0].F[0] > 1.4 {
				t.Fatalf("%s sample %d drew %+v, want one brightness step", OpsString([]Op{op}), i, steps)
			}
		}
	}
}

// TestColorJitterRefused: torchvision's _check_input bounds, and
// stoker's factor bound.
func TestColorJitterRefused(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: OpColorJitter, Args: &ColorJitterArgs{Contrast: -1}}, "op 1 (ColorJitter): contrast -1"},
		{Op{Kind: OpColorJitter, Args: &ColorJitterArgs{Saturation: math.NaN()}}, "op 1 (ColorJitter): saturation NaN"},
		{Op{Kind: OpColorJitter, Args: &ColorJitterArgs{Brightness: math.Inf(1)}}, "brightness +Inf: a single number must be finite"},
		{ColorJitterOp(0, 0, 0, 0.6), "hue [-0.6 0.6]"},
		{Op{Kind: OpColorJitter, Args: &ColorJitterArgs{Ranges: true, Jitter: [4][2]float64{{1.2, 0.8}, {1, 1}, {1, 1}, {0, 0}}}}, "brightness [1.2 0.8]"},
		{Op{Kind: OpColorJitter, Args: &ColorJitterArgs{Ranges: true, Jitter: [4][2]float64{{1, 1}, {-0.5, 1}, {1, 1}, {0, 0}}}}, "contrast [-0.5 1]"},
		{ColorJitterOp(0, 0, 101, 0), "a factor over 100"},
	} {
		refused(t, tc.op, testW, testH, tc.want)
	}
}

// TestPhotometricDraws: RandomPhotometricDistort's steps over many keys:
// each factor at p within its range, in torchvision's order (brightness,
// contrast if before, saturation, hue, contrast if after, the
// permutation), contrast before at even odds, every permutation of the
// channels about as often (test_detection_ops.py compares the
// distributions with make_params').
func TestPhotometricDraws(t *testing.T) {
	n := compileAt(t, photometricOp(), 8, 8)
	const keys = 12000
	var on [5]int
	before, contrast := 0, 0
	perms := map[[3]int]int{}
	for i := range uint64(keys) {
		steps := drawAt(&n, 4, i, 8, 8)
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
	if n.MaxSteps != 5 {
		t.Errorf("MaxSteps %d, want 5", n.MaxSteps)
	}
	// Its ranges are checked as ColorJitter's (it has no other form).
	bad := photometricOp()
	bad.Args.(*PhotometricDistortArgs).Jitter[3] = [2]float64{-0.6, 0}
	refused(t, bad, 8, 8, "op 1 (RandomPhotometricDistort): hue [-0.6 0]")
}

// TestGrayscaleDraws: Grayscale draws its three-channel luma step every
// time, RandomGrayscale the same step at p.
func TestGrayscaleDraws(t *testing.T) {
	gray := fn.Step{Fn: fn.RGBToGrayscale, I: [6]int{3}}
	g := compileOp(t, Op{Kind: OpGrayscale})
	rg := compileOp(t, Op{Kind: OpRandomGrayscale, P: 0.3})
	const keys = 4000
	hits := 0
	for i := range uint64(keys) {
		if s := draw(&g, 1, i); len(s) != 1 || s[0] != gray {
			t.Fatalf("Grayscale sample %d drew %+v, want %+v", i, s, gray)
		}
		switch s := draw(&rg, 1, i); {
		case len(s) == 1 && s[0] == gray:
			hits++
		case len(s) != 0:
			t.Fatalf("RandomGrayscale sample %d drew %+v", i, s)
		}
	}
	within(t, "RandomGrayscale(p=0.3)", float64(hits)/keys, 0.3, keys)
}

// TestRandomChannelPermutation: the op made from its definition alone (a
// NamedOp, as the wire reads it): its draws are the six permutations
// uniformly (chi-square), each a permute_channels step that moves plane
// perm[c] to plane c; the names a NamedOp may not use are refused.
func TestRandomChannelPermutation(t *testing.T) {
	op, err := NamedOp("RandomChannelPermutation", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := OpsString([]Op{op}); got != "RandomChannelPermutation" {
		t.Errorf("String: %q", got)
	}
	node := compileAt(t, op, 4, 4)
	const n = 60000
	counts := map[[3]int]int{}
	for i := range uint64(n) {
		steps := drawAt(&node, 7, i, 4, 4)
		if len(steps) != 1 || steps[0].Fn != fn.PermuteChannels {
			t.Fatalf("sample %d drew %+v, want one permute_channels step", i, steps)
		}
		counts[[3]int(steps[0].I[:3])]++
	}
	if len(counts) != 6 {
		t.Fatalf("%d permutations drawn, want all 6: %v", len(counts), counts)
	}
	if chi2 := chiSquare(counts, 6, n); chi2 > 20.5 { // 5 degrees of freedom, p = 0.001
		t.Errorf("chi-square %.1f over 6 permutations (%v): not uniform", chi2, counts)
	}

	// The step's kernel: plane c of the output is plane perm[c].
	steps := drawAt(&node, 7, 1, 4, 4)
	pix := make([]byte, 3*16)
	for i := range pix {
		pix[i] = byte(i / 16 * 100)
	}
	if err := ApplyTrace(pix, 4, 4, steps); err != nil {
		t.Fatal(err)
	}
	for c := range 3 {
		if want := byte(steps[0].I[c] * 100); pix[c*16] != want {
			t.Errorf("plane %d holds %d, want plane %d's %d", c, pix[c*16], steps[0].I[c], want)
		}
	}

	for _, tc := range []struct {
		kind string
		args map[string]any
		msg  string
	}{
		{"RandomChannelPermutation", map[string]any{"p": 0.5}, `unknown argument "p"`},
		{"RandomSolarize", map[string]any{"threshold": 300.0}, "threshold: 300: want 0..255"},
		{"NoSuchOp", nil, "unknown op"},
	} {
		if _, err := NamedOp(tc.kind, tc.args); !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("NamedOp(%s, %v): %v, want an error saying %q", tc.kind, tc.args, err, tc.msg)
		}
	}
}
