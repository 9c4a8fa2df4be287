package pipeline

// The point ops with a probability of their own: torchvision.transforms.v2's
// RandomSolarize, RandomPosterize, RandomInvert, RandomEqualize,
// RandomAutocontrast and RandomAdjustSharpness, and their functional ops
// (with timm's solarize_add, which its policies draw).

import (
	"fmt"
	"strings"
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
	point := func(kind OpKind, doc string, params []param, step func(op *Op) Step, check func(n *node, at compileAt) error) {
		defineOp(opDef{kind: kind, doc: doc, params: params, targets: targetsPixels, anyFormat: true, step: step, draw: drawApplied,
			compile: func(_ *compiler, n *node, at compileAt) error {
				if err := checkProb(n.op, at); err != nil {
					return err
				}
				if check != nil {
					return check(n, at)
				}
				return nil
			}})
	}
	point(OpRandomSolarize, "inverts the pixels at or above threshold, with probability p",
		[]param{{name: "threshold", typ: pFloat, field: "Threshold", lo: 0, hi: 255}, pParam(0.5)},
		func(op *Op) Step { return Step{Fn: FnSolarize, F: [6]float64{op.Threshold}} },
		func(n *node, at compileAt) error {
			if !(n.op.Threshold >= 0 && n.op.Threshold <= 255) {
				return opError(at.where, "threshold %v: want 0..255 (the uint8 image's range)", n.op.Threshold)
			}
			return nil
		})
	point(OpRandomPosterize, "keeps the top bits of each channel, with probability p",
		[]param{{name: "bits", typ: pInt, field: "Bits", lo: 0, hi: 8}, pParam(0.5)},
		func(op *Op) Step { return Step{Fn: FnPosterize, I: [6]int{op.Bits}} },
		func(n *node, at compileAt) error {
			if n.op.Bits < 0 || n.op.Bits > 8 {
				return opError(at.where, "bits %d: want 0..8", n.op.Bits)
			}
			return nil
		})
	point(OpRandomInvert, "inverts the image with probability p", []param{pParam(0.5)},
		func(*Op) Step { return Step{Fn: FnInvert} }, nil)
	point(OpRandomEqualize, "equalizes each channel's histogram with probability p", []param{pParam(0.5)},
		func(*Op) Step { return Step{Fn: FnEqualize} }, nil)
	point(OpRandomAutocontrast, "stretches each channel to 0..255 with probability p", []param{pParam(0.5)},
		func(*Op) Step { return Step{Fn: FnAutocontrast} }, nil)
	point(OpRandomAdjustSharpness, "sharpens (or blurs, below 1) by sharpness_factor with probability p",
		[]param{{name: "sharpness_factor", typ: pFloat, field: "Factor", lo: 0, hi: 1e3}, pParam(0.5)},
		func(op *Op) Step { return Step{Fn: FnAdjustSharpness, F: [6]float64{op.Factor}} },
		func(n *node, at compileAt) error {
			if !(n.op.Factor >= 0 && n.op.Factor <= 1e3) {
				return opError(at.where, "sharpness_factor %v: want 0 <= x <= 1000", n.op.Factor)
			}
			return nil
		})
}

// formatNone writes no arguments: String shows the kind alone.
func formatNone(*strings.Builder, *Op) {}

// formatP writes "(p=P)", String's default.
func formatP(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(p=%g)", op.P) }
