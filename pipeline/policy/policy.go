package policy

import (
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Kind names a policy: its op's kind (ops.OpKind) as torchvision and
// timm name it.
type Kind string

// Policies: torchvision's, and timm's under their own names.
const (
	TrivialAugmentWide Kind = "TrivialAugmentWide"
	RandAugment        Kind = "RandAugment"
	AutoAugment        Kind = "AutoAugment"
	AugMix             Kind = "AugMix"
	TimmRandAugment    Kind = "TimmRandAugment"
	TimmAutoAugment    Kind = "TimmAutoAugment"
	TimmAugMix         Kind = "TimmAugMix"
)

// MaxOps bounds RandAugment's num_ops and AugMix's mixture_width.
const MaxOps = 16

// Params is a policy op's arguments, under the pipeline's Op field names
// (its doc says which op reads which): Kind, then the interpolation and
// fill of the ops it draws, RandAugment's and TrivialAugmentWide's
// NumOps, Magnitude and Bins, AutoAugment's and timm's Policy (a name or
// a config string), AugMix's Severity, MixtureWidth, ChainDepth, Alpha and
// PartialOps (all_ops=False).
type Params struct {
	Kind                               Kind
	Interp                             kernels.Interpolation
	RandomInterp                       bool
	Fill                               [3]float64
	FillNone                           bool
	NumOps, Magnitude, Bins            int
	Policy                             string
	Severity, MixtureWidth, ChainDepth int
	Alpha                              float64
	PartialOps                         bool
}

// Draw appends to buf the steps the policy draws from r for one sample
// of w x h, and returns it: at most MaxSteps.
func (p *Policy) Draw(r *det.RNG, w, h int, buf []fn.Step) []fn.Step {
	d := drawer{w: w, h: h, steps: buf}
	p.draw(r, &d)
	return d.steps
}

// MaxSteps is the most steps one Draw appends.
func (p *Policy) MaxSteps() int { return p.maxSteps }

// drawer collects the steps a policy draws for an output of w x h.
type drawer struct {
	w, h  int
	steps []fn.Step
}

func (d *drawer) emit(st fn.Step) { d.steps = append(d.steps, st) }
