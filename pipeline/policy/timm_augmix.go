package policy

// timm's AugMix ("augmix-m5-w4-d2" and the like): its config and its
// draw, float32 weights and PIL's blends.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
)

// timmAugMixOps is timm's _AUGMIX_TRANSFORMS, in its order, each the
// increasing variant where there are two.
var timmAugMixOps = []augOp{augAutoContrast, augColor, augContrast, augBrightness, augSharpness, augEqualize, augRotate,
	augPosterize, augSolarize, augShearX, augShearY, augTranslateX, augTranslateY}

// parseTimmAugMixConfig parses a timm AugMix config as timm's
// augment_and_mix_transform does: "augmix", then sections of a key and a
// value starting at the first digit (a section without one skipped): m
// severity (3), w width (3), d depth (-1), a alpha (1.0), b blended (0),
// mstd (the first counts; default infinite, uniform magnitudes in
// [0, m]). translate_pct is create_transform's 0.3.
func parseTimmAugMixConfig(s string) (timmConfig, error) {
	c := timmConfig{text: s, m: 3, width: 3, depth: -1, alpha: 1, mstd: math.Inf(1), mmax: 10, translate: 0.3}
	parts := strings.Split(s, "-")
	if len(s) > 256 || parts[0] != "augmix" {
		return c, fmt.Errorf("timm AugMix config %q: want \"augmix-...\" (e.g. augmix-m5-w4-d2)", errs.Clip(s, 64))
	}
	haveStd := false
	for _, part := range parts[1:] {
		i := strings.IndexAny(part, "0123456789")
		if i < 0 {
			continue // timm: re.split finds no digit, the section is skipped
		}
		key, val := part[:i], part[i:]
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return c, fmt.Errorf("timm AugMix config %q: %s: %q is not a number", s, key, val)
		}
		whole := f == math.Trunc(f) && !strings.ContainsAny(val, ".eE") // timm's int(val)
		switch key {
		case "m":
			if !whole || f > 30 {
				return c, fmt.Errorf("timm AugMix config %q: m%s: want an integer 0..30", s, val)
			}
			c.m = f
		case "w":
			if !whole || f < 1 || f > MaxOps {
				return c, fmt.Errorf("timm AugMix config %q: w%s: want an integer 1..%d", s, val, MaxOps)
			}
			c.width = int(f)
		case "d":
			if !whole || f > MaxOps {
				return c, fmt.Errorf("timm AugMix config %q: d%s: want an integer 0..%d (0: 1..3 per chain)", s, val, MaxOps)
			}
			c.depth = int(f)
		case "a":
			if !(f > 0 && f <= 1e3) {
				return c, fmt.Errorf("timm AugMix config %q: a%s: want 0 < alpha <= 1000", s, val)
			}
			c.alpha = f
		case "b":
			if !whole {
				return c, fmt.Errorf("timm AugMix config %q: b%s: want an integer", s, val)
			}
			c.blended = f != 0 // timm: bool(int(val))
		case "mstd":
			if f > 1e3 {
				return c, fmt.Errorf("timm AugMix config %q: mstd%s: want at most 1000", s, val)
			}
			if !haveStd {
				haveStd, c.mstd = true, f
			}
		default:
			return c, fmt.Errorf("timm AugMix config %q: unknown section %q (timm's AugMix knows m, w, d, a, b and mstd)", s, part)
		}
	}
	return c, nil
}

// drawTimmAugMix is timm's AugMixAugment.__call__: float32
// Dirichlet weights of the chains and a float32 Beta weight m; each chain
// depth ops (or 1..3) chosen with replacement from the image, each at the
// severity through timmStep (probability 1); the chains' float32 sum
// (augmix_begin of weight 0, as timm's zeros, and a chain per weight),
// clipped and truncated to uint8 (augmix_end); then PIL's blend of the
// image with it by m (augmix_blend). Blended (b1, _apply_blended): each
// chain's result blended into the image so far by timm's blended weights
// (augmix_fold), the chains' sum unused.
func (p *Policy) drawTimmAugMix(r *det.RNG, d *drawer) {
	c := &p.timm
	var wbuf [MaxOps]float64
	ws := wbuf[:c.width]
	r.Dirichlet(c.alpha, ws)
	var m [2]float64
	r.Dirichlet(c.alpha, m[:])
	d.emit(fn.Step{Fn: fn.MixBegin})
	var folds [MaxOps]float32
	if c.blended {
		// _calc_blended_weights, in float32 as numpy computes it: each
		// chain's weight times m, from the last, over what the later
		// blends leave of it.
		mf, cump := float32(m[0]), float32(1)
		for i := len(ws) - 1; i >= 0; i-- {
			a := float32(float32(float32(ws[i])*mf) / cump)
			cump = float32(cump * float32(1-a))
			folds[i] = a
		}
	}
	for i, w := range ws {
		if c.blended {
			d.emit(fn.Step{Fn: fn.MixChain}) // from the image; the sum is not used
		} else {
			d.emit(fn.Step{Fn: fn.MixChain, F: [6]float64{float64(float32(w))}})
		}
		depth := c.depth
		if depth <= 0 {
			depth = 1 + r.Intn(3)
		}
		for range depth {
			p.timmStep(r, d, p.space[r.Intn(len(p.space))].op, timmIncreasing, c.m)
		}
		if c.blended {
			d.emit(fn.Step{Fn: fn.MixFold, F: [6]float64{float64(folds[i])}})
		}
	}
	if !c.blended {
		d.emit(fn.Step{Fn: fn.MixEnd})
		d.emit(fn.Step{Fn: fn.MixBlend, F: [6]float64{float64(float32(m[0]))}})
	}
}
