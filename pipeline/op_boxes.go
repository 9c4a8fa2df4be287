package pipeline

// The ops on a job's targets alone: torchvision.transforms.v2's
// SanitizeBoundingBoxes, ConvertBoundingBoxFormat, ClampBoundingBoxes,
// ClampKeyPoints and SanitizeKeyPoints. Each is refused in a job without
// targets; MoveTargets runs their steps between the moves.

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/targets"
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

var (
	// FnSanitizeBoxes: a job's targets lose their degenerate boxes.
	FnSanitizeBoxes = defineFn(fnDef{name: "sanitize_bounding_boxes", args: []arg{{"min_size", argFloat, 0, 1}, {"min_area", argFloat, 1, 1}},
		targets: targetsInstances, instances: func(t *Targets, w, h int, st *Step) (int, int, error) {
			t.Sanitize(w, h, st.F[0], st.F[1])
			return w, h, nil
		}})
	// FnConvertBoxFormat: a job's target boxes, XYXY until then,
	// delivered in the format I[0] (a BoxFormat).
	FnConvertBoxFormat = defineFn(fnDef{name: "convert_bounding_box_format", args: []arg{{"new_format", argBoxFormat, 0, 1}},
		targets: targetsInstances, instances: func(t *Targets, w, h int, st *Step) (int, int, error) {
			targets.ConvertBoxes(t.Boxes, BoxFormat(st.I[0]))
			t.Format = BoxFormat(st.I[0])
			return w, h, nil
		}})
	// FnClampBoxes is ClampBoundingBoxes' step: the boxes clamped in
	// their format (targets.ClampBoxesAs).
	FnClampBoxes = defineFn(fnDef{name: "clamp_bounding_boxes", targets: targetsInstances,
		instances: func(t *Targets, w, h int, _ *Step) (int, int, error) {
			targets.ClampBoxesAs(t.Boxes, t.Format, w, h)
			return w, h, nil
		}})
	// FnClampKeypoints is ClampKeyPoints': the keypoints clamped
	// (targets.ClampPoints); a dataset without keypoints is left, as
	// torchvision passes it through.
	FnClampKeypoints = defineFn(fnDef{name: "clamp_keypoints", targets: targetsInstances,
		instances: func(t *Targets, w, h int, _ *Step) (int, int, error) {
			targets.ClampPoints(t.Points, w, h)
			return w, h, nil
		}})
	// FnSanitizeKeypoints is SanitizeKeyPoints': every instance with a
	// point off the canvas dropped whole (Targets.SanitizePoints).
	FnSanitizeKeypoints = defineFn(fnDef{name: "sanitize_keypoints", targets: targetsInstances,
		instances: func(t *Targets, w, h int, _ *Step) (int, int, error) { return w, h, t.SanitizePoints(w, h) }})
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
