package transform_test

import (
	"strings"
	"testing"

	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestCostBomb: the bomb, a 4096 px crop and 32 blurs of kernel
// 1023, is predicted at over 40 times the limit a sample, the blur named as what dominates;
// AugMix at its largest settings is predicted at more than torchvision's
// defaults by about its steps' ratio.
func TestCostBomb(t *testing.T) {
	ops := []optab.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{4096, 4096}}}
	for range 32 {
		ops = append(ops, optab.Op{Kind: optab.OpGaussianBlur, KernelSize: [2]int{1023, 1023}, Sigma: [2]float64{1000, 1000}})
	}
	c := mustTransform(t, transform.CHW, ops...).Cost()
	t.Logf("bomb: %v", c)
	if c.Max < 40*transform.DefaultMaxSampleCPU || c.Mean < 40*transform.DefaultMaxSampleCPU {
		t.Errorf("bomb predicted at %v (mean %v), want over 40 times the limit %v", c.Max, c.Mean, transform.DefaultMaxSampleCPU)
	}
	if !strings.Contains(c.Dominant, "(GaussianBlur)") || c.DominantMax*33 < c.Max {
		t.Errorf("dominant %q (%v of %v), want a GaussianBlur, 1/32 of the whole", c.Dominant, c.DominantMax, c.Max)
	}
	rrc := optab.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}}
	big := mustTransform(t, transform.CHW, rrc, optab.Op{Kind: optab.OpAugMix, Severity: 10, MixtureWidth: 16, ChainDepth: 14, Alpha: 1}).Cost()
	small := mustTransform(t, transform.CHW, rrc, tvPolicies()["AugMix"]).Cost()
	t.Logf("AugMix 10/16/14: %v; at torchvision's defaults: %v", big, small)
	if big.Max < 10*small.Max || !strings.Contains(big.Dominant, "AugMix") {
		t.Errorf("AugMix 10/16/14 %v vs defaults %v: want 10 times more at worst, AugMix dominant", big, small)
	}
}
