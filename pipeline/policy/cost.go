package policy

import (
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// MaxNs is the policy's longest draw (maxSteps) at its most expensive op
// (AugMix's blends counted as such steps).
func (p *Policy) MaxNs(w, h int) float64 {
	interp := p.interp
	if (p.kind == TimmRandAugment || p.kind == TimmAutoAugment || p.kind == TimmAugMix) && p.timmRandomInterp() {
		interp = kernels.Bicubic
	}
	var most float64
	for _, e := range p.space {
		st := fn.Step{Fn: augFn(e.op), Interp: interp}
		if e.op == augBlurRand {
			st.I = [6]int{13, 13} // 2*ceil(3 * 2)+1 at timm's largest radius
		}
		most = max(most, fn.StepNs(st, w, h))
	}
	if p.kind == AugMix || p.kind == TimmAugMix {
		most = max(most, fn.StepNs(fn.Step{Fn: fn.MixChain}, w, h))
	}
	return float64(p.maxSteps) * most
}

// augFn is the functional op a policy's op runs as.
func augFn(op augOp) fn.Fn {
	return [...]fn.Fn{
		augIdentity: fn.None, augShearX: fn.Affine, augShearY: fn.Affine, augTranslateX: fn.Affine, augTranslateY: fn.Affine,
		augRotate: fn.Rotate, augBrightness: fn.AdjustBrightness, augColor: fn.AdjustSaturation, augContrast: fn.AdjustContrast,
		augSharpness: fn.AdjustSharpness, augPosterize: fn.Posterize, augSolarize: fn.Solarize, augAutoContrast: fn.Autocontrast,
		augEqualize: fn.Equalize, augInvert: fn.Invert, augSolarizeAdd: fn.SolarizeAdd, augDesaturate: fn.AdjustSaturation,
		augBlurRand: fn.GaussianBlur,
	}[op]
}
