package ops

// GaussianBlur: torchvision.transforms.v2's, and gaussian_blur.

import (
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
)

const OpGaussianBlur OpKind = "GaussianBlur"

// BlurArgs are GaussianBlur's arguments (Op.Args): kernel_size (x, y)
// and sigma (min, max; one number x is (x, x)).
type BlurArgs struct {
	KernelSize [2]int
	Sigma      [2]float64
}

func init() {
	Define(Def{Kind: OpGaussianBlur, Doc: "a Gaussian blur of kernel_size (x, y) and sigma drawn uniform in (min, max)", Params: []Param{{Name: "kernel_size", Typ: PSize}, {Name: "sigma", Typ: PRange, Def: "(0.1, 2.0)"}}, Targets: TargetsPixels, AnyFormat: true, Format: FormatNone, Keeps: func(op *Op) Keeps {
		k := ArgsOf[BlurArgs](op).KernelSize
		return Keeps{Blur: true, BlurSide: max(k[0], k[1])}
	}, FromArgs: func(a *Args) Op {
		b := &BlurArgs{KernelSize: a.Size("kernel_size")}
		switch s := a.Floats("sigma"); len(s) {
		case 1:
			b.Sigma = [2]float64{s[0], s[0]}
		case 2:
			b.Sigma = [2]float64(s)
		default:
			a.Errorf("sigma %v: want a number or (min, max)", s)
		}
		return Op{Args: b}
	}, Compile: func(c *Compiler, n *Node, at CompileAt) error {
		op := ArgsOf[BlurArgs](n.Op)
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
	}, Draw: func(n *Node, r *det.RNG, d *Drawer) {
		op := ArgsOf[BlurArgs](n.Op)
		s := r.Uniform(op.Sigma[0], op.Sigma[1])
		d.Emit(fn.Step{Fn: fn.GaussianBlur, I: [6]int{op.KernelSize[0], op.KernelSize[1]}, F: [6]float64{s, s}})
	}, MaxNs: func(n *Node, w, h int) float64 {
		k := ArgsOf[BlurArgs](n.Op).KernelSize
		return StepNs(fn.Step{Fn: fn.GaussianBlur, I: [6]int{k[0], k[1]}}, w, h)
	}})
}
