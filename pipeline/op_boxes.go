package pipeline

// The ops on a job's targets alone: torchvision.transforms.v2's
// SanitizeBoundingBoxes, ConvertBoundingBoxFormat, ClampBoundingBoxes,
// ClampKeyPoints and SanitizeKeyPoints. Each is refused in a job without
// targets; MoveTargets runs their steps between the moves.

import (
	"fmt"
	"strings"
)

const (
	// OpSanitizeBoundingBoxes drops a job's degenerate target boxes with
	// their instances; the pixels are untouched.
	OpSanitizeBoundingBoxes OpKind = "SanitizeBoundingBoxes"
	// OpConvertBoundingBoxFormat delivers a job's target boxes in
	// BoxFormat, after every op that moves or drops them.
	OpConvertBoundingBoxFormat OpKind = "ConvertBoundingBoxFormat"
	// OpClampBoundingBoxes clamps the boxes to the canvas, in their
	// format; Op.ClampNone (clamping_mode None) leaves them.
	OpClampBoundingBoxes OpKind = "ClampBoundingBoxes"
	// OpClampKeyPoints clamps the keypoints to the canvas.
	OpClampKeyPoints OpKind = "ClampKeyPoints"
	// OpSanitizeKeyPoints drops the instances with a keypoint off the
	// canvas.
	OpSanitizeKeyPoints OpKind = "SanitizeKeyPoints"
)

func init() {
	box := func(d opDef) {
		d.targets, d.needsTargets = targetsInstances, true
		if d.draw == nil {
			d.draw = drawAlways
		}
		if d.format == nil {
			d.format = formatNone
		}
		defineOp(d)
	}
	box(opDef{kind: OpSanitizeBoundingBoxes, doc: "drops the instances whose boxes are smaller than min_size a side or min_area",
		params: []param{{name: "min_size", typ: pFloat, def: "1.0"}, {name: "min_area", typ: pFloat, def: "1.0"},
			{name: "labels_getter", typ: pAny, def: "'default'"}},
		compile: func(_ *compiler, n *node, at compileAt) error {
			if err := checkSanitize(n.op); err != nil {
				return opError(at.where, "%v", err)
			}
			return nil
		},
		step:   func(op *Op) Step { return Step{Fn: FnSanitizeBoxes, F: [6]float64{op.MinSize, op.MinArea}} },
		format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(min_size=%g, min_area=%g)", op.MinSize, op.MinArea) }})
	box(opDef{kind: OpConvertBoundingBoxFormat, doc: "delivers the boxes in format (XYXY, XYWH or CXCYWH), last",
		params: []param{{name: "format", typ: pString}},
		compile: func(_ *compiler, n *node, at compileAt) error {
			if at.depth > 0 {
				return opError(at.where, "ConvertBoundingBoxFormat inside a container is not supported: it comes last, after every op that moves boxes")
			}
			if n.op.BoxFormat > BoxCXCYWH {
				return opError(at.where, "format %d: want XYXY, XYWH or CXCYWH", n.op.BoxFormat)
			}
			return nil
		},
		step:   func(op *Op) Step { return Step{Fn: FnConvertBoxFormat, I: [6]int{int(op.BoxFormat)}} },
		format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(%s)", op.BoxFormat) }})
	box(opDef{kind: OpClampBoundingBoxes, doc: "clamps the boxes to the canvas, in their format (clamping_mode None: leaves them)",
		params: []param{{name: "clamping_mode", typ: pString, def: "'auto'"}}, anyFormat: true,
		step: func(*Op) Step { return Step{Fn: FnClampBoxes} },
		draw: func(n *node, _ *RNG, d *drawer) {
			if !n.op.ClampNone { // None: torchvision's returns the boxes as they are
				d.emit(n.step)
			}
		},
		format: func(b *strings.Builder, op *Op) {
			if op.ClampNone {
				b.WriteString("(None)")
			}
		}})
	box(opDef{kind: OpClampKeyPoints, doc: "clamps the keypoints to the canvas", anyFormat: true,
		step: func(*Op) Step { return Step{Fn: FnClampKeypoints} }})
	box(opDef{kind: OpSanitizeKeyPoints, doc: "drops the instances with a keypoint off the canvas",
		params: []param{{name: "labels_getter", typ: pAny, def: "None"}}, anyFormat: true,
		step: func(*Op) Step { return Step{Fn: FnSanitizeKeypoints} }})
}

// checkSanitize checks SanitizeBoundingBoxes' bounds.
func checkSanitize(op *Op) error {
	if !(op.MinSize >= 1 && op.MinSize <= 1e9) || !(op.MinArea >= 1 && op.MinArea <= 1e9) {
		return fmt.Errorf("min_size %v, min_area %v: each must be at least 1 (torchvision's bound) and at most 1e9", op.MinSize, op.MinArea)
	}
	return nil
}
