package fn

// erase: RandomErasing's functional op (the class is pipeline/ops'
// erase.go), and the ImageNet statistics its value="random" and the
// presets use.

import (
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Erase costs a pixel of the erased box.
var Erase = define(Def{name: "erase", args: []arg{{"i", argInt, 0, 1}, {"j", argInt, 1, 1}, {"h", argInt, 2, 1}, {"w", argInt, 3, 1}, {"v", argEraseValue, 0, 1}},
	Ns: 0.067, Cost: func(st *Step, ns, _ float64) float64 { return ns * float64(st.I[2]) * float64(st.I[3]) },
	kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) {
		if st.Random {
			mean, std := [3]float64{st.F[0], st.F[1], st.F[2]}, [3]float64{st.F[3], st.F[4], st.F[5]}
			if !(std[0] > 0 && std[1] > 0 && std[2] > 0) { // a parsed trace's: no Normalize given
				mean, std = ImagenetMean, ImagenetStd
			}
			kernels.EraseRandom(p, st.I[0], st.I[1], st.I[2], st.I[3], st.Seed, mean, std, ks)
		} else {
			kernels.Erase(p, st.I[0], st.I[1], st.I[2], st.I[3], st.Fill)
		}
	},
	check: func(st *Step, w, h int) error {
		i, j, eh, ew := st.I[0], st.I[1], st.I[2], st.I[3]
		if i < 0 || j < 0 || eh < 0 || ew < 0 || i+eh > h || j+ew > w {
			return StepError(st, "box (i=%d, j=%d, h=%d, w=%d) is outside the %dx%d image", i, j, eh, ew, w, h)
		}
		if st.Random {
			return nil
		}
		return checkStepFill(st)
	},
	Role: TargetsPixels})

// ImageNet's per-channel mean and std, in [0, 1] units.
var (
	ImagenetMean = [3]float64{0.485, 0.456, 0.406}
	ImagenetStd  = [3]float64{0.229, 0.224, 0.225}
)
