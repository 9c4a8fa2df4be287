package policy

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TestDrawNoAlloc: a policy's draw appends to the caller's buffer and
// allocates nothing (a Decoder draws every sample's steps), and never
// draws more than MaxSteps, which MaxNs prices.
func TestDrawNoAlloc(t *testing.T) {
	testkit.Alloc(t)
	for _, p := range []Params{
		{Kind: TrivialAugmentWide, Bins: 31, Interp: kernels.Nearest},
		{Kind: RandAugment, NumOps: 2, Magnitude: 9, Bins: 31, Interp: kernels.Nearest},
		{Kind: AutoAugment, Policy: "imagenet", Interp: kernels.Nearest},
		{Kind: AugMix, Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1, Interp: kernels.Bilinear},
		{Kind: TimmRandAugment, Policy: "rand-m9-mstd0.5-inc1", Interp: kernels.Bicubic, RandomInterp: true},
		{Kind: TimmAutoAugment, Policy: "original", Interp: kernels.Bilinear},
		{Kind: TimmAugMix, Policy: "augmix-m3-w3", Interp: kernels.Bilinear},
	} {
		pol, err := New(&p, 224, 224)
		if err != nil {
			t.Fatalf("%s: %v", p.Kind, err)
		}
		if pol.MaxNs(224, 224) <= 0 {
			t.Errorf("%s: MaxNs %v", p.Kind, pol.MaxNs(224, 224))
		}
		buf := make([]fn.Step, 0, pol.MaxSteps())
		most, i := 0, uint64(0)
		allocs := testing.AllocsPerRun(200, func() {
			r := det.Key{Seed: 3, Index: i}.Stream(2)
			buf = pol.Draw(&r, 224, 224, buf[:0])
			most = max(most, len(buf))
			i++
		})
		if allocs != 0 {
			t.Errorf("%s: Draw allocates %.1f times a sample", p.Kind, allocs)
		}
		if most > pol.MaxSteps() {
			t.Errorf("%s: drew %d steps, over MaxSteps %d", p.Kind, most, pol.MaxSteps())
		}
	}
}
