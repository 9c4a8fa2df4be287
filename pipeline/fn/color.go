package fn

// The colour's functional ops: adjust_brightness, adjust_contrast,
// adjust_saturation, adjust_hue, rgb_to_grayscale, permute_channels (the
// classes are pipeline/ops' color.go and channelperm.go).

import (
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

var (
	AdjustBrightness = define(Def{name: "adjust_brightness", args: []arg{{"brightness_factor", argFloat, 0, 1}}, Ns: 0.099,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.AdjustBrightness(p, st.F[0]) },
		check:  checkFactor, Role: TargetsPixels})
	AdjustContrast = define(Def{name: "adjust_contrast", args: []arg{{"contrast_factor", argFloat, 0, 1}}, Ns: 0.40,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.AdjustContrast(p, st.F[0]) },
		check:  checkFactor, Role: TargetsPixels})
	AdjustSaturation = define(Def{name: "adjust_saturation", args: []arg{{"saturation_factor", argFloat, 0, 1}}, Ns: 1.04,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.AdjustSaturation(p, st.F[0]) },
		check:  checkFactor, Role: TargetsPixels})
	AdjustHue = define(Def{name: "adjust_hue", args: []arg{{"hue_factor", argFloat, 0, 1}}, Ns: 0.87,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.AdjustHue(p, st.F[0]) },
		check: func(st *Step, _, _ int) error {
			if !(st.F[0] >= -0.5 && st.F[0] <= 0.5) {
				return StepError(st, "hue_factor %v: want -0.5..0.5", st.F[0])
			}
			return nil
		}, Role: TargetsPixels})
	RGBToGrayscale = define(Def{name: "rgb_to_grayscale", args: []arg{{"num_output_channels", argInt, 0, 1}}, Ns: 0.28,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.RGBToGrayscale(p) },
		check: func(st *Step, _, _ int) error {
			if st.I[0] != 3 && st.I[0] != 0 {
				return StepError(st, "num_output_channels %d: stoker's samples have 3 channels", st.I[0])
			}
			return nil
		}, Role: TargetsPixels})
	// PermuteChannels is torchvision's permute_channels: output channel
	// c is input channel I[c].
	PermuteChannels = define(Def{name: "permute_channels", args: []arg{{"permutation", argInt, 0, 3}}, Ns: 0.062,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.PermuteChannels(p, [3]int(st.I[:3])) },
		check: func(st *Step, _, _ int) error {
			if pm := st.I; pm[0]+pm[1]+pm[2] != 3 || pm[0]*pm[1]*pm[2] != 0 || min(pm[0], pm[1], pm[2]) < 0 || max(pm[0], pm[1], pm[2]) > 2 ||
				pm[0] == pm[1] || pm[1] == pm[2] || pm[0] == pm[2] {
				return StepError(st, "permutation %v: want a permutation of 0, 1, 2", st.I[:3])
			}
			return nil
		}, Role: TargetsPixels})
)

// checkFactor checks an adjust_* factor.
func checkFactor(st *Step, _, _ int) error {
	if !(st.F[0] >= 0) {
		return StepError(st, "factor %v: want >= 0", st.F[0])
	}
	return nil
}
