package ops

// Normalize: torchvision.transforms.v2's, last: the output becomes
// float32, (pixel/255 - mean) / std, as the samples are packed.

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

const OpNormalize OpKind = "Normalize"

// NormalizeArgs are Normalize's arguments (Op.Args): mean and std, one a
// channel, in [0, 1] units.
type NormalizeArgs struct{ Mean, Std [3]float64 }

func init() {
	Define(Def{Kind: OpNormalize, Doc: "(pixel/255 - mean) / std as float32, last",
		Params:  []Param{{Name: "mean", Typ: PFloats}, {Name: "std", Typ: PFloats}, {Name: "inplace", Typ: PBool, Def: "False"}},
		Targets: TargetsPixels, Stays: true, Format: FormatNone,
		FromArgs: func(a *Args) Op {
			m, s := a.Floats("mean"), a.Floats("std")
			if len(m) == 1 && len(s) == 1 {
				m, s = []float64{m[0], m[0], m[0]}, []float64{s[0], s[0], s[0]}
			}
			if len(m) != 3 || len(s) != 3 {
				a.Errorf("needs 3 means and 3 stds (or one of each), got %d and %d", len(m), len(s))
				return Op{}
			}
			return Op{Args: &NormalizeArgs{Mean: [3]float64(m), Std: [3]float64(s)}}
		},
		Compile: func(_ *Compiler, _ *Node, at CompileAt) error {
			return OpError(at.Where, "Normalize must come once, last (and not inside a container)")
		}})
}

// CheckNormalize refuses a std whose outputs are not all finite float32s:
// 0, NaN, infinite, or so small (1e-300) that (1 + |mean|) / std, the
// largest output's size, is over maxNormalized. stoker.normalize and
// stoker.transforms.Normalize refuse the same.
func CheckNormalize(n *Op) error {
	op := ArgsOf[NormalizeArgs](n)
	for c := 0; c < 3; c++ {
		if !(op.Std[c] > 0) || math.IsInf(op.Std[c], 0) || math.IsNaN(op.Mean[c]) || math.IsInf(op.Mean[c], 0) ||
			!((1+math.Abs(op.Mean[c]))/op.Std[c] <= maxNormalized) {
			return fmt.Errorf("%w: transform: Normalize mean %v std %v: want finite mean and finite std > 0, with (1 + |mean|) / std at most %g (float32 outputs that stay finite)",
				errs.Unsupported, op.Mean, op.Std, maxNormalized)
		}
	}
	return nil
}

// maxNormalized bounds a normalized value's size: float32's largest
// finite value less room for the rounding of scale and bias.
const maxNormalized = 1e38
