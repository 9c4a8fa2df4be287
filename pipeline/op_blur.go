package pipeline

// GaussianBlur: torchvision.transforms.v2's, and gaussian_blur.

import (
	"github.com/stoker-dev/stoker/pipeline/fn"
)

const OpGaussianBlur OpKind = "GaussianBlur"

func init() {
	defineOp(opDef{kind: OpGaussianBlur, doc: "a Gaussian blur of kernel_size (x, y) and sigma drawn uniform in (min, max)",
		params:  []param{{name: "kernel_size", typ: pSize}, {name: "sigma", typ: pRange, def: "(0.1, 2.0)"}},
		targets: targetsPixels, anyFormat: true, format: formatNone,
		compile: func(c *compiler, n *node, at compileAt) error {
			op := n.op
			for _, k := range op.KernelSize {
				if k <= 0 || k%2 == 0 || k > fn.MaxKernel {
					return opError(at.where, "kernel_size %v: each must be odd, positive and at most %d", op.KernelSize, fn.MaxKernel)
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
