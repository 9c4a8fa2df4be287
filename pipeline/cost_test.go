package pipeline

import (
	"math"
	"strings"
	"testing"
	"time"
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

// TestCostDetection: a detection geometry's decode is priced at the
// nominal source whatever its output (a RandomResizedCrop's at the
// output's size when larger); the canvas path (resizeCanvas) costs its
// output pixels, more for a canvas larger than the output (the taps), and
// its canvas, r*r times the source when zoomed: E[r*r] on average times
// the zoom's p, the largest r at worst; a flip between RandomIoUCrop and
// Resize takes the path at its p; a ScaleJitter costs per output pixel.
func TestCostDetection(t *testing.T) {
	const src, out = float64(nominalSourcePx), float64(640 * 640)
	resize := Op{Kind: OpResize, Size: [2]int{640, 640}}
	iou := Op{Kind: OpRandomIoUCrop, Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.5, 2}, Options: []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1}, Trials: 40}
	zoom := func(p float64) Op { return Op{Kind: OpRandomZoomOut, P: p, SideRange: [2]float64{1, 4}} }
	ns := func(d time.Duration) float64 { return float64(d.Nanoseconds()) }
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 2+want*1e-9 { // Durations are whole ns
			t.Errorf("%s: %.0f ns, want %.0f", what, got, want)
		}
	}
	base := mustTransform(t, CHW, iou, resize).Cost()
	rrc := mustTransform(t, CHW, Op{Kind: OpRandomResizedCrop, Size: [2]int{640, 640}}).Cost()
	near("RandomResizedCrop(640) over IoUCrop + Resize(640): the decode of the output's size over the nominal's",
		ns(rrc.Mean-base.Mean), decodeNs*(out-src))
	near("IoUCrop + Resize(640)", ns(base.Mean), sampleNs+decodeNs*src+resampleNs*out)
	// The canvas of the source alone (r = 1), upsampled to the output.
	flat := canvasOutNs*out + canvasTapNs*out + canvasNs*src
	z1 := mustTransform(t, CHW, zoom(1), iou, resize).Cost()
	if m := ns(z1.Mean - base.Mean); m < flat+canvasNs*src*6 || m > flat+canvasNs*src*6+canvasTapNs*out*2 {
		t.Errorf("ZoomOut(p=1): mean %.0f ns more, want the canvas path at 7 times the source on average (E[r*r]) and taps for r > 1.6", m)
	}
	// r = 4: the canvas 16 times the source, 2.5 times the output a side.
	near("ZoomOut(p=1): worst", ns(z1.Max-base.Max), canvasOutNs*out+canvasTapNs*out*4*math.Sqrt(src/out)+canvasNs*src*16)
	zh := mustTransform(t, CHW, zoom(0.5), iou, resize).Cost()
	if m := ns(zh.Mean-base.Mean) / ns(z1.Mean-base.Mean); m < 0.49 || m > 0.51 {
		t.Errorf("ZoomOut(p=0.5): %.3f of ZoomOut(p=1)'s mean canvas, want 0.5", m)
	}
	flip := mustTransform(t, CHW, iou, Op{Kind: OpRandomHorizontalFlip, P: 0.5}, resize).Cost()
	near("a flip between IoUCrop and Resize: worst", ns(flip.Max-base.Max), flat)
	if m := (ns(flip.Mean) - ns(base.Mean)) / flat; m < 0.45 || m > 0.6 {
		t.Errorf("a flip (p=0.5) between IoUCrop and Resize: mean %.2f of the canvas path, want about 0.5 (and its flip)", m)
	}
	lsj := mustTransform(t, CHW, Op{Kind: OpScaleJitter, Size: [2]int{1024, 1024}, Scale: [2]float64{0.1, 2}},
		Op{Kind: OpFixedSizeCrop, Size: [2]int{1024, 1024}}).Cost()
	near("ScaleJitter + FixedSizeCrop(1024)", ns(lsj.Mean), sampleNs+decodeNs*src+jitterOutNs*1024*1024)
}
