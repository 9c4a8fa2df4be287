package ops

import "github.com/stoker-dev/stoker/pipeline/fn"

// The flips: torchvision.transforms.v2's RandomHorizontalFlip and
// RandomVerticalFlip, horizontal_flip and vertical_flip. A
// RandomHorizontalFlip right after the geometry is fused into the decode
// (NewTransform: the resampler's coefficients run backwards); anywhere
// else it is a step.

const (
	OpRandomHorizontalFlip OpKind = "RandomHorizontalFlip"
	OpRandomVerticalFlip   OpKind = "RandomVerticalFlip"
)

func init() {
	Define(Def{Kind: OpRandomHorizontalFlip, Doc: "mirrors the image left to right with probability p",
		Params: []Param{PParam(0.5)}, Targets: TargetsMove,
		Compile: compileP, Step: func(*Op) fn.Step { return fn.Step{Fn: fn.HorizontalFlip} }, Draw: DrawApplied})
	Define(Def{Kind: OpRandomVerticalFlip, Doc: "mirrors the image top to bottom with probability p",
		Params: []Param{PParam(0.5)}, Targets: TargetsMove,
		Compile: compileP, Step: func(*Op) fn.Step { return fn.Step{Fn: fn.VerticalFlip} }, Draw: DrawApplied})
}
