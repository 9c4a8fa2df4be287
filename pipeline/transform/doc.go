// Package transform is the compiled transform (as torchvision.transforms.v2's
// Compose): Transform, made from a list of ops (NewTransform, NewViews, the
// presets: ParseTransform), with the geometry's op families (crops, resizes,
// pads, zoom-out, IoU crop, warps, detection's ScaleJitter and
// FixedSizeCrop, ultralytics' YOLO family and mosaic), a sample's plan
// (Plan: per view, its geometry's SamplePlan, which the decoder fuses into
// the decode, and its ops' steps), the multi-image draws (MultiDraw),
// several views, the presets, the cost
// model (Cost), stop_epoch and the targets' checks and moves.
//
// In: ops (the op table's Op, pipeline/ops, where the geometry's families
// register next to the others), a layout, a sample's key and its source's
// size. Out: the sample's plan (drawn, never decoded here: Transform.Plan),
// its trace, the output's shape and layout, the transform's worst cost.
// The pipeline's root executes the plan; a Transform's Trace is its plan's
// trace, drawn here alone. Of the module it imports the
// op table, the functional ops, the kernels, the targets, the datasets'
// names and the pipeline's internals: never the root, nor the codec.
package transform
