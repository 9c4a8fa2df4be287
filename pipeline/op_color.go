package pipeline

// The colour ops: torchvision.transforms.v2's ColorJitter,
// RandomPhotometricDistort (SSD's), Grayscale and RandomGrayscale, and
// their functional ops (adjust_brightness, adjust_contrast,
// adjust_saturation, adjust_hue, rgb_to_grayscale, permute_channels).

import (
	"fmt"
	"math"
	"strings"
)

const (
	OpColorJitter     OpKind = "ColorJitter"
	OpGrayscale       OpKind = "Grayscale"
	OpRandomGrayscale OpKind = "RandomGrayscale"
	// OpRandomPhotometricDistort is SSD's photometric distortion (the
	// adjust ops of its Jitter ranges, each at P, and a channel
	// permutation at P); after the geometry, or before a geometry that
	// resizes (Resize(h, w), after a RandomZoomOut or RandomIoUCrop).
	OpRandomPhotometricDistort OpKind = "RandomPhotometricDistort"
)

// jitterFns are ColorJitter's four adjustments, in its order.
var jitterFns = [4]Fn{FnAdjustBrightness, FnAdjustContrast, FnAdjustSaturation, FnAdjustHue}

func init() {
	defineOp(opDef{kind: OpColorJitter, doc: "adjusts brightness, contrast, saturation and hue by random factors, in a random order",
		params: []param{{name: "brightness", typ: pRange, def: "None"}, {name: "contrast", typ: pRange, def: "None"},
			{name: "saturation", typ: pRange, def: "None"}, {name: "hue", typ: pRange, def: "None"}},
		targets: targetsPixels, anyFormat: true,
		compile: func(c *compiler, n *node, at compileAt) error {
			n.maxSteps = 4
			return c.jitter(n, at.where)
		},
		draw: func(n *node, r *RNG, d *drawer) { n.drawJitter(r, d) }, format: formatNone,
		maxNs: func(n *node, w, h int) float64 {
			var s float64
			for i, on := range n.jitOn {
				if on {
					s += stepNs(Step{Fn: jitterFns[i]}, w, h)
				}
			}
			return s
		}})
	defineOp(opDef{kind: OpRandomPhotometricDistort, doc: "SSD's photometric distortion: each adjustment at p, contrast before or after saturation and hue, a channel permutation at p",
		params: []param{{name: "brightness", typ: pRange, def: "(0.875, 1.125)"}, {name: "contrast", typ: pRange, def: "(0.5, 1.5)"},
			{name: "saturation", typ: pRange, def: "(0.5, 1.5)"}, {name: "hue", typ: pRange, def: "(-0.05, 0.05)"}, pParam(0.5)},
		targets: targetsPixels, anyFormat: true,
		compile: func(c *compiler, n *node, at compileAt) error {
			if err := checkProb(n.op, at); err != nil {
				return err
			}
			if !n.op.JitterRanges {
				return opError(at.where, "RandomPhotometricDistort takes (min, max) ranges (JitterRanges)")
			}
			n.maxSteps = 5
			return c.jitter(n, at.where)
		},
		draw:   func(n *node, r *RNG, d *drawer) { n.drawPhotometric(r, d) },
		format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(%v, p=%g)", op.Jitter, op.P) },
		maxNs: func(n *node, w, h int) float64 { // contrast once, before or after
			var s float64
			for _, f := range []Fn{FnAdjustBrightness, FnAdjustContrast, FnAdjustSaturation, FnAdjustHue, FnPermuteChannels} {
				s += stepNs(Step{Fn: f}, w, h)
			}
			return s
		}})
	grayStep := func(*Op) Step { return Step{Fn: FnRGBToGrayscale, I: [6]int{3}} }
	defineOp(opDef{kind: OpGrayscale, doc: "the image's luma in its three channels",
		params:  []param{{name: "num_output_channels", typ: pInt, def: "3"}},
		targets: targetsPixels, anyFormat: true, step: grayStep, draw: drawAlways, format: formatNone})
	defineOp(opDef{kind: OpRandomGrayscale, doc: "Grayscale with probability p",
		params:  []param{pParam(0.1)},
		targets: targetsPixels, anyFormat: true, compile: compileP, step: grayStep, draw: drawApplied})
}

// jitter compiles ColorJitter's ranges, as torchvision's _check_input.
func (c *compiler) jitter(n *node, where string) error {
	op := n.op
	scalar := [4]float64{op.Brightness, op.Contrast, op.Saturation, op.Hue}
	names := [4]string{"brightness", "contrast", "saturation", "hue"}
	for i := range 4 {
		center, lo, hi := 1.0, 0.0, math.Inf(1)
		if i == 3 {
			center, lo, hi = 0, -0.5, 0.5
		}
		r := op.Jitter[i]
		if !op.JitterRanges {
			x := scalar[i]
			if !(x >= 0) || math.IsInf(x, 0) {
				return opError(where, "%s %v: a single number must be finite and >= 0", names[i], x)
			}
			r = [2]float64{center - x, center + x}
			if i < 3 {
				r[0] = math.Max(r[0], 0)
			}
		}
		if !(lo <= r[0] && r[0] <= r[1] && r[1] <= hi) || math.IsInf(r[1], 0) {
			return opError(where, "%s %v: want %v <= min <= max <= %v", names[i], r, lo, hi)
		}
		if i < 3 && r[1] > 100 {
			return opError(where, "%s %v: a factor over 100 makes every pixel 0 or 255", names[i], r)
		}
		n.jit[i], n.jitOn[i] = r, !(r[0] == center && r[1] == center)
	}
	return nil
}

// drawJitter is ColorJitter's make_params and transform: a random order of
// the four adjustments, each factor uniform in its range, None skipped.
func (n *node) drawJitter(r *RNG, d *drawer) {
	var order [4]int
	r.Perm(order[:])
	var f [4]float64
	for i := range 4 {
		if n.jitOn[i] {
			f[i] = r.Uniform(n.jit[i][0], n.jit[i][1])
		}
	}
	for _, i := range order {
		if n.jitOn[i] {
			d.emit(Step{Fn: jitterFns[i], F: [6]float64{f[i]}})
		}
	}
}

// drawPhotometric is RandomPhotometricDistort's make_params and transform:
// each factor drawn at p in its range (brightness, contrast, saturation,
// hue, in that order), contrast before or after the middle two at even
// odds, a channel permutation at p; applied brightness, contrast if
// before, saturation, hue, contrast if after, the permutation.
func (n *node) drawPhotometric(r *RNG, d *drawer) {
	var f [4]float64
	var on [4]bool
	for i := range 4 {
		if r.Float64() < n.op.P {
			on[i], f[i] = true, r.Uniform(n.jit[i][0], n.jit[i][1])
		}
	}
	before := r.Float64() < 0.5
	var perm [3]int
	permute := r.Float64() < n.op.P
	if permute {
		r.Perm(perm[:])
	}
	emit := func(i int, fn Fn) {
		if on[i] {
			d.emit(Step{Fn: fn, F: [6]float64{f[i]}})
		}
	}
	emit(0, FnAdjustBrightness)
	if before {
		emit(1, FnAdjustContrast)
	}
	emit(2, FnAdjustSaturation)
	emit(3, FnAdjustHue)
	if !before {
		emit(1, FnAdjustContrast)
	}
	if permute {
		d.emit(Step{Fn: FnPermuteChannels, I: [6]int{perm[0], perm[1], perm[2]}})
	}
}
