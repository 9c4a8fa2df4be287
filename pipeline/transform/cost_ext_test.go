package transform_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
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
		ops = append(ops, optab.Op{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{1023, 1023}, Sigma: [2]float64{1000, 1000}}})
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
	big := mustTransform(t, transform.CHW, rrc, optab.Op{Kind: optab.OpAugMix, Args: &optab.AugMixArgs{Severity: 10, MixtureWidth: 16, ChainDepth: 14, Alpha: 1}}).Cost()
	small := mustTransform(t, transform.CHW, rrc, tvPolicies()["AugMix"]).Cost()
	t.Logf("AugMix 10/16/14: %v; at torchvision's defaults: %v", big, small)
	if big.Max < 10*small.Max || !strings.Contains(big.Dominant, "AugMix") {
		t.Errorf("AugMix 10/16/14 %v vs defaults %v: want 10 times more at worst, AugMix dominant", big, small)
	}
}

// TestCostPresetsUnderLimit: every preset and torchvision's policies at
// their defaults are predicted far under the default limit (at least 20
// times), so the limit refuses only what no recipe asks; detr's worst
// sample, its canvas 4x4 the nominal photo resized in Go, too.
func TestCostPresetsUnderLimit(t *testing.T) {
	check := func(name string, tr *transform.Transform) {
		c := tr.Cost()
		t.Logf("%-22s mean %-10v max %-10v %s", name, c.Mean, c.Max, c.Dominant)
		if c.Mean <= 0 || c.Mean > c.Max {
			t.Errorf("%s: mean %v, max %v: want 0 < mean <= max", name, c.Mean, c.Max)
		}
		margin := time.Duration(20)
		if strings.HasPrefix(name, "yolo") && !cv.HaveC {
			margin = 3 // the pure-Go build prices the YOLO kernels as their Go (pipeline/kernels/cv): ~60 ms a 640x640 sample
			if name == "yolo" {
				margin = 2 // and its Mosaic resizes four images onto a 1280x1280 canvas: ~85 ms
			}
		}
		if c.Max*margin > transform.DefaultMaxSampleCPU {
			t.Errorf("%s: worst sample %v, within %d times of the limit %v", name, c.Max, margin, transform.DefaultMaxSampleCPU)
		}
	}
	for _, name := range transform.PresetNames() {
		tr, err := transform.ParseTransform(name, transform.CHW)
		if err != nil {
			t.Fatal(err)
		}
		check(name, tr)
	}
	for name, op := range tvPolicies() {
		check(name, mustTransform(t, transform.CHW, optab.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}}, optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5}, op))
	}
}
