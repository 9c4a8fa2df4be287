package ops

// The colour ops: torchvision.transforms.v2's ColorJitter,
// RandomPhotometricDistort (SSD's), Grayscale and RandomGrayscale, and
// their functional ops (adjust_brightness, adjust_contrast,
// adjust_saturation, adjust_hue, rgb_to_grayscale, permute_channels).

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
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

// ColorJitterArgs are ColorJitter's arguments (Op.Args): torchvision's
// single-number forms, each drawn from [max(0, 1-x), 1+x] (hue: [-x, x]),
// 0 being None; or, with Ranges, the (min, max) forms in Jitter
// (brightness, contrast, saturation, hue), a range of (1, 1) ((0, 0) for
// hue) being None: what the wire gives.
type ColorJitterArgs struct {
	Brightness, Contrast, Saturation, Hue float64
	Ranges                                bool
	Jitter                                [4][2]float64
}

// PhotometricDistortArgs are RandomPhotometricDistort's (its p is Op.P):
// the (min, max) ranges of brightness, contrast, saturation and hue.
type PhotometricDistortArgs struct{ Jitter [4][2]float64 }

// jitterFns are ColorJitter's four adjustments, in its order.
var jitterFns = [4]fn.Fn{fn.AdjustBrightness, fn.AdjustContrast, fn.AdjustSaturation, fn.AdjustHue}

func init() {
	Define(Def{Kind: OpColorJitter, Doc: "adjusts brightness, contrast, saturation and hue by random factors, in a random order",
		Params: []Param{{Name: "brightness", Typ: PRange, Def: "None"}, {Name: "contrast", Typ: PRange, Def: "None"},
			{Name: "saturation", Typ: PRange, Def: "None"}, {Name: "hue", Typ: PRange, Def: "None"}},
		Targets: TargetsPixels, AnyFormat: true, FromArgs: colorJitterArgs,
		Compile: func(c *Compiler, n *Node, at CompileAt) error {
			n.MaxSteps = 4
			a := ArgsOf[ColorJitterArgs](n.Op)
			return c.jitter(n, at.Where, a.Ranges, [4]float64{a.Brightness, a.Contrast, a.Saturation, a.Hue}, a.Jitter)
		},
		Draw: func(n *Node, r *det.RNG, d *Drawer) { n.drawJitter(r, d) }, Format: FormatNone,
		MaxNs: func(n *Node, w, h int) float64 {
			var s float64
			for i, on := range n.jitOn {
				if on {
					s += StepNs(fn.Step{Fn: jitterFns[i]}, w, h)
				}
			}
			return s
		}})
	Define(Def{Kind: OpRandomPhotometricDistort, Doc: "SSD's photometric distortion: each adjustment at p, contrast before or after saturation and hue, a channel permutation at p",
		Params: []Param{{Name: "brightness", Typ: PRange, Def: "(0.875, 1.125)"}, {Name: "contrast", Typ: PRange, Def: "(0.5, 1.5)"},
			{Name: "saturation", Typ: PRange, Def: "(0.5, 1.5)"}, {Name: "hue", Typ: PRange, Def: "(-0.05, 0.05)"}, PParam(0.5)},
		Targets: TargetsPixels, AnyFormat: true, FromArgs: photometricArgs,
		Compile: func(c *Compiler, n *Node, at CompileAt) error {
			if err := CheckProb(n.Op, at); err != nil {
				return err
			}
			n.MaxSteps = 5
			return c.jitter(n, at.Where, true, [4]float64{}, ArgsOf[PhotometricDistortArgs](n.Op).Jitter)
		},
		Draw: func(n *Node, r *det.RNG, d *Drawer) { n.drawPhotometric(r, d) },
		Format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(%v, p=%g)", ArgsOf[PhotometricDistortArgs](op).Jitter, op.P)
		},
		MaxNs: func(n *Node, w, h int) float64 { // contrast once, before or after
			var s float64
			for _, f := range []fn.Fn{fn.AdjustBrightness, fn.AdjustContrast, fn.AdjustSaturation, fn.AdjustHue, fn.PermuteChannels} {
				s += StepNs(fn.Step{Fn: f}, w, h)
			}
			return s
		}})
	grayStep := func(*Op) fn.Step { return fn.Step{Fn: fn.RGBToGrayscale, I: [6]int{3}} }
	Define(Def{Kind: OpGrayscale, Doc: "the image's luma in its three channels",
		Params: []Param{{Name: "num_output_channels", Typ: PInt, Def: "3"}},
		FromArgs: func(a *Args) Op {
			if c := a.Int("num_output_channels"); c != 3 {
				a.Errorf("num_output_channels=%d: stoker's batches have 3 channels; use num_output_channels=3", c)
			}
			return Op{}
		},
		Targets: TargetsPixels, AnyFormat: true, Step: grayStep, Draw: drawAlways, Format: FormatNone})
	Define(Def{Kind: OpRandomGrayscale, Doc: "Grayscale with probability p",
		Params:  []Param{PParam(0.1)},
		Targets: TargetsPixels, AnyFormat: true, Compile: compileP, Step: grayStep, Draw: DrawApplied})
}

// jitter compiles ColorJitter's ranges (jitter, or, without ranges, the
// single numbers scalar), as torchvision's _check_input.
func (c *Compiler) jitter(n *Node, where string, ranges bool, scalar [4]float64, jitter [4][2]float64) error {
	names := [4]string{"brightness", "contrast", "saturation", "hue"}
	for i := range 4 {
		center, lo, hi := 1.0, 0.0, math.Inf(1)
		if i == 3 {
			center, lo, hi = 0, -0.5, 0.5
		}
		r := jitter[i]
		if !ranges {
			x := scalar[i]
			if !(x >= 0) || math.IsInf(x, 0) {
				return OpError(where, "%s %v: a single number must be finite and >= 0", names[i], x)
			}
			r = [2]float64{center - x, center + x}
			if i < 3 {
				r[0] = math.Max(r[0], 0)
			}
		}
		if !(lo <= r[0] && r[0] <= r[1] && r[1] <= hi) || math.IsInf(r[1], 0) {
			return OpError(where, "%s %v: want %v <= min <= max <= %v", names[i], r, lo, hi)
		}
		if i < 3 && r[1] > 100 {
			return OpError(where, "%s %v: a factor over 100 makes every pixel 0 or 255", names[i], r)
		}
		n.jit[i], n.jitOn[i] = r, !(r[0] == center && r[1] == center)
	}
	return nil
}

// drawJitter is ColorJitter's make_params and transform: a random order of
// the four adjustments, each factor uniform in its range, None skipped.
func (n *Node) drawJitter(r *det.RNG, d *Drawer) {
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
			d.Emit(fn.Step{Fn: jitterFns[i], F: [6]float64{f[i]}})
		}
	}
}

// drawPhotometric is RandomPhotometricDistort's make_params and transform:
// each factor drawn at p in its range (brightness, contrast, saturation,
// hue, in that order), contrast before or after the middle two at even
// odds, a channel permutation at p; applied brightness, contrast if
// before, saturation, hue, contrast if after, the permutation.
func (n *Node) drawPhotometric(r *det.RNG, d *Drawer) {
	var f [4]float64
	var on [4]bool
	for i := range 4 {
		if r.Float64() < n.Op.P {
			on[i], f[i] = true, r.Uniform(n.jit[i][0], n.jit[i][1])
		}
	}
	before := r.Float64() < 0.5
	var perm [3]int
	permute := r.Float64() < n.Op.P
	if permute {
		r.Perm(perm[:])
	}
	emit := func(i int, k fn.Fn) {
		if on[i] {
			d.Emit(fn.Step{Fn: k, F: [6]float64{f[i]}})
		}
	}
	emit(0, fn.AdjustBrightness)
	if before {
		emit(1, fn.AdjustContrast)
	}
	emit(2, fn.AdjustSaturation)
	emit(3, fn.AdjustHue)
	if !before {
		emit(1, fn.AdjustContrast)
	}
	if permute {
		d.Emit(fn.Step{Fn: fn.PermuteChannels, I: [6]int{perm[0], perm[1], perm[2]}})
	}
}

// jitterNames are ColorJitter's and RandomPhotometricDistort's arguments,
// in their Jitter's order.
var jitterNames = [4]string{"brightness", "contrast", "saturation", "hue"}

// colorJitterArgs reads torchvision's forms: None (no change), a number x
// ([max(0, 1-x), 1+x]; hue [-x, x]) or (min, max).
func colorJitterArgs(a *Args) Op {
	op := &ColorJitterArgs{Ranges: true}
	for i, name := range jitterNames {
		if a.IsNone(name) {
			op.Jitter[i] = [2]float64{1, 1}
			if i == 3 {
				op.Jitter[i] = [2]float64{}
			}
			continue
		}
		fs := a.Floats(name)
		switch {
		case len(fs) == 2:
			op.Jitter[i] = [2]float64(fs)
		case len(fs) != 1:
			a.Errorf("%s %v: want a number or (min, max)", name, fs)
		case !(fs[0] >= 0):
			a.Errorf("%s %v: a single number must be >= 0", name, fs[0])
		case i == 3:
			op.Jitter[i] = [2]float64{-fs[0], fs[0]}
		default:
			op.Jitter[i] = [2]float64{max(1-fs[0], 0), 1 + fs[0]}
		}
	}
	return Op{Args: op}
}

func photometricArgs(a *Args) Op {
	pd := &PhotometricDistortArgs{}
	for i, name := range jitterNames {
		pd.Jitter[i] = a.Pair(name)
	}
	return Op{P: a.Float("p"), Args: pd}
}
