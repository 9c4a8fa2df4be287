package ops

// The point ops with a probability of their own: torchvision.transforms.v2's
// RandomSolarize, RandomPosterize, RandomInvert, RandomEqualize,
// RandomAutocontrast and RandomAdjustSharpness, and their functional ops
// (with timm's solarize_add, which its policies draw).

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

const (
	OpRandomSolarize        OpKind = "RandomSolarize"
	OpRandomPosterize       OpKind = "RandomPosterize"
	OpRandomInvert          OpKind = "RandomInvert"
	OpRandomEqualize        OpKind = "RandomEqualize"
	OpRandomAutocontrast    OpKind = "RandomAutocontrast"
	OpRandomAdjustSharpness OpKind = "RandomAdjustSharpness"
)

func init() {
	point := func(kind OpKind, doc string, params []Param, step func(op *Op) fn.Step, check func(n *Node, at CompileAt) error, keeps func(*Op) Keeps) {
		Define(Def{Kind: kind, Doc: doc, Params: params, Targets: TargetsPixels, AnyFormat: true, Step: step, Draw: DrawApplied, Keeps: keeps,
			Compile: func(_ *Compiler, n *Node, at CompileAt) error {
				if err := CheckProb(n.Op, at); err != nil {
					return err
				}
				if check != nil {
					return check(n, at)
				}
				return nil
			}})
	}
	point(OpRandomSolarize, "inverts the pixels at or above threshold, with probability p",
		[]Param{{Name: "threshold", Typ: PFloat, At: func(o *Op) any { return &ArgsAt[SolarizeArgs](o).Threshold }, Lo: 0, Hi: 255}, PParam(0.5)},
		func(op *Op) fn.Step {
			return fn.Step{Fn: fn.Solarize, F: [6]float64{ArgsOf[SolarizeArgs](op).Threshold}}
		},
		func(n *Node, at CompileAt) error {
			if x := ArgsOf[SolarizeArgs](n.Op).Threshold; !(x >= 0 && x <= 255) {
				return OpError(at.Where, "threshold %v: want 0..255 (the uint8 image's range)", x)
			}
			return nil
		}, nil)
	point(OpRandomPosterize, "keeps the top bits of each channel, with probability p",
		[]Param{{Name: "bits", Typ: PInt, At: func(o *Op) any { return &ArgsAt[PosterizeArgs](o).Bits }, Lo: 0, Hi: 8}, PParam(0.5)},
		func(op *Op) fn.Step { return fn.Step{Fn: fn.Posterize, I: [6]int{ArgsOf[PosterizeArgs](op).Bits}} },
		func(n *Node, at CompileAt) error {
			if b := ArgsOf[PosterizeArgs](n.Op).Bits; b < 0 || b > 8 {
				return OpError(at.Where, "bits %d: want 0..8", b)
			}
			return nil
		}, nil)
	point(OpRandomInvert, "inverts the image with probability p", []Param{PParam(0.5)},
		func(*Op) fn.Step { return fn.Step{Fn: fn.Invert} }, nil, nil)
	point(OpRandomEqualize, "equalizes each channel's histogram with probability p", []Param{PParam(0.5)},
		func(*Op) fn.Step { return fn.Step{Fn: fn.Equalize} }, nil, nil)
	point(OpRandomAutocontrast, "stretches each channel to 0..255 with probability p", []Param{PParam(0.5)},
		func(*Op) fn.Step { return fn.Step{Fn: fn.Autocontrast} }, nil, nil)
	point(OpRandomAdjustSharpness, "sharpens (or blurs, below 1) by sharpness_factor with probability p",
		[]Param{{Name: "sharpness_factor", Typ: PFloat, At: func(o *Op) any { return &ArgsAt[SharpnessArgs](o).Factor }, Lo: 0, Hi: 1e3}, PParam(0.5)},
		func(op *Op) fn.Step {
			return fn.Step{Fn: fn.AdjustSharpness, F: [6]float64{ArgsOf[SharpnessArgs](op).Factor}}
		},
		func(n *Node, at CompileAt) error {
			if f := ArgsOf[SharpnessArgs](n.Op).Factor; !(f >= 0 && f <= 1e3) {
				return OpError(at.Where, "sharpness_factor %v: want 0 <= x <= 1000", f)
			}
			return nil
		}, func(*Op) Keeps { return Keeps{Sharp: true} })
}

// The point ops' own arguments (Op.Args; their p is Op.P):
// RandomSolarize's threshold (0..255), RandomPosterize's bits,
// RandomAdjustSharpness's sharpness_factor.
type (
	SolarizeArgs  struct{ Threshold float64 }
	PosterizeArgs struct{ Bits int }
	SharpnessArgs struct{ Factor float64 }
)

// FormatNone writes no arguments: String shows the kind alone.
func FormatNone(*strings.Builder, *Op) {}

// FormatP writes "(p=P)", String's default.
func FormatP(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(p=%g)", op.P) }
