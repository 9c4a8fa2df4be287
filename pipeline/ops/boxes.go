package ops

// The ops on a job's targets alone: torchvision.transforms.v2's
// SanitizeBoundingBoxes, ConvertBoundingBoxFormat, ClampBoundingBoxes,
// ClampKeyPoints and SanitizeKeyPoints. Each is refused in a job without
// targets; MoveTargets runs their steps between the moves.

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
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
	// format; ClampArgs.None (clamping_mode None) leaves them.
	OpClampBoundingBoxes OpKind = "ClampBoundingBoxes"
	// OpClampKeyPoints clamps the keypoints to the canvas.
	OpClampKeyPoints OpKind = "ClampKeyPoints"
	// OpSanitizeKeyPoints drops the instances with a keypoint off the
	// canvas.
	OpSanitizeKeyPoints OpKind = "SanitizeKeyPoints"
)

func init() {
	box := func(d Def) {
		d.Targets, d.NeedsTargets = TargetsInstances, true
		if d.Draw == nil {
			d.Draw = drawAlways
		}
		if d.Format == nil {
			d.Format = FormatNone
		}
		Define(d)
	}
	box(Def{Kind: OpSanitizeBoundingBoxes, Doc: "drops the instances whose boxes are smaller than min_size a side or min_area", Params: []Param{{Name: "min_size", Typ: PFloat, Def: "1.0"}, {Name: "min_area", Typ: PFloat, Def: "1.0"},
		{Name: "labels_getter", Typ: pAny, Def: "'default'"}}, FromArgs: func(a *Args) Op {
		if l, ok := a.vals["labels_getter"].(string); !ok || l != "default" {
			a.Errorf("labels_getter %v: stoker's targets drop each box's label with it (labels_getter='default')", a.show("labels_getter"))
		}
		return Op{Args: &SanitizeArgs{MinSize: a.Float("min_size"), MinArea: a.Float("min_area")}}
	}, Compile: func(_ *Compiler, n *Node, at CompileAt) error {
		if err := CheckSanitize(n.Op); err != nil {
			return OpError(at.Where, "%v", err)
		}
		return nil
	}, Step: func(op *Op) fn.Step {
		a := ArgsOf[SanitizeArgs](op)
		return fn.Step{Fn: fn.SanitizeBoxes, F: [6]float64{a.MinSize, a.MinArea}}
	}, Format: func(b *strings.Builder, op *Op) {
		a := ArgsOf[SanitizeArgs](op)
		fmt.Fprintf(b, "(min_size=%g, min_area=%g)", a.MinSize, a.MinArea)
	}})
	box(Def{Kind: OpConvertBoundingBoxFormat, Doc: "delivers the boxes in format (XYXY, XYWH or CXCYWH), last",
		Params: []Param{{Name: "format", Typ: PString}},
		FromArgs: func(a *Args) Op {
			f, err := targets.ParseBoxFormat(a.Str("format"))
			if err != nil {
				a.Errorf("%v", err)
			}
			return Op{Args: &BoxFormatArgs{Format: f}}
		},
		Compile: func(_ *Compiler, n *Node, at CompileAt) error {
			if at.depth > 0 {
				return OpError(at.Where, "ConvertBoundingBoxFormat inside a container is not supported: it comes last, after every op that moves boxes")
			}
			if f := ArgsOf[BoxFormatArgs](n.Op).Format; f > targets.BoxCXCYWH {
				return OpError(at.Where, "format %d: want XYXY, XYWH or CXCYWH", f)
			}
			return nil
		},
		Step: func(op *Op) fn.Step {
			return fn.Step{Fn: fn.ConvertBoxFormat, I: [6]int{int(ArgsOf[BoxFormatArgs](op).Format)}}
		},
		Format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(%s)", ArgsOf[BoxFormatArgs](op).Format) }})
	box(Def{Kind: OpClampBoundingBoxes, Doc: "clamps the boxes to the canvas, in their format (clamping_mode None: leaves them)",
		Params: []Param{{Name: "clamping_mode", Typ: PString, Def: "'auto'"}}, AnyFormat: true,
		FromArgs: func(a *Args) Op {
			switch m := a.Str("clamping_mode"); {
			case a.IsNone("clamping_mode"):
				return Op{Args: &ClampArgs{None: true}}
			case m != "auto" && m != "soft" && m != "hard": // the same for unrotated boxes
				a.Errorf("clamping_mode %q: want 'auto', 'soft', 'hard' or None", TruncKind(OpKind(m)))
			}
			return Op{}
		},
		Step: func(*Op) fn.Step { return fn.Step{Fn: fn.ClampBoxes} },
		Draw: func(n *Node, _ *det.RNG, d *Drawer) {
			if !ArgsOf[ClampArgs](n.Op).None { // None: torchvision's returns the boxes as they are
				d.Emit(n.Step)
			}
		},
		Format: func(b *strings.Builder, op *Op) {
			if ArgsOf[ClampArgs](op).None {
				b.WriteString("(None)")
			}
		}})
	box(Def{Kind: OpClampKeyPoints, Doc: "clamps the keypoints to the canvas", AnyFormat: true,
		Step: func(*Op) fn.Step { return fn.Step{Fn: fn.ClampKeypoints} }})
	box(Def{Kind: OpSanitizeKeyPoints, Doc: "drops the instances with a keypoint off the canvas",
		Params: []Param{{Name: "labels_getter", Typ: pAny, Def: "None"}}, AnyFormat: true, NeedsKeypoints: true,
		FromArgs: func(a *Args) Op {
			if l, ok := a.vals["labels_getter"].(string); !a.IsNone("labels_getter") && (!ok || l != "default") {
				a.Errorf("labels_getter %v: stoker's targets drop an instance whole; give None or 'default'", a.show("labels_getter"))
			}
			return Op{}
		},
		Step: func(*Op) fn.Step { return fn.Step{Fn: fn.SanitizeKeypoints} }})
}

// The box ops' own arguments (Op.Args): SanitizeBoundingBoxes' min_size
// and min_area, ConvertBoundingBoxFormat's format, ClampBoundingBoxes'
// clamping_mode None (None: the boxes left as they are).
type (
	SanitizeArgs  struct{ MinSize, MinArea float64 }
	BoxFormatArgs struct{ Format targets.BoxFormat }
	ClampArgs     struct{ None bool }
)

// CheckSanitize checks SanitizeBoundingBoxes' bounds.
func CheckSanitize(sa *Op) error {
	op := ArgsOf[SanitizeArgs](sa)
	if !(op.MinSize >= 1 && op.MinSize <= 1e9) || !(op.MinArea >= 1 && op.MinArea <= 1e9) {
		return fmt.Errorf("min_size %v, min_area %v: each must be at least 1 (torchvision's bound) and at most 1e9", op.MinSize, op.MinArea)
	}
	return nil
}
