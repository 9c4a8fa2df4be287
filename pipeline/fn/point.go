package fn

// The point ops: adjust_sharpness, solarize, posterize, invert,
// equalize, autocontrast and timm's solarize_add (the classes are
// pipeline/ops' point.go).

import (
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

var (
	AdjustSharpness = define(Def{name: "adjust_sharpness", args: []arg{{"sharpness_factor", argFloat, 0, 1}}, Ns: 2.71,
		kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) { kernels.AdjustSharpness(p, st.F[0], ks) },
		check:  checkFactor, Role: TargetsPixels})
	Solarize = define(Def{name: "solarize", args: []arg{{"threshold", argFloat, 0, 1}}, Ns: 0.057,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.Solarize(p, st.F[0]) },
		check: func(st *Step, _, _ int) error {
			if !(st.F[0] >= 0 && st.F[0] <= 255) {
				return StepError(st, "threshold %v: want 0..255", st.F[0])
			}
			return nil
		}, Role: TargetsPixels})
	Posterize = define(Def{name: "posterize", args: []arg{{"bits", argInt, 0, 1}}, Ns: 0.055,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.Posterize(p, st.I[0]) },
		check: func(st *Step, _, _ int) error {
			if st.I[0] < 0 || st.I[0] > 8 {
				return StepError(st, "bits %d: want 0..8", st.I[0])
			}
			return nil
		}, Role: TargetsPixels})
	Invert = define(Def{name: "invert", Ns: 0.054,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.Invert(p) }, Role: TargetsPixels})
	Equalize = define(Def{name: "equalize", Ns: 1.07,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.Equalize(p) }, Role: TargetsPixels})
	Autocontrast = define(Def{name: "autocontrast", Ns: 0.15,
		kernel: func(p kernels.Planes, _ *Step, _ *kernels.Scratch) { kernels.Autocontrast(p) }, Role: TargetsPixels})
	// SolarizeAdd is timm's SolarizeAdd (add, clamped, to the pixels
	// below the threshold): no torchvision functional has it.
	SolarizeAdd = define(Def{name: "solarize_add", args: []arg{{"addition", argInt, 0, 1}, {"threshold", argFloat, 0, 1}}, Ns: 0.070,
		kernel: func(p kernels.Planes, st *Step, _ *kernels.Scratch) { kernels.SolarizeAdd(p, st.I[0], st.F[0]) },
		Role:   TargetsPixels})
)
