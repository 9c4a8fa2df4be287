package pipeline

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
	defineOp(opDef{kind: OpRandomHorizontalFlip, doc: "mirrors the image left to right with probability p",
		params: []param{pParam(0.5)}, targets: targetsMove,
		compile: compileP, step: func(*Op) Step { return Step{Fn: FnHorizontalFlip} }, draw: drawApplied})
	defineOp(opDef{kind: OpRandomVerticalFlip, doc: "mirrors the image top to bottom with probability p",
		params: []param{pParam(0.5)}, targets: targetsMove,
		compile: compileP, step: func(*Op) Step { return Step{Fn: FnVerticalFlip} }, draw: drawApplied})
}
