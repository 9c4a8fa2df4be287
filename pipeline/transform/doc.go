// Package transform is the compiled transform (as torchvision.transforms.v2's
// Compose): Transform, made from a list of ops (NewTransform, NewViews, the
// presets: ParseTransform), with the geometry's op families (crops, resizes,
// pads, zoom-out, IoU crop, warps, detection's ScaleJitter and
// FixedSizeCrop, ultralytics' YOLO family and mosaic), the plan of each
// sample's geometry (SamplePlan) that the decoder fuses into the decode,
// the multi-image draws (MultiDraw), several views, the presets, the cost
// model (Cost), stop_epoch and the targets' checks and moves.
//
// In: ops (the op table's Op, pipeline/ops, where the geometry's families
// register next to the others), a layout, a sample's key and its source's
// size. Out: the sample's plan and steps (drawn, never decoded here), its
// trace, the output's shape and layout, the transform's worst cost. The
// pipeline's root decodes by the plan and names this package's types as
// before (transform.Transform, transform.Layout, ...); a Transform's Trace
// draws through the root's Decoder (Tracer). Of the module it imports the
// op table, the functional ops, the kernels, the targets, the datasets'
// names and the pipeline's internals: never the root, nor the codec.
package transform
