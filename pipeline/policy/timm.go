package policy

// timm's RandAugment ("rand-m9-mstd0.5-inc1" and the like): its config,
// its augmentation space and weights, and AugmentOp (timmStep), which
// timm's AutoAugment and AugMix (timm_aa.go, timm_augmix.go)
// run too.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// timmConfig is a timm RandAugment config string, parsed as timm's
// rand_augment_transform parses it (timm/data/auto_augment.py): "rand" and
// then m (magnitude, default 10; the last one given counts), n (ops per
// image, default 2), p (each op's probability, default 0.5), mstd
// (magnitude noise; > 100: uniform; the first one given counts, as timm's
// hparams.setdefault), mmax (the magnitude's upper bound, default and for
// mmax0 10, _LEVEL_DENOM, as timm's `magnitude_max or _LEVEL_DENOM`; the
// first one counts), inc (the increasing variants: timm tests bool() of
// the string, so inc0 turns them on too) and t (the transform set, the
// first one counts: "weights" is timm's _RAND_WEIGHTED_0, chosen by weight
// without replacement; "3a" and "3aw" are refused, stoker's RandAugment
// has not their op sets (timm's AutoAugment "3a" is TimmAutoAugment's);
// any other name is the default set, as timm's rand_augment_choices).
type timmConfig struct {
	text      string
	m         float64
	n         int
	p         float64
	mstd      float64
	mmax      float64
	increase  bool
	weighted  bool    // t "weights"
	translate float64 // translate_pct, default 0.45
	random    bool    // Op.RandomInterp
	// aa: timm's AutoAugment sub-policies (TimmAutoAugment), its config's
	// policy name first.
	aa [][]timmAAOp
	// TimmAugMix: width chains of depth ops (<= 0: 1..3 per chain), the
	// Dirichlet's and the Beta's alpha; m is its severity.
	width, depth int
	alpha        float64
	blended      bool // b1: one PIL blend per chain (augmix_fold)
}

// timmVariant is which of timm's level functions an op takes: the plain
// one, the increasing one ("...Increasing") or PosterizeOriginal's.
type timmVariant uint8

const (
	timmPlain timmVariant = iota
	timmIncreasing
	timmOriginal
)

func parseTimmConfig(s string) (timmConfig, error) {
	c := timmConfig{text: s, m: 10, n: 2, p: 0.5, mmax: 10, translate: 0.45}
	parts := strings.Split(s, "-")
	if len(s) > 256 || parts[0] != "rand" {
		return c, fmt.Errorf("timm RandAugment config %q: want \"rand-...\" (e.g. rand-m9-mstd0.5-inc1)", errs.Clip(s, 64))
	}
	var haveStd, haveMax, haveT bool
	for _, part := range parts[1:] {
		if strings.HasPrefix(part, "t") {
			if haveT {
				continue
			}
			haveT = true
			switch part[1:] {
			case "weights":
				c.weighted = true
			case "3a", "3aw":
				return c, fmt.Errorf("timm RandAugment config %q: transform set %q is not supported (timm's AutoAugment 3a is TimmAutoAugment's); stoker runs timm's default set (no t section, or any other name) and tweights", s, part[1:])
			}
			continue
		}
		i := strings.IndexAny(part, "0123456789")
		if i <= 0 {
			return c, fmt.Errorf("timm RandAugment config %q: section %q is not KEYVALUE", s, part)
		}
		key, val := part[:i], part[i:]
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return c, fmt.Errorf("timm RandAugment config %q: %s: %q is not a number", s, key, val)
		}
		switch key {
		case "m":
			if f < 0 || f > 30 || f != math.Trunc(f) {
				return c, fmt.Errorf("timm RandAugment config %q: m%v: want an integer 0..30", s, val)
			}
			c.m = f
		case "n":
			if f < 0 || f > MaxOps || f != math.Trunc(f) {
				return c, fmt.Errorf("timm RandAugment config %q: n%v: want an integer 0..%d", s, val, MaxOps)
			}
			c.n = int(f)
		case "p":
			if f > 1 {
				return c, fmt.Errorf("timm RandAugment config %q: p%v: want a probability 0..1", s, val)
			}
			c.p = f
		case "mstd":
			if haveStd {
				continue
			}
			haveStd = true
			c.mstd = f
			if f > 100 {
				c.mstd = math.Inf(1)
			}
		case "mmax":
			if haveMax {
				continue
			}
			haveMax = true
			if f > 30 || f != math.Trunc(f) {
				return c, fmt.Errorf("timm RandAugment config %q: mmax%v: want an integer 0..30", s, val)
			}
			c.mmax = f
			if f == 0 {
				c.mmax = 10 // timm: magnitude_max or _LEVEL_DENOM
			}
		case "inc":
			c.increase = true // timm: bool(val) of the string
		default:
			return c, fmt.Errorf("timm RandAugment config %q: unknown section %q (stoker knows m, n, p, mstd, mmax, inc and t)", s, key)
		}
	}
	if c.weighted && c.n > len(timmWeights) {
		return c, fmt.Errorf("timm RandAugment config %q: n%d with tweights: timm chooses without replacement from %d ops", s, c.n, len(timmWeights))
	}
	return c, nil
}

// timmWeights is timm's _RAND_WEIGHTED_0, in its order: the ops (their
// increasing variants where there are two) and their weights.
var timmWeights = []struct {
	op augOp
	w  float64
}{
	{augRotate, 3}, {augShearX, 2}, {augShearY, 2}, {augTranslateX, 1}, {augTranslateY, 1},
	{augColor, .25}, {augSharpness, 0.25}, {augAutoContrast, 0.25}, {augSolarize, .05}, {augSolarizeAdd, .05},
	{augContrast, .05}, {augBrightness, .05}, {augEqualize, .05}, {augPosterize, 0.05}, {augInvert, 0.05},
}

// timmSpace is timm's _RAND_TRANSFORMS, or _RAND_INCREASING_TRANSFORMS with
// inc, in timm's order (the magnitudes are computed per draw).
func timmSpace(c timmConfig) []augEntry {
	if c.weighted {
		out := make([]augEntry, len(timmWeights))
		for i, e := range timmWeights {
			out[i] = augEntry{op: e.op}
		}
		return out
	}
	ops := []augOp{augAutoContrast, augEqualize, augInvert, augRotate, augPosterize, augSolarize, augSolarizeAdd,
		augColor, augContrast, augBrightness, augSharpness, augShearX, augShearY, augTranslateX, augTranslateY}
	out := make([]augEntry, len(ops))
	for i, op := range ops {
		out[i] = augEntry{op: op}
	}
	return out
}

// drawTimm is timm's RandAugment.__call__: n ops chosen with replacement,
// each applied with probability 0.5 at magnitude m (timmStep).
func (p *Policy) drawTimm(r *det.RNG, d *drawer) {
	c := &p.timm
	var chosen [MaxOps]int
	if c.weighted {
		timmChoose(r, chosen[:c.n])
	}
	variant := timmPlain
	if c.increase || c.weighted { // _RAND_WEIGHTED_0 names the increasing variants
		variant = timmIncreasing
	}
	for k := range c.n {
		var e *augEntry
		if c.weighted {
			e = &p.space[chosen[k]]
		} else {
			e = &p.space[r.Intn(len(p.space))]
		}
		if c.p < 1 && r.Float64() > c.p {
			continue
		}
		p.timmStep(r, d, e.op, variant, c.m)
	}
}

// timmStep is timm's AugmentOp.__call__ once its probability has passed:
// the magnitude m (with gaussian noise of mstd, or uniform in [0, m] when
// mstd is infinite), clipped to [0, mmax], its argument from timm's level
// function for the op's variant. Resampling is the policy's
// interpolation; for bilinear-or-bicubic ("random" in the wire's terms)
// each op draws one, as timm's _interpolation does.
func (p *Policy) timmStep(r *det.RNG, d *drawer, op augOp, variant timmVariant, m float64) {
	c := &p.timm
	switch {
	case math.IsInf(c.mstd, 1):
		m = r.Uniform(0, m)
	case c.mstd > 0:
		m = float64(m + float64(c.mstd*r.Normal()))
	}
	m = math.Max(0, math.Min(m, c.mmax))
	lvl := m / 10
	negate := func(v float64) float64 {
		if r.Float64() > 0.5 {
			return -v
		}
		return v
	}
	interp := p.interp
	if p.timmRandomInterp() {
		interp = kernels.Bilinear
		if r.Intn(2) == 1 {
			interp = kernels.Bicubic
		}
	}
	inc := variant == timmIncreasing
	geo := fn.Step{Fn: fn.Affine, Interp: interp, Fill: p.fill, FillNone: p.fillNone, F: [6]float64{0, 0, 0, 1, 0, 0}}
	enhance := func(f fn.Fn) {
		v := float64(lvl*1.8) + 0.1
		if inc {
			v = math.Max(0.1, 1+negate(float64(lvl*0.9)))
		}
		d.emit(fn.Step{Fn: f, F: [6]float64{v}})
	}
	switch op {
	case augAutoContrast:
		d.emit(fn.Step{Fn: fn.Autocontrast})
	case augEqualize:
		d.emit(fn.Step{Fn: fn.Equalize})
	case augInvert:
		d.emit(fn.Step{Fn: fn.Invert})
	case augRotate:
		d.emit(fn.Step{Fn: fn.Rotate, F: [6]float64{negate(float64(lvl * 30))}, Interp: interp, Fill: p.fill, FillNone: p.fillNone})
	case augPosterize:
		bits := int(float64(lvl * 4))
		switch variant {
		case timmIncreasing:
			// 4 - int(level * 4): negative past m10 (mmax > 10),
			// which PIL refuses (13: bits must be 1..8) or, before
			// it, made black, as 0 bits do
			bits = max(4-bits, 0)
		case timmOriginal:
			bits += 4 // _posterize_original_level_to_arg: 4..8
		}
		if bits < 8 {
			d.emit(fn.Step{Fn: fn.Posterize, I: [6]int{bits}})
		}
	case augSolarize:
		thresh := min(256, int(float64(lvl*256))) // timm's min(256, ...)
		if inc {
			thresh = 256 - thresh
		}
		if thresh <= 255 {
			d.emit(fn.Step{Fn: fn.Solarize, F: [6]float64{float64(thresh)}})
		}
	case augSolarizeAdd:
		d.emit(fn.Step{Fn: fn.SolarizeAdd, I: [6]int{min(128, int(float64(lvl*110)))}, F: [6]float64{128}}) // timm's min(128, ...)
	case augColor:
		enhance(fn.AdjustSaturation)
	case augContrast:
		enhance(fn.AdjustContrast)
	case augBrightness:
		enhance(fn.AdjustBrightness)
	case augSharpness:
		enhance(fn.AdjustSharpness)
	case augShearX, augShearY:
		f := negate(float64(lvl * 0.3))
		geo.F[4+int(op-augShearX)] = det.Atan(f) * 180 / math.Pi
		geo.HasCenter = true
		d.emit(geo)
	case augTranslateX:
		geo.F[1] = -float64(negate(float64(lvl*c.translate)) * float64(d.w))
		d.emit(geo)
	case augTranslateY:
		geo.F[2] = -float64(negate(float64(lvl*c.translate)) * float64(d.h))
		d.emit(geo)
	case augDesaturate:
		// _minmax_level_to_arg(min 0.5, max 1), then desaturate's
		// ImageEnhance.Color(min(1, max(0, 1 - level)))
		l := math.Max(0.5, math.Min(1, float64(0.5+float64(0.5*lvl))))
		d.emit(fn.Step{Fn: fn.AdjustSaturation, F: [6]float64{math.Min(1, math.Max(0, 1-l))}})
	case augBlurRand:
		// gaussian_blur_rand: PIL's GaussianBlur of radius
		// uniform(0.1, 2 * level), as torchvision's gaussian_blur of that
		// sigma over 2*ceil(3 sigma)+1 taps (at most the image allows)
		sigma := r.Uniform(0.1, float64(2*math.Max(0, math.Min(1, lvl))))
		k := 2*int(math.Ceil(float64(3*sigma))) + 1
		k = min(k, 2*(min(d.w, d.h)-1)+1)
		d.emit(fn.Step{Fn: fn.GaussianBlur, I: [6]int{k, k}, F: [6]float64{sigma, sigma}})
	}
}

// timmChoose is numpy's choice(len(timmWeights), len(out), replace=False,
// p=weights), as timm's RandAugment with weights calls it, in distribution:
// one index at a time by its weight among those not yet chosen (numpy
// draws them in rounds and keeps the first of each, which gives each
// ordered choice the same probability).
func timmChoose(r *det.RNG, out []int) {
	var taken [16]bool
	for k := range out {
		total := 0.0
		for i, e := range timmWeights {
			if !taken[i] {
				total += e.w
			}
		}
		x, pick := r.Float64()*total, -1
		for i, e := range timmWeights {
			if taken[i] {
				continue
			}
			pick = i
			if x -= e.w; x < 0 {
				break
			}
		}
		taken[pick], out[k] = true, pick
	}
}

// timmRandomInterp reports whether the policy draws bilinear or bicubic
// per resampling op (timm's default, _RANDOM_INTERPOLATION).
func (p *Policy) timmRandomInterp() bool { return p.timm.random }
