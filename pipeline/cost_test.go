package pipeline

import (
	"strings"
	"testing"
)

// tvPolicies are torchvision's policies at their defaults (and the
// reference recipes' settings), after a 224 px RandomResizedCrop.
func tvPolicies() map[string]Op {
	return map[string]Op{
		"AugMix":             {Kind: OpAugMix, Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1},
		"TrivialAugmentWide": {Kind: OpTrivialAugmentWide, Bins: 31, Interp: InterpNearest},
		"RandAugment":        {Kind: OpRandAugment, NumOps: 2, Magnitude: 9, Bins: 31, Interp: InterpNearest},
		"AutoAugment":        {Kind: OpAutoAugment, Policy: "imagenet", Interp: InterpNearest},
	}
}

// TestCostPresetsUnderLimit: every preset and torchvision's policies at
// their defaults are predicted far under the default limit (at least 20
// times), so the limit refuses only what no recipe asks; detr, whose
// zoomed canvas (up to 4x4 a 640x640 source) is resized in Go
// (resizeCanvas), under it.
func TestCostPresetsUnderLimit(t *testing.T) {
	check := func(name string, tr *Transform) {
		c := tr.Cost()
		t.Logf("%-22s mean %-10v max %-10v %s", name, c.Mean, c.Max, c.Dominant)
		if c.Mean <= 0 || c.Mean > c.Max {
			t.Errorf("%s: mean %v, max %v: want 0 < mean <= max", name, c.Mean, c.Max)
		}
		if name == "detr" && c.Max < DefaultMaxSampleCPU {
			return
		}
		if c.Max*20 > DefaultMaxSampleCPU {
			t.Errorf("%s: worst sample %v, within 20 times of the limit %v", name, c.Max, DefaultMaxSampleCPU)
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

// TestCostBomb: the bomb, a 4096 px crop and 32 blurs of kernel
// 1023, is predicted at over 40 times the limit a sample, the blur named as what dominates;
// AugMix at its largest settings is predicted at more than torchvision's
// defaults by about its steps' ratio.
func TestCostBomb(t *testing.T) {
	ops := []Op{{Kind: OpRandomResizedCrop, Size: [2]int{4096, 4096}}}
	for range 32 {
		ops = append(ops, Op{Kind: OpGaussianBlur, KernelSize: [2]int{1023, 1023}, Sigma: [2]float64{1000, 1000}})
	}
	c := mustTransform(t, CHW, ops...).Cost()
	t.Logf("bomb: %v", c)
	if c.Max < 40*DefaultMaxSampleCPU || c.Mean < 40*DefaultMaxSampleCPU {
		t.Errorf("bomb predicted at %v (mean %v), want over 40 times the limit %v", c.Max, c.Mean, DefaultMaxSampleCPU)
	}
	if !strings.Contains(c.Dominant, "(GaussianBlur)") || c.DominantMax*33 < c.Max {
		t.Errorf("dominant %q (%v of %v), want a GaussianBlur, 1/32 of the whole", c.Dominant, c.DominantMax, c.Max)
	}
	rrc := Op{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}}
	big := mustTransform(t, CHW, rrc, Op{Kind: OpAugMix, Severity: 10, MixtureWidth: 16, ChainDepth: 14, Alpha: 1}).Cost()
	small := mustTransform(t, CHW, rrc, tvPolicies()["AugMix"]).Cost()
	t.Logf("AugMix 10/16/14: %v; at torchvision's defaults: %v", big, small)
	if big.Max < 10*small.Max || !strings.Contains(big.Dominant, "AugMix") {
		t.Errorf("AugMix 10/16/14 %v vs defaults %v: want 10 times more at worst, AugMix dominant", big, small)
	}
}

// TestCostScales: a blur costs in proportion to its taps and its pixels;
// an op under RandomApply(p) costs p of it on average and all of it at
// worst; a RandomChoice costs its most expensive choice at worst.
func TestCostScales(t *testing.T) {
	rrc := func(s int) Op { return Op{Kind: OpRandomResizedCrop, Size: [2]int{s, s}} }
	blur := func(k int) Op { return Op{Kind: OpGaussianBlur, KernelSize: [2]int{k, k}, Sigma: [2]float64{1, 1}} }
	base := mustTransform(t, CHW, rrc(224)).Cost()
	b9 := mustTransform(t, CHW, rrc(224), blur(9)).Cost()
	b99 := mustTransform(t, CHW, rrc(224), blur(99)).Cost()
	d9, d99 := b9.Max-base.Max, b99.Max-base.Max
	if r := float64(d99) / float64(d9); r < 10.5 || r > 11.5 {
		t.Errorf("blur 99 over blur 9: %.2f times, want 11 (the taps' ratio)", r)
	}
	half := mustTransform(t, CHW, rrc(224), Op{Kind: OpRandomApply, P: 0.5, Ops: []Op{blur(99)}}).Cost()
	if half.Max != b99.Max {
		t.Errorf("RandomApply(0.5) of a blur: worst %v, want the blur's %v", half.Max, b99.Max)
	}
	if m := float64(half.Mean-base.Mean) / float64(d99); m < 0.3 || m > 0.7 {
		t.Errorf("RandomApply(0.5) of a blur: mean %.2f of the blur's, want about 0.5", m)
	}
	choice := mustTransform(t, CHW, rrc(224), Op{Kind: OpRandomChoice, Ops: []Op{blur(9), blur(99)}}).Cost()
	if choice.Max != b99.Max {
		t.Errorf("RandomChoice of two blurs: worst %v, want the larger's %v", choice.Max, b99.Max)
	}
	big := mustTransform(t, CHW, rrc(448), blur(99)).Cost()
	if r := float64(big.Max-mustTransform(t, CHW, rrc(448)).Cost().Max) / float64(d99); r < 3.9 || r > 4.1 {
		t.Errorf("blur at 448 px over 224: %.2f times, want 4", r)
	}
}
