package ops

import (
	"math"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

func erasingOp() Op {
	return Op{Kind: OpRandomErasing, P: 0.5, Args: &ErasingArgs{Scale: [2]float64{0.02, 0.33}, Ratio: [2]float64{0.3, 3.3}}}
}

// TestErasingDraws: RandomErasing's make_params: at p, one box inside the
// image whose area is a fraction in scale of the image's and whose
// aspect is in ratio (up to the rounding of its sides), filled with
// value; a count of boxes (timm's) each of the area over the count; none
// when ten tries find no box that fits (torchvision's fallback).
func TestErasingDraws(t *testing.T) {
	const w, h, keys = 200, 150, 4000
	op := erasingOp()
	ea := op.Args.(*ErasingArgs)
	ea.Value = [3]float64{10, 20, 30}
	n := compileAt(t, op, w, h)
	hits := 0
	for i := range uint64(keys) {
		s := drawAt(&n, 6, i, w, h)
		if len(s) == 0 {
			continue
		}
		hits++
		st := s[0]
		if len(s) != 1 || st.Fn != fn.Erase || st.Fill != ea.Value || st.Random {
			t.Fatalf("sample %d drew %+v", i, s)
		}
		top, left, eh, ew := st.I[0], st.I[1], st.I[2], st.I[3]
		if top < 0 || left < 0 || eh < 1 || ew < 1 || top+eh > h || left+ew > w {
			t.Fatalf("sample %d: box %v outside the %dx%d image", i, st.I[:4], w, h)
		}
		// Each side is rounded: the area within (sqrt(a) +- 1/2)^2 of the
		// drawn one, the aspect likewise.
		area := float64(eh*ew) / (w * h)
		if area < 0.02*0.8 || area > 0.33*1.1 {
			t.Fatalf("sample %d: box %dx%d is %.3f of the image, want scale [0.02, 0.33]", i, ew, eh, area)
		}
		if asp := float64(eh) / float64(ew); asp < 0.3*0.75 || asp > 3.3*1.3 {
			t.Fatalf("sample %d: box %dx%d has aspect %.2f, want ratio [0.3, 3.3]", i, ew, eh, asp)
		}
	}
	within(t, "RandomErasing(p=0.5)", float64(hits)/keys, 0.5, keys)

	// A count: 2..4 boxes, each a quarter to a half of the lone box's area.
	op = erasingOp()
	ea = op.Args.(*ErasingArgs)
	op.P, ea.MinCount, ea.MaxCount = 1, 2, 4
	n = compileAt(t, op, w, h)
	if n.MaxSteps != 4 {
		t.Errorf("count 2..4: MaxSteps %d", n.MaxSteps)
	}
	counts := map[int]int{}
	for i := range uint64(3000) {
		s := drawAt(&n, 6, i, w, h)
		counts[len(s)]++
		for _, st := range s {
			if a := float64(st.I[2]*st.I[3]) / (w * h); a > 0.33/2*1.2 {
				t.Fatalf("sample %d: a box of %.3f of the image among %d, over 0.33/2", i, a, len(s))
			}
		}
	}
	if counts[2] == 0 || counts[3] == 0 || counts[4] == 0 || counts[2]+counts[3]+counts[4] < 2990 {
		t.Errorf("count 2..4 drew boxes %v", counts)
	}

	// max_count 0 is min_count: exactly that many.
	ea.MinCount, ea.MaxCount = 3, 0
	n = compileAt(t, op, w, h)
	for i := range uint64(200) {
		if s := drawAt(&n, 6, i, w, h); len(s) != 3 || n.MaxSteps != 3 {
			t.Fatalf("count 3 (max 0): sample %d drew %d boxes, MaxSteps %d", i, len(s), n.MaxSteps)
		}
	}

	// No box fits: the whole image at aspect 2 is taller than the image.
	op = erasingOp()
	ea = op.Args.(*ErasingArgs)
	op.P, ea.Scale, ea.Ratio = 1, [2]float64{1, 1}, [2]float64{2, 2}
	n = compileAt(t, op, w, h)
	for i := range uint64(100) {
		if s := drawAt(&n, 6, i, w, h); len(s) != 0 {
			t.Fatalf("sample %d: no box fits, but it drew %+v", i, s)
		}
	}
}

// TestErasingRandomValue: value="random" draws each box's noise seed
// (a step the kernel fills from it, for the Normalize given, ImageNet's
// when none is); per-box colours draw a pixel a channel, the Normalize of
// a standard normal value, in 0..255.
func TestErasingRandomValue(t *testing.T) {
	op := erasingOp()
	ea := op.Args.(*ErasingArgs)
	op.P, ea.RandomValue = 1, true
	n := compileOp(t, op)
	seeds := map[uint64]bool{}
	for i := range uint64(200) {
		s := draw(&n, 8, i)
		if len(s) == 0 {
			continue
		}
		st := s[0]
		want := [6]float64{fn.ImagenetMean[0], fn.ImagenetMean[1], fn.ImagenetMean[2], fn.ImagenetStd[0], fn.ImagenetStd[1], fn.ImagenetStd[2]}
		if !st.Random || st.F != want {
			t.Fatalf("sample %d drew %+v, want a random fill for ImageNet's Normalize", i, st)
		}
		seeds[st.Seed] = true
	}
	if len(seeds) < 150 {
		t.Errorf("%d distinct noise seeds over 200 samples", len(seeds))
	}

	ea.RandomColor = true
	ea.Mean, ea.Std = [3]float64{0.5, 0.5, 0.5}, [3]float64{0.25, 0.25, 0.25}
	n = compileOp(t, op)
	var sum float64
	var m int
	for i := range uint64(2000) {
		for _, st := range draw(&n, 8, i) {
			if st.Random {
				t.Fatalf("sample %d: a per-box colour drew noise: %+v", i, st)
			}
			for _, v := range st.Fill {
				if v < 0 || v > 255 || v != math.Floor(v) {
					t.Fatalf("sample %d: colour %v", i, st.Fill)
				}
				sum, m = sum+v, m+1
			}
		}
	}
	// 255 * (0.5 + 0.25 z): mean 127.5 (the clamping is symmetric).
	if mean := sum / float64(m); m < 3000 || math.Abs(mean-127.5) > 3 {
		t.Errorf("per-box colours: mean %.2f over %d channels, want about 127.5", mean, m)
	}
}

// TestErasingRefused: RandomErasing's arguments outside torchvision's
// (and timm's) bounds.
func TestErasingRefused(t *testing.T) {
	with := func(f func(*Op, *ErasingArgs)) Op {
		op := erasingOp()
		f(&op, op.Args.(*ErasingArgs))
		return op
	}
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{with(func(o *Op, a *ErasingArgs) { a.Value = [3]float64{-1, 0, 0} }), "op 1 (RandomErasing): value"},
		{with(func(o *Op, a *ErasingArgs) { a.Value = [3]float64{0, 256, 0} }), "value [0 256 0]"},
		{with(func(o *Op, a *ErasingArgs) { a.Scale = [2]float64{0.5, 1.5} }), "scale [0.5 1.5]"},
		{with(func(o *Op, a *ErasingArgs) { a.Scale = [2]float64{0.4, 0.2} }), "scale [0.4 0.2]"},
		{with(func(o *Op, a *ErasingArgs) { a.Ratio = [2]float64{0, 1} }), "ratio [0 1]"},
		{with(func(o *Op, a *ErasingArgs) { a.Ratio = [2]float64{1, math.Inf(1)} }), "ratio [1 +Inf]"},
		{with(func(o *Op, a *ErasingArgs) { a.RandomColor = true }), "RandomColor (one random colour per box) needs RandomValue"},
		// min > max: refused, as timm's randint(3, 2) and the wire's
		// reading (internal/opspec) refuse it, not drawn as 3.
		{with(func(o *Op, a *ErasingArgs) { a.MinCount, a.MaxCount = 3, 2 }), "count 3..2"},
		{with(func(o *Op, a *ErasingArgs) { a.MinCount, a.MaxCount = 2, -1 }), "count 2..-1"},
		{with(func(o *Op, a *ErasingArgs) { a.MaxCount = MaxEraseCount + 1 }), "count 0..17"},
		{with(func(o *Op, a *ErasingArgs) {
			a.RandomValue, a.Mean, a.Std = true, [3]float64{0.5, 0.5, 0.5}, [3]float64{0.2, 0, 0.2}
		}), "the noise's mean"},
		{with(func(o *Op, a *ErasingArgs) { o.P = 1.01 }), "p=1.01"},
	} {
		refused(t, tc.op, testW, testH, tc.want)
	}
}
