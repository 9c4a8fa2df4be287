// Package targets is a detection sample's targets (boxes, labels, crowd
// flags, keypoints, masks, polygons) and torchvision's kernels that move
// them, as torchvision.transforms.v2.functional's *_bounding_boxes,
// *_keypoints and *_mask kernels: functions on plain arguments (boxes XYXY
// float32, points float32, a canvas' size, an op's drawn angle or
// corners), in float32 as torch computes them, to the bit. It also writes
// them on the wire (AppendTargets: docs/detection.md gives the layout).
//
// What goes in: a Targets (the Instances a pipeline/dataset Targeted
// dataset gives, on a canvas of W x H) and the geometry a sample drew.
// What comes out: the same Targets, moved in place, and their encoding.
//
// The package knows nothing of ops, steps or transforms: the pipeline's op
// registry reads a step's arguments and calls these kernels (its fnDef's
// boxes, points, masks and instances). Of the module it links
// pipeline/dataset (Instances), pipeline/kernels (the masks' maps, the
// affine maths), pipeline/kernels/cv (ultralytics' overlap mask) and
// pipeline/errs, never the pipeline's root.
//
// Floating point: every product that is added or subtracted is rounded
// first (wrapped in float32(...) or float64(...)), or fused explicitly
// (boxFMA32), so the targets are the same bits on every machine.
package targets
