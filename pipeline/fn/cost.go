package fn

// The cost model's part that is the functional ops': a resampling
// step's cost by its interpolation.

import (
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// InterpNs scales a resampling step's ns by its interpolation (bench
// cost's "Rotate nearest" and "Affine bicubic" over the bilinear
// ones).
var InterpNs = [...]float64{kernels.Bilinear: 1, kernels.Nearest: 0.41, kernels.Bicubic: 2.0}

// InterpCost is InterpNs[i], 1 for an unknown one.
func InterpCost(i kernels.Interpolation) float64 {
	if int(i) < len(InterpNs) && InterpNs[i] > 0 {
		return InterpNs[i]
	}
	return 1
}

// StepNs is what st costs on a w x h image: its definition's ns a pixel,
// or its Cost.
func StepNs(st Step, w, h int) float64 {
	d := st.Fn.Def()
	px := float64(w) * float64(h)
	if d.Cost != nil {
		return d.Cost(&st, d.Ns, px)
	}
	return d.Ns * px
}
