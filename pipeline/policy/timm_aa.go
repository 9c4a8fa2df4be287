package policy

// timm's AutoAugment policies ("original", "originalr", "v0", "v0r",
// "3a"): their config and sub-policy tables.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// timmAAOp is one op of a timm AutoAugment sub-policy.
type timmAAOp struct {
	op      augOp
	variant timmVariant
	p, m    float64
}

// parseTimmAAConfig parses a timm AutoAugment config as timm's
// auto_augment_transform does: the policy's name, then sections split on
// "-" of a key and a value starting at the first digit, where a section
// without a digit is skipped and only mstd (the first counts, as timm's
// hparams.setdefault) is known. Its magnitudes are bounded by 10 (timm's
// _LEVEL_DENOM; AutoAugment has no mmax).
func parseTimmAAConfig(s string) (timmConfig, error) {
	c := timmConfig{text: s, mmax: 10, translate: 0.45}
	parts := strings.Split(s, "-")
	subs, ok := timmAutoAugmentPolicies[parts[0]]
	if len(s) > 256 || !ok {
		return c, fmt.Errorf("timm AutoAugment config %q: want original, originalr, v0, v0r or 3a, then -mstd sections (e.g. v0r-mstd0.5)", errs.Clip(s, 64))
	}
	c.aa = subs
	haveStd := false
	for _, part := range parts[1:] {
		i := strings.IndexAny(part, "0123456789")
		if i < 0 {
			continue // timm: re.split finds no digit, the section is skipped
		}
		key, val := part[:i], part[i:]
		if key != "mstd" {
			return c, fmt.Errorf("timm AutoAugment config %q: unknown section %q (timm's AutoAugment knows mstd only)", s, part)
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e3 {
			return c, fmt.Errorf("timm AutoAugment config %q: mstd: %q is not a number up to 1000", s, val)
		}
		if !haveStd {
			haveStd, c.mstd = true, f
		}
	}
	return c, nil
}

// timmAutoAugmentPolicies are timm's auto_augment_policy sub-policies
// (timm/data/auto_augment.py, timm 1.0.31): (op, variant, probability,
// magnitude).
var timmAutoAugmentPolicies = map[string][][]timmAAOp{
	"original": {
		{{augPosterize, timmOriginal, 0.4, 8}, {augRotate, timmPlain, 0.6, 9}},
		{{augSolarize, timmPlain, 0.6, 5}, {augAutoContrast, timmPlain, 0.6, 5}},
		{{augEqualize, timmPlain, 0.8, 8}, {augEqualize, timmPlain, 0.6, 3}},
		{{augPosterize, timmOriginal, 0.6, 7}, {augPosterize, timmOriginal, 0.6, 6}},
		{{augEqualize, timmPlain, 0.4, 7}, {augSolarize, timmPlain, 0.2, 4}},
		{{augEqualize, timmPlain, 0.4, 4}, {augRotate, timmPlain, 0.8, 8}},
		{{augSolarize, timmPlain, 0.6, 3}, {augEqualize, timmPlain, 0.6, 7}},
		{{augPosterize, timmOriginal, 0.8, 5}, {augEqualize, timmPlain, 1.0, 2}},
		{{augRotate, timmPlain, 0.2, 3}, {augSolarize, timmPlain, 0.6, 8}},
		{{augEqualize, timmPlain, 0.6, 8}, {augPosterize, timmOriginal, 0.4, 6}},
		{{augRotate, timmPlain, 0.8, 8}, {augColor, timmPlain, 0.4, 0}},
		{{augRotate, timmPlain, 0.4, 9}, {augEqualize, timmPlain, 0.6, 2}},
		{{augEqualize, timmPlain, 0.0, 7}, {augEqualize, timmPlain, 0.8, 8}},
		{{augInvert, timmPlain, 0.6, 4}, {augEqualize, timmPlain, 1.0, 8}},
		{{augColor, timmPlain, 0.6, 4}, {augContrast, timmPlain, 1.0, 8}},
		{{augRotate, timmPlain, 0.8, 8}, {augColor, timmPlain, 1.0, 2}},
		{{augColor, timmPlain, 0.8, 8}, {augSolarize, timmPlain, 0.8, 7}},
		{{augSharpness, timmPlain, 0.4, 7}, {augInvert, timmPlain, 0.6, 8}},
		{{augShearX, timmPlain, 0.6, 5}, {augEqualize, timmPlain, 1.0, 9}},
		{{augColor, timmPlain, 0.4, 0}, {augEqualize, timmPlain, 0.6, 3}},
		{{augEqualize, timmPlain, 0.4, 7}, {augSolarize, timmPlain, 0.2, 4}},
		{{augSolarize, timmPlain, 0.6, 5}, {augAutoContrast, timmPlain, 0.6, 5}},
		{{augInvert, timmPlain, 0.6, 4}, {augEqualize, timmPlain, 1.0, 8}},
		{{augColor, timmPlain, 0.6, 4}, {augContrast, timmPlain, 1.0, 8}},
		{{augEqualize, timmPlain, 0.8, 8}, {augEqualize, timmPlain, 0.6, 3}},
	},
	"originalr": {
		{{augPosterize, timmIncreasing, 0.4, 8}, {augRotate, timmPlain, 0.6, 9}},
		{{augSolarize, timmPlain, 0.6, 5}, {augAutoContrast, timmPlain, 0.6, 5}},
		{{augEqualize, timmPlain, 0.8, 8}, {augEqualize, timmPlain, 0.6, 3}},
		{{augPosterize, timmIncreasing, 0.6, 7}, {augPosterize, timmIncreasing, 0.6, 6}},
		{{augEqualize, timmPlain, 0.4, 7}, {augSolarize, timmPlain, 0.2, 4}},
		{{augEqualize, timmPlain, 0.4, 4}, {augRotate, timmPlain, 0.8, 8}},
		{{augSolarize, timmPlain, 0.6, 3}, {augEqualize, timmPlain, 0.6, 7}},
		{{augPosterize, timmIncreasing, 0.8, 5}, {augEqualize, timmPlain, 1.0, 2}},
		{{augRotate, timmPlain, 0.2, 3}, {augSolarize, timmPlain, 0.6, 8}},
		{{augEqualize, timmPlain, 0.6, 8}, {augPosterize, timmIncreasing, 0.4, 6}},
		{{augRotate, timmPlain, 0.8, 8}, {augColor, timmPlain, 0.4, 0}},
		{{augRotate, timmPlain, 0.4, 9}, {augEqualize, timmPlain, 0.6, 2}},
		{{augEqualize, timmPlain, 0.0, 7}, {augEqualize, timmPlain, 0.8, 8}},
		{{augInvert, timmPlain, 0.6, 4}, {augEqualize, timmPlain, 1.0, 8}},
		{{augColor, timmPlain, 0.6, 4}, {augContrast, timmPlain, 1.0, 8}},
		{{augRotate, timmPlain, 0.8, 8}, {augColor, timmPlain, 1.0, 2}},
		{{augColor, timmPlain, 0.8, 8}, {augSolarize, timmPlain, 0.8, 7}},
		{{augSharpness, timmPlain, 0.4, 7}, {augInvert, timmPlain, 0.6, 8}},
		{{augShearX, timmPlain, 0.6, 5}, {augEqualize, timmPlain, 1.0, 9}},
		{{augColor, timmPlain, 0.4, 0}, {augEqualize, timmPlain, 0.6, 3}},
		{{augEqualize, timmPlain, 0.4, 7}, {augSolarize, timmPlain, 0.2, 4}},
		{{augSolarize, timmPlain, 0.6, 5}, {augAutoContrast, timmPlain, 0.6, 5}},
		{{augInvert, timmPlain, 0.6, 4}, {augEqualize, timmPlain, 1.0, 8}},
		{{augColor, timmPlain, 0.6, 4}, {augContrast, timmPlain, 1.0, 8}},
		{{augEqualize, timmPlain, 0.8, 8}, {augEqualize, timmPlain, 0.6, 3}},
	},
	"v0": {
		{{augEqualize, timmPlain, 0.8, 1}, {augShearY, timmPlain, 0.8, 4}},
		{{augColor, timmPlain, 0.4, 9}, {augEqualize, timmPlain, 0.6, 3}},
		{{augColor, timmPlain, 0.4, 1}, {augRotate, timmPlain, 0.6, 8}},
		{{augSolarize, timmPlain, 0.8, 3}, {augEqualize, timmPlain, 0.4, 7}},
		{{augSolarize, timmPlain, 0.4, 2}, {augSolarize, timmPlain, 0.6, 2}},
		{{augColor, timmPlain, 0.2, 0}, {augEqualize, timmPlain, 0.8, 8}},
		{{augEqualize, timmPlain, 0.4, 8}, {augSolarizeAdd, timmPlain, 0.8, 3}},
		{{augShearX, timmPlain, 0.2, 9}, {augRotate, timmPlain, 0.6, 8}},
		{{augColor, timmPlain, 0.6, 1}, {augEqualize, timmPlain, 1.0, 2}},
		{{augInvert, timmPlain, 0.4, 9}, {augRotate, timmPlain, 0.6, 0}},
		{{augEqualize, timmPlain, 1.0, 9}, {augShearY, timmPlain, 0.6, 3}},
		{{augColor, timmPlain, 0.4, 7}, {augEqualize, timmPlain, 0.6, 0}},
		{{augPosterize, timmPlain, 0.4, 6}, {augAutoContrast, timmPlain, 0.4, 7}},
		{{augSolarize, timmPlain, 0.6, 8}, {augColor, timmPlain, 0.6, 9}},
		{{augSolarize, timmPlain, 0.2, 4}, {augRotate, timmPlain, 0.8, 9}},
		{{augRotate, timmPlain, 1.0, 7}, {augTranslateY, timmPlain, 0.8, 9}},
		{{augShearX, timmPlain, 0.0, 0}, {augSolarize, timmPlain, 0.8, 4}},
		{{augShearY, timmPlain, 0.8, 0}, {augColor, timmPlain, 0.6, 4}},
		{{augColor, timmPlain, 1.0, 0}, {augRotate, timmPlain, 0.6, 2}},
		{{augEqualize, timmPlain, 0.8, 4}, {augEqualize, timmPlain, 0.0, 8}},
		{{augEqualize, timmPlain, 1.0, 4}, {augAutoContrast, timmPlain, 0.6, 2}},
		{{augShearY, timmPlain, 0.4, 7}, {augSolarizeAdd, timmPlain, 0.6, 7}},
		{{augPosterize, timmPlain, 0.8, 2}, {augSolarize, timmPlain, 0.6, 10}},
		{{augSolarize, timmPlain, 0.6, 8}, {augEqualize, timmPlain, 0.6, 1}},
		{{augColor, timmPlain, 0.8, 6}, {augRotate, timmPlain, 0.4, 5}},
	},
	"v0r": {
		{{augEqualize, timmPlain, 0.8, 1}, {augShearY, timmPlain, 0.8, 4}},
		{{augColor, timmPlain, 0.4, 9}, {augEqualize, timmPlain, 0.6, 3}},
		{{augColor, timmPlain, 0.4, 1}, {augRotate, timmPlain, 0.6, 8}},
		{{augSolarize, timmPlain, 0.8, 3}, {augEqualize, timmPlain, 0.4, 7}},
		{{augSolarize, timmPlain, 0.4, 2}, {augSolarize, timmPlain, 0.6, 2}},
		{{augColor, timmPlain, 0.2, 0}, {augEqualize, timmPlain, 0.8, 8}},
		{{augEqualize, timmPlain, 0.4, 8}, {augSolarizeAdd, timmPlain, 0.8, 3}},
		{{augShearX, timmPlain, 0.2, 9}, {augRotate, timmPlain, 0.6, 8}},
		{{augColor, timmPlain, 0.6, 1}, {augEqualize, timmPlain, 1.0, 2}},
		{{augInvert, timmPlain, 0.4, 9}, {augRotate, timmPlain, 0.6, 0}},
		{{augEqualize, timmPlain, 1.0, 9}, {augShearY, timmPlain, 0.6, 3}},
		{{augColor, timmPlain, 0.4, 7}, {augEqualize, timmPlain, 0.6, 0}},
		{{augPosterize, timmIncreasing, 0.4, 6}, {augAutoContrast, timmPlain, 0.4, 7}},
		{{augSolarize, timmPlain, 0.6, 8}, {augColor, timmPlain, 0.6, 9}},
		{{augSolarize, timmPlain, 0.2, 4}, {augRotate, timmPlain, 0.8, 9}},
		{{augRotate, timmPlain, 1.0, 7}, {augTranslateY, timmPlain, 0.8, 9}},
		{{augShearX, timmPlain, 0.0, 0}, {augSolarize, timmPlain, 0.8, 4}},
		{{augShearY, timmPlain, 0.8, 0}, {augColor, timmPlain, 0.6, 4}},
		{{augColor, timmPlain, 1.0, 0}, {augRotate, timmPlain, 0.6, 2}},
		{{augEqualize, timmPlain, 0.8, 4}, {augEqualize, timmPlain, 0.0, 8}},
		{{augEqualize, timmPlain, 1.0, 4}, {augAutoContrast, timmPlain, 0.6, 2}},
		{{augShearY, timmPlain, 0.4, 7}, {augSolarizeAdd, timmPlain, 0.6, 7}},
		{{augPosterize, timmIncreasing, 0.8, 2}, {augSolarize, timmPlain, 0.6, 10}},
		{{augSolarize, timmPlain, 0.6, 8}, {augEqualize, timmPlain, 0.6, 1}},
		{{augColor, timmPlain, 0.8, 6}, {augRotate, timmPlain, 0.4, 5}},
	},
	"3a": {
		{{augSolarize, timmPlain, 1.0, 5}},
		{{augDesaturate, timmPlain, 1.0, 10}},
		{{augBlurRand, timmPlain, 1.0, 10}},
	},
}
