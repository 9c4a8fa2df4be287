package transform

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestRandomResizedCropRandomInterp: RandomInterp (timm's
// RandomResizedCropAndInterpolation(interpolation="random")) draws bilinear
// or bicubic per sample after the crop, so the crops are the bilinear
// RandomResizedCrop's, key for key; about half of each; the trace's
// resized_crop says which; antialiased either way.
func TestRandomResizedCropRandomInterp(t *testing.T) {
	base := optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}}
	rnd := base
	rnd.Args = &RRCArgs{RandomInterp: true}
	trBase, trRand := mustTransform(t, CHW, base), mustTransform(t, CHW, rnd)
	const n = 2000
	bicubic := 0
	for i := range uint64(n) {
		k := det.Key{Seed: 9, Index: i}
		a, err := trBase.geomPlan(500, 375, k)
		if err != nil {
			t.Fatal(err)
		}
		b, err := trRand.geomPlan(500, 375, k)
		if err != nil {
			t.Fatal(err)
		}
		if [4]int{a.CX, a.CY, a.CW, a.CH} != [4]int{b.CX, b.CY, b.CW, b.CH} {
			t.Fatalf("key %d: crop %v, the bilinear op's %v", i, [4]int{b.CX, b.CY, b.CW, b.CH}, [4]int{a.CX, a.CY, a.CW, a.CH})
		}
		if !b.Antialias || (b.Interp != InterpBilinear && b.Interp != InterpBicubic) {
			t.Fatalf("key %d: %s antialias %v", i, b.Interp, b.Antialias)
		}
		if b.Interp == InterpBicubic {
			bicubic++
		}
		st := trRand.geometrySteps(&b, nil)
		if st[0].Fn != fn.ResizedCrop || st[0].Interp != b.Interp || !st[0].Antialias {
			t.Fatalf("key %d: trace step %+v for a %s plan", i, st[0], b.Interp)
		}
	}
	// Binomial(2000, 1/2): sd 22; the seeds are fixed.
	if bicubic < n/2-150 || bicubic > n/2+150 {
		t.Fatalf("%d of %d samples bicubic, want about half", bicubic, n)
	}
	// It draws only with Interp bilinear (RRCArgs: only
	// RandomResizedCrop has it).
	for _, bad := range []optab.Op{
		{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}, Args: &RRCArgs{RandomInterp: true, Resampling: optab.Resampling{Interp: InterpBicubic}}},
	} {
		if _, err := NewTransform(CHW, bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
