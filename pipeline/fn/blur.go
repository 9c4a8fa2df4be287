package fn

// gaussian_blur: GaussianBlur's functional op (the class is
// pipeline/ops' blur.go).

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// GaussianBlur costs a pixel of one tap of one pass: (kx + ky) taps a
// pixel.
var GaussianBlur = define(Def{name: "gaussian_blur", args: []arg{{"kernel_size", argInt, 0, 2}, {"sigma", argFloat, 0, 2}}, Ns: 0.061,
	kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) {
		kernels.GaussianBlur(p, st.I[0], st.I[1], st.F[0], st.F[1], ks)
	},
	check: func(st *Step, _, _ int) error {
		for _, k := range st.I[:2] {
			if k <= 0 || k%2 == 0 || k > MaxKernel {
				return StepError(st, "kernel_size %v: want odd, positive and at most %d", st.I[:2], MaxKernel)
			}
		}
		if !(st.F[0] > 0 && st.F[1] > 0) || st.F[0] > 1e6 || st.F[1] > 1e6 {
			return StepError(st, "sigma %v: want positive", st.F[:2])
		}
		return nil
	},
	fails: func(st *Step, w, h int) error {
		if err := BlurFits(st.I[0], st.I[1], w, h); err != nil {
			return StepError(st, "%v", err)
		}
		return nil
	},
	Cost: func(st *Step, ns, px float64) float64 { return ns * px * float64(st.I[0]+st.I[1]) },
	Role: TargetsPixels})

// BlurFits refuses a kx x ky blur kernel whose half is not smaller than
// the w x h image's side, as torchvision's reflect padding does: once,
// where the transform has one size or a bound (GaussianBlur's Compile),
// and for each drawn blur before its kernel runs (its Def's fails), so
// that after a geometry of per-sample sizes a sample too small for the
// kernel fails alone. A parsed trace's blur (check) runs on any size,
// its borders reflected as often as the kernel needs.
func BlurFits(kx, ky, w, h int) error {
	if kx/2 >= w || ky/2 >= h {
		return fmt.Errorf("kernel_size [%d %d] on a %dx%d image: torchvision refuses a kernel whose half is not smaller than the image's side", kx, ky, w, h)
	}
	return nil
}

// MaxKernel bounds a blur's side: a sample's blur costs its side in
// multiply-adds per pixel (twice).
const MaxKernel = 1023
