package fn

// AugMix's functional ops (the policies are pipeline/policy, drawn as ops
// by pipeline/ops' policies.go).

import (
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// AugMix's blending: the steps between a MixChain and the next
// MixChain or MixEnd are one chain applied to the image as MixBegin
// found it. MixBlend is timm's AugMix's last step (PIL's Image.blend of
// the image MixBegin found with the mix, by its weight); MixFold is
// timm's blended AugMix's step after each chain (the image so far blended
// with the chain's result, by its weight). Each costs about a pixel's
// blend.
var (
	MixBegin = define(Def{name: "augmix_begin", args: []arg{{"weight", argFloat, 0, 1}}, Ns: 2.73,
		kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) { ks.Mix.Begin(p, st.F[0]) }})
	MixChain = define(Def{name: "augmix_chain", args: []arg{{"weight", argFloat, 0, 1}}, Ns: 2.78,
		kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) { ks.Mix.Chain(p, st.F[0]) }})
	MixEnd = define(Def{name: "augmix_end", Ns: 2.73,
		kernel: func(p kernels.Planes, _ *Step, ks *kernels.Scratch) { ks.Mix.End(p) }})
	MixBlend = define(Def{name: "augmix_blend", args: []arg{{"weight", argFloat, 0, 1}}, Ns: 2.73,
		kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) { ks.Mix.Blend(p, st.F[0]) },
		check: func(st *Step, _, _ int) error {
			if !(st.F[0] >= 0 && st.F[0] <= 1) {
				return StepError(st, "weight %v: want 0..1 (PIL's blend between the two images)", st.F[0])
			}
			return nil
		}})
	MixFold = define(Def{name: "augmix_fold", args: []arg{{"weight", argFloat, 0, 1}}, Ns: 2.73,
		kernel: func(p kernels.Planes, st *Step, ks *kernels.Scratch) { ks.Mix.Fold(p, st.F[0]) },
		check: func(st *Step, _, _ int) error {
			if !(st.F[0] >= 0 && st.F[0] <= 2) {
				return StepError(st, "weight %v: want 0..2 (PIL's blend, a little past 1 where timm's float32 weights round up)", st.F[0])
			}
			return nil
		}})
)
