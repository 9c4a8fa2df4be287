package ops

// GaussianBlur: torchvision.transforms.v2's, and gaussian_blur.

import (
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
)

const OpGaussianBlur OpKind = "GaussianBlur"

func init() {
	Define(Def{Kind: OpGaussianBlur, Doc: "a Gaussian blur of kernel_size (x, y) and sigma drawn uniform in (min, max)",
		Params:  []Param{{Name: "kernel_size", Typ: PSize}, {Name: "sigma", Typ: PRange, Def: "(0.1, 2.0)"}},
		Targets: TargetsPixels, AnyFormat: true, Format: FormatNone,
		Keeps: func(op *Op) Keeps { return Keeps{Blur: true, BlurSide: max(op.KernelSize[0], op.KernelSize[1])} },
		FromArgs: func(a *Args) Op {
			op := Op{KernelSize: a.Size("kernel_size")}
			switch s := a.Floats("sigma"); len(s) {
			case 1:
				op.Sigma = [2]float64{s[0], s[0]}
			case 2:
				op.Sigma = [2]float64(s)
			default:
				a.Errorf("sigma %v: want a number or (min, max)", s)
			}
			return op
		},
		Compile: func(c *Compiler, n *Node, at CompileAt) error {
			op := n.Op
			for _, k := range op.KernelSize {
				if k <= 0 || k%2 == 0 || k > fn.MaxKernel {
					return OpError(at.Where, "kernel_size %v: each must be odd, positive and at most %d", op.KernelSize, fn.MaxKernel)
				}
			}
			// The kernel runs on the size it gets: refused here for every
			// sample (of the one size or the bound), else a sample too
			// small for it fails alone (fn.BlurFits).
			if c.W > 0 {
				if err := fn.BlurFits(op.KernelSize[0], op.KernelSize[1], c.W, c.H); err != nil {
					return OpError(at.Where, "%v", err)
				}
			}
			if !(op.Sigma[0] > 0 && op.Sigma[0] <= op.Sigma[1] && op.Sigma[1] <= 1e4) {
				return OpError(at.Where, "sigma %v: want 0 < min <= max (at most 10000)", op.Sigma)
			}
			return nil
		},
		Draw: func(n *Node, r *det.RNG, d *Drawer) {
			op := n.Op
			s := r.Uniform(op.Sigma[0], op.Sigma[1])
			d.Emit(fn.Step{Fn: fn.GaussianBlur, I: [6]int{op.KernelSize[0], op.KernelSize[1]}, F: [6]float64{s, s}})
		},
		MaxNs: func(n *Node, w, h int) float64 {
			return StepNs(fn.Step{Fn: fn.GaussianBlur, I: [6]int{n.Op.KernelSize[0], n.Op.KernelSize[1]}}, w, h)
		}})
}
