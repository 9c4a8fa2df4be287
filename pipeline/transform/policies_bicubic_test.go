package transform

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/det"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestPoliciesBicubic: torchvision's four policies take bicubic, as
// torchvision's do on PIL images (ClassificationPresetTrain's
// --interpolation bicubic). The draws are the bilinear policy's, sample
// for sample (the interpolation draws nothing); every rotate and affine
// step carries bicubic, and the steps run on pixels.
func TestPoliciesBicubic(t *testing.T) {
	rrc := optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{24, 32}}
	policies := []optab.Op{
		{Kind: optab.OpTrivialAugmentWide, Bins: 31},
		{Kind: optab.OpRandAugment, NumOps: 2, Magnitude: 9, Bins: 31},
		{Kind: optab.OpAutoAugment, Policy: "imagenet"},
		{Kind: optab.OpAugMix, Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1},
	}
	for _, pol := range policies {
		t.Run(string(pol.Kind), func(t *testing.T) {
			bil, bic := pol, pol
			bil.Interp, bic.Interp = InterpBilinear, InterpBicubic
			trBil := mustTransform(t, CHW, rrc, bil)
			trBic := mustTransform(t, CHW, rrc, bic)
			pix := make([]byte, 3*24*32)
			for i := range pix {
				pix[i] = byte(i * 7)
			}
			warps := 0
			for i := range uint64(400) {
				k := det.Key{Seed: 3, Index: i}
				a, b := trBil.sampler().DrawSteps(k, nil), trBic.sampler().DrawSteps(k, nil)
				if len(a) != len(b) {
					t.Fatalf("key %d: %d steps bilinear, %d bicubic", i, len(a), len(b))
				}
				for j := range b {
					want := a[j]
					if b[j].Fn == fn.Rotate || b[j].Fn == fn.Affine {
						warps++
						if b[j].Interp != InterpBicubic {
							t.Fatalf("key %d step %d: %s with %s, want bicubic", i, j, b[j].Fn, b[j].Interp)
						}
						want.Interp = InterpBicubic
					}
					if b[j] != want {
						t.Fatalf("key %d step %d: bicubic draws %+v, bilinear %+v", i, j, b[j], a[j])
					}
				}
				var geo []fn.Step
				for _, st := range b {
					if !st.Fn.Geometry() {
						geo = append(geo, st)
					}
				}
				out := append([]byte(nil), pix...)
				if err := optab.ApplyTrace(out, 32, 24, geo); err != nil {
					t.Fatalf("key %d: %v", i, err)
				}
			}
			if warps == 0 {
				t.Fatal("400 samples drew no rotate or affine")
			}
		})
	}
	// Other values are refused.
	bad := optab.Op{Kind: optab.OpTrivialAugmentWide, Bins: 31, Interp: Interpolation(9)}
	if _, err := NewTransform(CHW, rrc, bad); err == nil {
		t.Fatal("interpolation 9 accepted")
	}
}
