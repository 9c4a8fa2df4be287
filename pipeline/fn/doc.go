// Package fn holds the functional ops, as
// torchvision.transforms.v2.functional: an Fn names one (horizontal_flip,
// rotate, adjust_hue, …) and a Step is one sample's call of it with its
// drawn arguments. Each Fn is defined once, in its family's file, by a Def
// (define): its name and arguments (the trace's), the kernel its steps
// call on a sample's planes (pipeline/kernels), its checks, its cost, and
// what it does to a job's targets (pipeline/targets' kernels on boxes,
// keypoints and masks).
//
// What goes in: a Step and a w x h image as three uint8 planes
// (kernels.Planes, CHW); what comes out: the planes after it (Apply,
// ApplySized), or a Step as JSON and back (Step.AppendJSON, ParseStep).
// Nothing here draws: the ops (pipeline's opDef, torchvision's classes)
// draw Steps and the decoder fuses the geometry's; this package imports
// neither (cmd/stoker's TestArrows holds it).
package fn
