package pipeline

// The point ops with a probability of their own: torchvision.transforms.v2's
// RandomSolarize, RandomPosterize, RandomInvert, RandomEqualize,
// RandomAutocontrast and RandomAdjustSharpness, and their functional ops
// (with timm's solarize_add, which its policies draw).

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

const (
	OpRandomSolarize        OpKind = "RandomSolarize"
	OpRandomPosterize       OpKind = "RandomPosterize"
	OpRandomInvert          OpKind = "RandomInvert"
	OpRandomEqualize        OpKind = "RandomEqualize"
	OpRandomAutocontrast    OpKind = "RandomAutocontrast"
	OpRandomAdjustSharpness OpKind = "RandomAdjustSharpness"
)

var (
	FnAdjustSharpness = defineFn(fnDef{name: "adjust_sharpness", args: []arg{{"sharpness_factor", argFloat, 0, 1}}, ns: 2.71,
		kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) { kernels.AdjustSharpness(p, st.F[0], ks) },
		check:  checkFactor, targets: targetsPixels})
	FnSolarize = defineFn(fnDef{name: "solarize", args: []arg{{"threshold", argFloat, 0, 1}}, ns: 0.057,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.Solarize(p, st.F[0]) },
		check: func(st *Step, _, _ int) error {
			if !(st.F[0] >= 0 && st.F[0] <= 255) {
				return stepError(st, "threshold %v: want 0..255", st.F[0])
			}
			return nil
		}, targets: targetsPixels})
	FnPosterize = defineFn(fnDef{name: "posterize", args: []arg{{"bits", argInt, 0, 1}}, ns: 0.055,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.Posterize(p, st.I[0]) },
		check: func(st *Step, _, _ int) error {
			if st.I[0] < 0 || st.I[0] > 8 {
				return stepError(st, "bits %d: want 0..8", st.I[0])
			}
			return nil
		}, targets: targetsPixels})
	FnInvert = defineFn(fnDef{name: "invert", ns: 0.054,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.Invert(p) }, targets: targetsPixels})
	FnEqualize = defineFn(fnDef{name: "equalize", ns: 1.07,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.Equalize(p) }, targets: targetsPixels})
	FnAutocontrast = defineFn(fnDef{name: "autocontrast", ns: 0.15,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.Autocontrast(p) }, targets: targetsPixels})
	// FnSolarizeAdd is timm's SolarizeAdd (add, clamped, to the pixels
	// below the threshold): no torchvision functional has it.
	FnSolarizeAdd = defineFn(fnDef{name: "solarize_add", args: []arg{{"addition", argInt, 0, 1}, {"threshold", argFloat, 0, 1}}, ns: 0.070,
		kernel:  func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.SolarizeAdd(p, st.I[0], st.F[0]) },
		targets: targetsPixels})
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
