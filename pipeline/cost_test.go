package pipeline

import (
	"strings"
	"testing"
	"time"
)

// TestCostPresetsUnderLimit: every preset and torchvision's policies at
// their defaults are predicted far under the default limit (at least 20
// times), so the limit refuses only what no recipe asks; detr's worst
// sample, its canvas 4x4 the nominal photo resized in Go, too.
func TestCostPresetsUnderLimit(t *testing.T) {
	check := func(name string, tr *Transform) {
		c := tr.Cost()
		t.Logf("%-22s mean %-10v max %-10v %s", name, c.Mean, c.Max, c.Dominant)
		if c.Mean <= 0 || c.Mean > c.Max {
			t.Errorf("%s: mean %v, max %v: want 0 < mean <= max", name, c.Mean, c.Max)
		}
		margin := time.Duration(20)
		if strings.HasPrefix(name, "yolo") && !Fast() {
			margin = 3 // the pure-Go build prices the YOLO kernels as their Go (pipeline/kernels/cv): ~60 ms a 640x640 sample
			if name == "yolo" {
				margin = 2 // and its Mosaic resizes four images onto a 1280x1280 canvas: ~85 ms
			}
		}
		if c.Max*margin > DefaultMaxSampleCPU {
			t.Errorf("%s: worst sample %v, within %d times of the limit %v", name, c.Max, margin, DefaultMaxSampleCPU)
		}
	}
	for _, name := range PresetNames() {
		tr, err := ParseTransform(name, CHW)
		if err != nil {
			t.Fatal(err)
		}
		check(name, tr)
	}
	for name, op := range tvPolicies() {
		check(name, mustTransform(t, CHW, Op{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}}, Op{Kind: OpRandomHorizontalFlip, P: 0.5}, op))
	}
}
