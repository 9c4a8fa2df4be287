package pipeline

// GaussianBlur: torchvision.transforms.v2's, and gaussian_blur.

import "github.com/stoker-dev/stoker/pipeline/kernels"

const OpGaussianBlur OpKind = "GaussianBlur"

// FnGaussianBlur costs a pixel of one tap of one pass: (kx + ky) taps a
// pixel.
var FnGaussianBlur = defineFn(fnDef{name: "gaussian_blur", args: []arg{{"kernel_size", argInt, 0, 2}, {"sigma", argFloat, 0, 2}}, ns: 0.061,
	kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) {
		kernels.GaussianBlur(p, st.I[0], st.I[1], st.F[0], st.F[1], ks)
	},
	check: func(st *Step, _, _ int) error {
		for _, k := range st.I[:2] {
			if k <= 0 || k%2 == 0 || k > maxKernel {
				return stepError(st, "kernel_size %v: want odd, positive and at most %d", st.I[:2], maxKernel)
			}
		}
		if !(st.F[0] > 0 && st.F[1] > 0) || st.F[0] > 1e6 || st.F[1] > 1e6 {
			return stepError(st, "sigma %v: want positive", st.F[:2])
		}
		return nil
	},
	cost:    func(st *Step, ns, px float64) float64 { return ns * px * float64(st.I[0]+st.I[1]) },
	targets: targetsPixels})

// maxKernel bounds a blur's side: a sample's blur costs its side in
// multiply-adds per pixel (twice).
const maxKernel = 1023

func init() {
	defineOp(opDef{kind: OpGaussianBlur, doc: "a Gaussian blur of kernel_size (x, y) and sigma drawn uniform in (min, max)",
		params:  []param{{name: "kernel_size", typ: pSize}, {name: "sigma", typ: pRange, def: "(0.1, 2.0)"}},
		targets: targetsPixels, anyFormat: true, format: formatNone,
		compile: func(c *compiler, n *node, at compileAt) error {
			op := n.op
			for _, k := range op.KernelSize {
				if k <= 0 || k%2 == 0 || k > maxKernel {
					return opError(at.where, "kernel_size %v: each must be odd, positive and at most %d", op.KernelSize, maxKernel)
				}
			}
			if op.KernelSize[0]/2 >= c.w || op.KernelSize[1]/2 >= c.h {
				return opError(at.where, "kernel_size %v on a %dx%d image: torchvision refuses a kernel whose half is not smaller than the image's side", op.KernelSize, c.w, c.h)
			}
			if !(op.Sigma[0] > 0 && op.Sigma[0] <= op.Sigma[1] && op.Sigma[1] <= 1e4) {
				return opError(at.where, "sigma %v: want 0 < min <= max (at most 10000)", op.Sigma)
			}
			return nil
		},
		draw: func(n *node, r *RNG, d *drawer) {
			op := n.op
			s := r.Uniform(op.Sigma[0], op.Sigma[1])
			d.emit(Step{Fn: FnGaussianBlur, I: [6]int{op.KernelSize[0], op.KernelSize[1]}, F: [6]float64{s, s}})
		},
		maxNs: func(n *node, w, h int) float64 {
			return stepNs(Step{Fn: FnGaussianBlur, I: [6]int{n.op.KernelSize[0], n.op.KernelSize[1]}}, w, h)
		}})
}
