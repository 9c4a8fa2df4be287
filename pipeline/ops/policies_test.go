package ops

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TestPoliciesBicubic: torchvision's four policies take bicubic, as
// torchvision's do on PIL images (ClassificationPresetTrain's
// --interpolation bicubic). The draws are the bilinear policy's, sample
// for sample (the interpolation draws nothing); every rotate and affine
// step carries bicubic, and the steps run on pixels.
func TestPoliciesBicubic(t *testing.T) {
	const w, h = 32, 24
	policies := []Op{
		{Kind: OpTrivialAugmentWide, Args: &TrivialAugmentWideArgs{Bins: 31}},
		{Kind: OpRandAugment, Args: &RandAugmentArgs{NumOps: 2, Magnitude: 9, Bins: 31}},
		{Kind: OpAutoAugment, Args: &AutoAugmentArgs{Policy: "imagenet"}},
		{Kind: OpAugMix, Args: &AugMixArgs{Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1}},
	}
	for _, pol := range policies {
		t.Run(string(pol.Kind), func(t *testing.T) {
			resampled := func(in kernels.Interpolation) Op {
				op := pol
				op.Args = CloneArgs(pol.Args)
				op.Args.(interface{ resampling() *Resampling }).resampling().Interp = in
				return op
			}
			bil, bic := resampled(kernels.Bilinear), resampled(kernels.Bicubic)
			nBil, nBic := compileAt(t, bil, w, h), compileAt(t, bic, w, h)
			pix := make([]byte, 3*w*h)
			for i := range pix {
				pix[i] = byte(i * 7)
			}
			warps := 0
			for i := range uint64(400) {
				a, b := drawAt(&nBil, 3, i, w, h), drawAt(&nBic, 3, i, w, h)
				if len(a) != len(b) {
					t.Fatalf("key %d: %d steps bilinear, %d bicubic", i, len(a), len(b))
				}
				for j := range b {
					want := a[j]
					if b[j].Fn == fn.Rotate || b[j].Fn == fn.Affine {
						warps++
						if b[j].Interp != kernels.Bicubic {
							t.Fatalf("key %d step %d: %s with %s, want bicubic", i, j, b[j].Fn, b[j].Interp)
						}
						want.Interp = kernels.Bicubic
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
				if err := ApplyTrace(out, w, h, geo); err != nil {
					t.Fatalf("key %d: %v", i, err)
				}
			}
			if warps == 0 {
				t.Fatal("400 samples drew no rotate or affine")
			}
		})
	}
	// Other values are refused.
	refused(t, Op{Kind: OpTrivialAugmentWide, Args: &TrivialAugmentWideArgs{Bins: 31, Resampling: Resampling{Interp: kernels.Interpolation(9)}}}, w, h, "op 1 (TrivialAugmentWide)")
}

// TestPolicyOp: a policy op hands its arguments to pipeline/policy
// (policyParams) and appends what the policy draws from the op's own
// stream: the same steps as Policy.Draw on that stream. A policy's
// refusal comes back as the op's, named by its place.
func TestPolicyOp(t *testing.T) {
	for _, k := range []OpKind{OpTrivialAugmentWide, OpRandAugment, OpAutoAugment, OpAugMix, OpTimmRandAugment, OpTimmAutoAugment, OpTimmAugMix} {
		op := validOps()[k]
		n := compileOp(t, op)
		if n.pol == nil || n.MaxSteps != n.pol.MaxSteps() || n.MaxSteps < 1 {
			t.Fatalf("%s: policy %v, MaxSteps %d", k, n.pol, n.MaxSteps)
		}
		for i := range uint64(50) {
			key := det.Key{Seed: 4, Index: i}
			r := key.Stream(2)
			want := n.pol.Draw(&r, testW, testH, nil)
			if got := draw(&n, 4, i); len(got) != len(want) || len(got) > 0 && got[0] != want[0] {
				t.Fatalf("%s key %d: the op drew %+v, its policy %+v", k, i, got, want)
			}
		}
	}
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: OpRandAugment, Args: &RandAugmentArgs{NumOps: 2, Magnitude: 31, Bins: 31}}, "op 1 (RandAugment): "},
		{Op{Kind: OpRandAugment, Args: &RandAugmentArgs{NumOps: 2, Magnitude: 31, Bins: 31}}, "magnitude 31"},
		{Op{Kind: OpAutoAugment, Args: &AutoAugmentArgs{Policy: "cifar100"}}, `policy "cifar100"`},
		{Op{Kind: OpTimmRandAugment, Args: &TimmArgs{Config: "rand-m9-x3", Resampling: Resampling{Interp: kernels.Bicubic}}}, `unknown section "x"`},
		{Op{Kind: OpTrivialAugmentWide, Args: &TrivialAugmentWideArgs{Bins: 0}}, "op 1 (TrivialAugmentWide)"},
	} {
		refused(t, tc.op, testW, testH, tc.want)
	}
}
