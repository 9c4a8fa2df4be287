package transform

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestCostScales: a blur costs in proportion to its taps and its pixels;
// an op under RandomApply(p) costs p of it on average and all of it at
// worst; a RandomChoice costs its most expensive choice at worst.
func TestCostScales(t *testing.T) {
	rrc := func(s int) optab.Op { return optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{s, s}} }
	blur := func(k int) optab.Op {
		return optab.Op{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{k, k}, Sigma: [2]float64{1, 1}}}
	}
	base := mustTransform(t, CHW, rrc(224)).Cost()
	b9 := mustTransform(t, CHW, rrc(224), blur(9)).Cost()
	b99 := mustTransform(t, CHW, rrc(224), blur(99)).Cost()
	d9, d99 := b9.Max-base.Max, b99.Max-base.Max
	if r := float64(d99) / float64(d9); r < 10.5 || r > 11.5 {
		t.Errorf("blur 99 over blur 9: %.2f times, want 11 (the taps' ratio)", r)
	}
	half := mustTransform(t, CHW, rrc(224), optab.Op{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{blur(99)}}).Cost()
	if half.Max != b99.Max {
		t.Errorf("RandomApply(0.5) of a blur: worst %v, want the blur's %v", half.Max, b99.Max)
	}
	if m := float64(half.Mean-base.Mean) / float64(d99); m < 0.3 || m > 0.7 {
		t.Errorf("RandomApply(0.5) of a blur: mean %.2f of the blur's, want about 0.5", m)
	}
	choice := mustTransform(t, CHW, rrc(224), optab.Op{Kind: optab.OpRandomChoice, Ops: []optab.Op{blur(9), blur(99)}}).Cost()
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
	const src, out = float64(NominalSourcePx), float64(640 * 640)
	resize := optab.Op{Kind: OpResize, Size: [2]int{640, 640}}
	iou := optab.Op{Kind: OpRandomIoUCrop, Args: &IoUCropArgs{Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.5, 2}, Options: []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1}, Trials: 40}}
	zoom := func(p float64) optab.Op {
		return optab.Op{Kind: OpRandomZoomOut, P: p, Args: &ZoomOutArgs{SideRange: [2]float64{1, 4}}}
	}
	ns := func(d time.Duration) float64 { return float64(d.Nanoseconds()) }
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 2+want*1e-9 { // Durations are whole ns
			t.Errorf("%s: %.0f ns, want %.0f", what, got, want)
		}
	}
	base := mustTransform(t, CHW, iou, resize).Cost()
	rrc := mustTransform(t, CHW, optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{640, 640}}).Cost()
	near("RandomResizedCrop(640) over IoUCrop + Resize(640): the decode of the output's size over the nominal's",
		ns(rrc.Mean-base.Mean), DecodeNs*(out-src))
	near("IoUCrop + Resize(640)", ns(base.Mean), SampleNs+DecodeNs*src+ResampleNs*out)
	// The canvas of the source alone (r = 1), upsampled to the output.
	flat := CanvasOutNs*out + CanvasTapNs*out + CanvasNs*src
	z1 := mustTransform(t, CHW, zoom(1), iou, resize).Cost()
	if m := ns(z1.Mean - base.Mean); m < flat+CanvasNs*src*6 || m > flat+CanvasNs*src*6+CanvasTapNs*out*2 {
		t.Errorf("ZoomOut(p=1): mean %.0f ns more, want the canvas path at 7 times the source on average (E[r*r]) and taps for r > 1.6", m)
	}
	// r = 4: the canvas 16 times the source, 2.5 times the output a side.
	near("ZoomOut(p=1): worst", ns(z1.Max-base.Max), CanvasOutNs*out+CanvasTapNs*out*4*math.Sqrt(src/out)+CanvasNs*src*16)
	zh := mustTransform(t, CHW, zoom(0.5), iou, resize).Cost()
	if m := ns(zh.Mean-base.Mean) / ns(z1.Mean-base.Mean); m < 0.49 || m > 0.51 {
		t.Errorf("ZoomOut(p=0.5): %.3f of ZoomOut(p=1)'s mean canvas, want 0.5", m)
	}
	flip := mustTransform(t, CHW, iou, optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5}, resize).Cost()
	near("a flip between IoUCrop and Resize: worst", ns(flip.Max-base.Max), flat)
	if m := (ns(flip.Mean) - ns(base.Mean)) / flat; m < 0.45 || m > 0.6 {
		t.Errorf("a flip (p=0.5) between IoUCrop and Resize: mean %.2f of the canvas path, want about 0.5 (and its flip)", m)
	}
	lsj := mustTransform(t, CHW, optab.Op{Kind: OpScaleJitter, Size: [2]int{1024, 1024}, Args: &ScaleJitterArgs{Scale: [2]float64{0.1, 2}}},
		optab.Op{Kind: OpFixedSizeCrop, Size: [2]int{1024, 1024}}).Cost()
	near("ScaleJitter + FixedSizeCrop(1024)", ns(lsj.Mean), SampleNs+DecodeNs*src+JitterOutNs*1024*1024)
}

// TestCostWithTargets: a YOLO segment dataset's targets add to the
// yolo preset's predicted cost (CostWith): the polygons, then the overlap
// mask, more at ratio 1 than at 4, and a MixUp's partners' polygons by
// its p; nothing for a transform of views or without them.
func TestCostWithTargets(t *testing.T) {
	tr, err := ParseTransform("yolo", CHW)
	if err != nil {
		t.Fatal(err)
	}
	base := tr.Cost()
	if got := tr.CostWith(TargetCost{}); got != base {
		t.Errorf("no targets: %v, want Cost's %v", got, base)
	}
	seg := tr.CostWith(TargetCost{Segments: true})
	m4 := tr.CostWith(TargetCost{Segments: true, Mask: true, MaskRatio: 4})
	m1 := tr.CostWith(TargetCost{Segments: true, Mask: true, MaskRatio: 1})
	if !(base.Mean < seg.Mean && seg.Mean < m4.Mean && m4.Mean < m1.Mean) || !(base.Max < seg.Max && seg.Max < m4.Max && m4.Max < m1.Max) {
		t.Errorf("mean %v, %v, %v, %v; worst %v, %v, %v, %v: want each more than the last", base.Mean, seg.Mean, m4.Mean, m1.Mean, base.Max, seg.Max, m4.Max, m1.Max)
	}
	mo := optab.Op{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 640, N: 4}}
	persp := optab.Op{Kind: OpYOLORandomPerspective, Args: &YOLOPerspectiveArgs{Scale: 0.5, Translate: 0.1, Size: [2]int{640, 640}}}
	plain, _ := NewTransform(CHW, mo, persp)
	mixed, _ := NewTransform(CHW, mo, persp, optab.Op{Kind: OpMixUp, P: 0.5})
	d := func(x *Transform) time.Duration { return x.CostWith(TargetCost{Segments: true}).Mean - x.Cost().Mean }
	if d(mixed) <= d(plain) {
		t.Errorf("a MixUp's partners' polygons: %v, without it %v", d(mixed), d(plain))
	}
}

// TestCostRotateFirst: a RandomRotation with expand=True first runs on
// the image whole, so the cost model prices it (and the Resize after
// it) at the nominal source, not at the 32 px output: more than the same
// rotation after a Resize to 32 px.
func TestCostRotateFirst(t *testing.T) {
	rot := optab.Op{Kind: OpRandomRotation, Args: &RotationArgs{Degrees: [2]float64{-30, 30}, Expand: true, Resampling: optab.Resampling{Interp: InterpBilinear}}}
	fix := optab.Op{Kind: OpResize, Size: [2]int{32, 32}, Args: &ResizeArgs{Resampling: optab.Resampling{Interp: InterpBilinear}}}
	first := mustTransform(t, CHW, rot, fix).Cost()
	after := mustTransform(t, CHW, fix, rot, fix).Cost()
	if first.Max <= after.Max {
		t.Fatalf("the rotation first costs %v at worst, after a 32 px Resize %v: want it priced on the image whole", first.Max, after.Max)
	}
}

// TestCostWithMasks: torchvision's instance masks (TargetCost.Masks) add
// their terms to CostWith: nominalInstances source masks at the nominal
// source and their runs over the output through the axis maps; a
// rotation the canvas index and the runs through it, a perspective those
// at its p in the mean and whole at worst; a Mask fill other than 0 the
// fill block's pass, a FixedSizeCrop's fill none (it pads masks with 0);
// a YOLO segment set's terms beside them. Each instance's canvas rows and
// columns maskLineNs each.
// TestCostMasksByExtent: where the dataset's annotations say its
// images' instances and their extents (dataset.MaskStats), the masks are
// priced by them, not by nominal instances each the whole source: the
// mean by the means, the worst by the most of each; many small instances
// cost less than a few whole-canvas ones. CheckMaskWork refuses a
// dataset whose worst image's work passes targets.MaxInstancePixels,
// naming the image, and lets a COCO-like one be.
func TestCostMasksByExtent(t *testing.T) {
	lsj, err := ParseTransform("lsj", CHW)
	if err != nil {
		t.Fatal(err)
	}
	base := lsj.Cost()
	px, lines := 1024.0*1024, 2048.0
	coco := dataset.MaskStats{Known: true, MeanInstances: 7, MaxInstances: 90, MeanExtent: 40_000, MaxExtent: 400_000, MeanCover: 0.3, MaxCover: 2, Worst: "crowd.jpg", WorstInstances: 90}
	c := lsj.CostWith(TargetCost{Masks: true, MaskStats: coco})
	wantMean := maskSrcNs*coco.MeanExtent + maskRunNs*coco.MeanCover*px + maskLineNs*coco.MeanInstances*lines
	wantMax := maskSrcNs*coco.MaxExtent + maskRunNs*coco.MaxCover*px + maskLineNs*coco.MaxInstances*lines
	if got := float64((c.Mean - base.Mean).Nanoseconds()); math.Abs(got-wantMean) > 2 {
		t.Errorf("the mean: masks add %.0f ns, want %.0f", got, wantMean)
	}
	if got := float64((c.Max - base.Max).Nanoseconds()); math.Abs(got-wantMax) > 2 {
		t.Errorf("the worst: masks add %.0f ns, want %.0f", got, wantMax)
	}
	if err := lsj.CheckMaskWork(TargetCost{Masks: true, MaskStats: coco}); err != nil {
		t.Errorf("a COCO-like set: %v", err)
	}
	// Issue 66's: 1,024 instances each the whole of a 2000 x 2000 image.
	bomb := dataset.MaskStats{Known: true, MeanInstances: 1024, MaxInstances: 1024, MeanExtent: 1024 * 4e6, MaxExtent: 1024 * 4e6, MeanCover: 1024, MaxCover: 1024, Worst: "big.jpg", WorstInstances: 1024}
	tc := TargetCost{Masks: true, MaskStats: bomb}
	if c := lsj.CostWith(tc); c.Max < time.Second || !strings.Contains(c.Dominant, "instance masks") {
		t.Errorf("the masks bomb: predicted %v at worst, most of it %q; want over a second, the masks", c.Max, c.Dominant)
	}
	err = lsj.CheckMaskWork(tc)
	if !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), `"big.jpg"`) || !strings.Contains(err.Error(), "1024 instances") {
		t.Errorf("the masks bomb: %v; want TooLarge naming the image and its instances", err)
	}
	if err := lsj.CheckMaskWork(TargetCost{Masks: true}); err != nil {
		t.Errorf("no stats: %v", err)
	}
}

func TestCostWithMasks(t *testing.T) {
	masks := TargetCost{Masks: true}
	ns := func(d time.Duration) float64 { return float64(d.Nanoseconds()) }
	preset := func(name string) *Transform {
		tr, err := ParseTransform(name, CHW)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	added := func(tr *Transform) (mean, worst float64) {
		c, w := tr.CostWith(masks), tr.Cost()
		return ns(c.Mean - w.Mean), ns(c.Max - w.Max)
	}
	src := float64(NominalSourcePx)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 2+want*1e-6 { // Durations are whole ns
			t.Errorf("%s: masks add %.0f ns, want %.0f", what, got, want)
		}
	}
	detr := preset("detr")
	m, x := added(detr)
	px := 640.0 * 640
	near("detr (mean)", m, nominalInstances*(maskSrcNs*src+maskRunNs*px+maskLineNs*2*640))
	near("detr (worst)", x, m)
	if c := detr.CostWith(masks); c.Max <= detr.Cost().Max {
		t.Errorf("detr with masks: worst %v, without %v", c.Max, detr.Cost().Max)
	}

	lsj := preset("lsj") // FixedSizeCrop's fill (123) is not the masks'
	m, _ = added(lsj)
	near("lsj", m, nominalInstances*(maskSrcNs*src+maskRunNs*1024*1024+maskLineNs*2*1024))

	resize := optab.Op{Kind: OpResize, Size: [2]int{480, 480}}
	rot := optab.Op{Kind: OpRandomRotation, Args: &RotationArgs{Degrees: [2]float64{-30, 30}}}
	px, src = 480*480, max(src, 480*480)
	turned := nominalInstances*(maskSrcNs*src+maskTurnRunNs*px+maskLineNs*2*480) + maskIndexNs*px
	m, x = added(mustTransform(t, CHW, resize, rot))
	near("a rotation (mean)", m, turned)
	near("a rotation (worst)", x, turned)
	rot.Args = &RotationArgs{Degrees: [2]float64{-30, 30}, Filling: optab.Filling{FillTyped: true, FillMask: 255}}
	m, _ = added(mustTransform(t, CHW, resize, rot))
	near("a rotation filling masks with 255", m, turned+maskFillTurnNs*px)
	m, _ = added(mustTransform(t, CHW, resize, rot, rot))
	near("two rotations, one fill pass", m, turned+maskIndexNs*px+maskFillTurnNs*px)

	persp := optab.Op{Kind: OpRandomPerspective, P: 0.25, Args: &PerspectiveArgs{Distortion: 0.5}}
	m, x = added(mustTransform(t, CHW, resize, persp))
	plain := nominalInstances * (maskSrcNs*src + maskRunNs*px + maskLineNs*2*480)
	near("a perspective at p 0.25 (mean)", m, plain+0.25*(turned-plain))
	near("a perspective (worst)", x, turned)

	pad := optab.Op{Kind: OpPad, Args: &PadArgs{Padding: [4]int{8, 8, 8, 8}, Filling: optab.Filling{FillTyped: true, FillMask: 255}}}
	crop := optab.Op{Kind: OpRandomCrop, Size: [2]int{480, 480}}
	m, _ = added(mustTransform(t, CHW, pad, crop))
	near("a pad of 255", m, plain+maskFillNs*px)

	yolo := preset("yolo")
	seg, both := yolo.CostWith(TargetCost{Segments: true}), yolo.CostWith(TargetCost{Segments: true, Masks: true})
	if both.Mean <= seg.Mean {
		t.Errorf("yolo: polygons and masks %v, polygons alone %v", both.Mean, seg.Mean)
	}
}

// TestKernelScratchOf: the scratch a worker's kernels keep, by what each
// op's Def says it keeps (ops.Keeps), each kind of buffer once,
// containers' ops counted.
func TestKernelScratchOf(t *testing.T) {
	const params = 4 << 10 // the warps' parameters, the slices' rounding
	rot := optab.Op{Kind: OpRandomRotation, Args: &RotationArgs{Degrees: [2]float64{-10, 10}}}
	blur := optab.Op{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{5, 7}, Sigma: [2]float64{0.1, 2}}}
	augmix := optab.Op{Kind: optab.OpAugMix, Args: &optab.AugMixArgs{Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1}}
	for _, c := range []struct {
		ops  []optab.Op
		want KernelScratch
	}{
		{nil, KernelScratch{}},
		{[]optab.Op{{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.4}}, {Kind: optab.OpRandomErasing, P: 0.5}}, KernelScratch{}},
		{[]optab.Op{rot}, KernelScratch{PerPx: 7, Fixed: params}},
		{[]optab.Op{rot, {Kind: OpRandomAffine, Args: &AffineArgs{Degrees: [2]float64{-5, 5}}}}, KernelScratch{PerPx: 7, Fixed: params}},
		{[]optab.Op{blur}, KernelScratch{PerPx: 6, PerSide: 8, Fixed: 16*7 + 256 + params}},
		{[]optab.Op{{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{augmix}}}, KernelScratch{PerPx: 7 + 18, PerSide: 2, Fixed: params}},
		{[]optab.Op{{Kind: optab.OpRandomAdjustSharpness, P: 0.5, Args: &optab.SharpnessArgs{Factor: 2}}}, KernelScratch{PerSide: 2, Fixed: params}},
		{[]optab.Op{{Kind: optab.OpRandomErasing, P: 0.5, Args: &optab.ErasingArgs{RandomValue: true}}}, KernelScratch{Fixed: 3<<16 + params}},
	} {
		if got := kernelScratchOf(c.ops); got != c.want {
			t.Errorf("%s: %+v, want %+v", optab.OpsString(c.ops), got, c.want)
		}
	}
}
