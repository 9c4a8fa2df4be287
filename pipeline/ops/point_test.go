package ops

import (
	"math"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// TestAppliedDraws: the flips and the point ops draw only whether they
// apply (torchvision's _RandomApplyTransform): at p, the one step their
// arguments make (solarize's threshold, posterize's bits, sharpness'
// factor), and nothing else.
func TestAppliedDraws(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want fn.Step
	}{
		{Op{Kind: OpRandomHorizontalFlip, P: 0.5}, fn.Step{Fn: fn.HorizontalFlip}},
		{Op{Kind: OpRandomVerticalFlip, P: 0.25}, fn.Step{Fn: fn.VerticalFlip}},
		{Op{Kind: OpRandomSolarize, P: 0.7, Args: &SolarizeArgs{Threshold: 200}}, fn.Step{Fn: fn.Solarize, F: [6]float64{200}}},
		{Op{Kind: OpRandomPosterize, P: 0.5, Args: &PosterizeArgs{Bits: 3}}, fn.Step{Fn: fn.Posterize, I: [6]int{3}}},
		{Op{Kind: OpRandomInvert, P: 0.1}, fn.Step{Fn: fn.Invert}},
		{Op{Kind: OpRandomEqualize, P: 0.5}, fn.Step{Fn: fn.Equalize}},
		{Op{Kind: OpRandomAutocontrast, P: 0.9}, fn.Step{Fn: fn.Autocontrast}},
		{Op{Kind: OpRandomAdjustSharpness, P: 0.5, Args: &SharpnessArgs{Factor: 0.25}}, fn.Step{Fn: fn.AdjustSharpness, F: [6]float64{0.25}}},
	} {
		n := compileOp(t, tc.op)
		const keys = 4000
		hits := 0
		for i := range uint64(keys) {
			switch s := draw(&n, 11, i); {
			case len(s) == 1 && s[0] == tc.want:
				hits++
			case len(s) != 0:
				t.Fatalf("%s sample %d drew %+v, want %+v or nothing", tc.op.Kind, i, s, tc.want)
			}
		}
		within(t, OpsString([]Op{tc.op}), float64(hits)/keys, tc.op.P, keys)
	}
}

// TestAppliedRefused: a probability outside 0..1 (NaN too) and the
// point ops' arguments outside their ranges.
func TestAppliedRefused(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: OpRandomHorizontalFlip, P: 2}, "op 1 (RandomHorizontalFlip): p=2"},
		{Op{Kind: OpRandomHorizontalFlip, P: -0.1}, "p=-0.1"},
		{Op{Kind: OpRandomVerticalFlip, P: math.NaN()}, "p=NaN"},
		{Op{Kind: OpRandomSolarize, P: 1.5, Args: &SolarizeArgs{Threshold: 128}}, "op 1 (RandomSolarize): p=1.5"},
		{Op{Kind: OpRandomSolarize, P: 1, Args: &SolarizeArgs{Threshold: 300}}, "threshold 300"},
		{Op{Kind: OpRandomPosterize, P: 1, Args: &PosterizeArgs{Bits: 9}}, "bits 9"},
		{Op{Kind: OpRandomPosterize, P: 1, Args: &PosterizeArgs{Bits: -1}}, "bits -1"},
		{Op{Kind: OpRandomAdjustSharpness, P: 1, Args: &SharpnessArgs{Factor: math.Inf(1)}}, "sharpness_factor +Inf"},
		{Op{Kind: OpRandomGrayscale, P: -1}, "op 1 (RandomGrayscale): p=-1"},
	} {
		refused(t, tc.op, testW, testH, tc.want)
	}
}

// TestBlurDraws: GaussianBlur's sigma uniform in (min, max), the same on
// both axes, with its kernel_size (x, y); its worst cost is its kernel's.
func TestBlurDraws(t *testing.T) {
	op := Op{Kind: OpGaussianBlur, Args: &BlurArgs{KernelSize: [2]int{7, 3}, Sigma: [2]float64{0.5, 3}}}
	n := compileOp(t, op)
	const keys = 6000
	var sum float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range uint64(keys) {
		s := draw(&n, 2, i)
		if len(s) != 1 || s[0].Fn != fn.GaussianBlur || s[0].I != [6]int{7, 3} || s[0].F[0] != s[0].F[1] {
			t.Fatalf("sample %d drew %+v", i, s)
		}
		sg := s[0].F[0]
		if !(sg >= 0.5 && sg <= 3) {
			t.Fatalf("sample %d: sigma %v outside [0.5, 3]", i, sg)
		}
		sum, lo, hi = sum+sg, math.Min(lo, sg), math.Max(hi, sg)
	}
	if mean, sd := sum/keys, 2.5/math.Sqrt(12*keys); math.Abs(mean-1.75) > 4.5*sd || lo > 0.51 || hi < 2.99 {
		t.Errorf("sigma: mean %.4f over [%.3f, %.3f], want uniform in [0.5, 3]", mean, lo, hi)
	}
	if got, want := n.MaxNs(testW, testH), StepNs(fn.Step{Fn: fn.GaussianBlur, I: [6]int{7, 3}}, testW, testH); got != want || !(got > 0) {
		t.Errorf("MaxNs %v, want its kernel's %v", got, want)
	}
	// A fixed sigma, (s, s), draws s.
	n = compileOp(t, Op{Kind: OpGaussianBlur, Args: &BlurArgs{KernelSize: [2]int{3, 3}, Sigma: [2]float64{1.5, 1.5}}})
	if s := draw(&n, 2, 0); s[0].F[0] != 1.5 {
		t.Errorf("sigma (1.5, 1.5) drew %v", s[0].F[0])
	}
}

// TestBlurRefused: kernel sides odd, positive, at most fn.MaxKernel and
// with a half below the image's side (torchvision's bound); sigma in
// (0, 10000], min <= max.
func TestBlurRefused(t *testing.T) {
	blur := func(kx, ky int, lo, hi float64) Op {
		return Op{Kind: OpGaussianBlur, Args: &BlurArgs{KernelSize: [2]int{kx, ky}, Sigma: [2]float64{lo, hi}}}
	}
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{blur(4, 3, 0.1, 2), "op 1 (GaussianBlur): kernel_size [4 3]"},
		{blur(3, 0, 0.1, 2), "kernel_size [3 0]"},
		{blur(-3, 3, 0.1, 2), "kernel_size [-3 3]"},
		{blur(fn.MaxKernel+2, 3, 0.1, 2), "at most"},
		{blur(3, 49, 0.1, 2), "torchvision refuses a kernel whose half is not smaller than the image's side"},
		{blur(3, 3, 0, 2), "sigma [0 2]"},
		{blur(3, 3, 2, 1), "sigma [2 1]"},
		{blur(3, 3, 1, 2e4), "sigma [1 20000]"},
		{blur(3, 3, math.NaN(), 1), "sigma [NaN 1]"},
	} {
		refused(t, tc.op, testW, testH, tc.want)
	}
	// The half bound on a 32x24 output: 47 (half 23) fits the height of
	// 24, 49 does not.
	compileOp(t, blur(3, 47, 0.1, 2))
}
