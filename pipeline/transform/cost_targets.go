package transform

// What a job's targets add to the cost model's price of a sample (cost.go):
// a YOLO segment set's polygons and overlap mask, torchvision's instance
// masks.

import (
	"github.com/stoker-dev/stoker/pipeline/dataset"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TargetCost is what a job's targets add to its samples' CPU beyond the
// pixels' (CostWith): a YOLO segment dataset's polygons carried through
// the YOLO ops (each instance's resampled to 1000 points, moved, warped
// and clipped), and ultralytics' overlap mask made of them (each
// instance filled over its extent and downsampled, at its mask_ratio);
// or torchvision's instance masks (targets "masks"), each instance's
// rasterized at the source's size and sampled through the geometry's
// maps into runs.
type TargetCost struct {
	Segments  bool // the labels are polygons, moved by a YOLO geometry
	Mask      bool // the job asks for "overlap_mask"
	MaskRatio int  // its mask_ratio (0: 4)
	Masks     bool // the job asks for "masks": an instance mask each (tv_tensors.Mask)
}

// The targets' terms (bench cost --annotations on a polygon set of 640 px
// photos, mkdata --coco --yolo --instances 7, 2026-11-25): an instance's
// polygon through a pre_transform (its resampling, the Mosaic's moves,
// the warp and segment2box), and the overlap mask an output pixel at
// ratio 4 (fill and downsample of about ten instances: 0.86 ms a 640 x
// 640 sample), 2.4 times that at ratio 1 (2.0 ms: the part that scales
// with the mask's pixels a ratio's square less). Fitted on that set's
// yolo and yolo-letterbox presets (BENCHMARKS.md, the cost model).
var (
	segInstanceNs     = 32_000.0 // through a Mosaic's pre_transform
	segLoadInstanceNs = 50_000.0 // through the single-image YOLO geometry's steps
	maskPxNs          = 2.1
	// nominalInstances is an image's instances: COCO's 7.3 (mkdata's
	// --instances 7); a job's own are unknown when it opens.
	nominalInstances = 7.3
)

// The instance masks' terms, fitted on one thread from bench cost's mask
// rows (--annotations of mkdata --coco --instances 7's photos: 0.16 MP,
// 7.0 instances an image, COCO's density; 2026-11-26; BENCHMARKS.md, the
// cost model): each instance's source mask (its polygons or runs
// rasterized, then made row-major) maskSrcNs a source pixel, and its
// runs through the axis maps maskRunNs an output pixel (rows without the
// instance skipped, an upsampled row reused: 0.08 ns at COCO's instance
// sizes), from the RandomResizedCrop, detr, lsj and segref rows; after a
// rotation, an affine or a perspective, the canvas index maskIndexNs a
// canvas pixel (once a step) and each instance's runs through it
// maskTurnRunNs an output pixel (no row skipped or reused there), split
// by a 480 px rotation's rows on 7.0 and 2.2 instances an image; the fill
// block's pass where a Mask fill other than 0 may lie maskFillTurnNs an
// output pixel through an index (the rotation with a fill of 255 against
// 0), maskFillNs through the maps (BenchmarkFillRuns' pad: 13 us a MP).
var (
	maskSrcNs      = 0.32
	maskRunNs      = 0.08
	maskIndexNs    = 15.0
	maskTurnRunNs  = 2.2
	maskFillNs     = 0.02
	maskFillTurnNs = 1.0
)

// TargetCostOf is what the targets of a job with field set fs on ds add
// to t's samples (the zero TargetCost: nothing beyond Cost).
func TargetCostOf(t *Transform, ds dataset.Dataset, fs *dataset.FieldSet) TargetCost {
	var tc TargetCost
	if fs == nil || fs.TargetsAt() < 0 {
		return tc
	}
	tc.Masks = fs.Masks()
	if d, ok := ds.(*dataset.YOLODataset); ok && d.HasSegments() && (t.yolo != nil || t.mosaic != nil) {
		tc.Segments, tc.Mask = true, fs.OverlapMask()
		if tc.Mask {
			tc.MaskRatio = fs.MaskRatio()
		}
	}
	return tc
}

// CostWith is Cost with what tc's targets add: each pre_transform's
// images' instances (nominalInstances an image) through segInstanceNs
// (segLoadInstanceNs without a Mosaic),
// in the mean (the MixUp's and CutMix's partners by their p, a CopyPaste
// in mixup mode's partner by its p in each) and at worst (every one
// drawn); the overlap mask maskPxNs an output pixel; the instance masks
// as instanceMasksNs prices them.
func (t *Transform) CostWith(tc TargetCost) Cost {
	c := t.Cost()
	if t.views != nil || !tc.Segments && !tc.Masks {
		return c
	}
	var mean, most float64
	what := "the targets: the instance masks (rasterized, sampled into runs)"
	if tc.Segments {
		what = "the targets: the polygons carried through the YOLO ops (and the overlap mask)"
		images, worst, per := 1.0, 1.0, segLoadInstanceNs
		if t.mosaic != nil {
			per = segInstanceNs
			n := float64(t.mosaic.Tiles)
			pre, preWorst := 1.0, 1.0
			for _, op := range []*optab.Op{t.mixup, t.cutmix} {
				if op != nil {
					pre, preWorst = pre+op.P, preWorst+1
				}
			}
			if cp := t.copyPasteMix; cp != nil {
				pre, preWorst = pre*(1+cp.P), preWorst*2
			}
			images, worst = n*pre, n*preWorst
		}
		mean, most = float64(images*nominalInstances*per), float64(worst*nominalInstances*per)
		if tc.Mask {
			r := float64(max(tc.MaskRatio, 1))
			px := float64(t.outW * t.outH)
			m := float64(maskPxNs * px * (0.9 + 1.5/(r*r))) // ratio 4: maskPxNs; 1: 2.4 of it
			mean, most = mean+m, most+m
		}
	}
	if tc.Masks {
		m, x := t.instanceMasksNs()
		mean, most = mean+m, most+x
	}
	c.Mean += nsDuration(mean)
	c.Max += nsDuration(most)
	if d := nsDuration(most); d > c.DominantMax {
		c.Dominant, c.DominantMax = what, d
	}
	return c
}

// instanceMasksNs is what the instance masks add to a sample, mean and
// worst: nominalInstances instances, each its source mask at the nominal
// source (the output's size if larger, as Cost's decode, but for a
// detection geometry) and its runs over the output; each rotation, affine
// or perspective the index of the canvas and the runs through it in
// place of the axis maps' (at its chance in the mean); a Mask fill other
// than 0 (FixedSizeCrop's pads masks with 0) the fill block's pass, at
// its op's chance. The ops in a container count as if they applied.
func (t *Transform) instanceMasksNs() (mean, worst float64) {
	px := float64(t.outW * t.outH)
	srcPx := float64(NominalSourcePx)
	if !t.detGeometry() {
		srcPx = max(srcPx, px)
	}
	var turn, turnWorst, fill, fillWorst float64
	var walk func(ops []optab.Op)
	walk = func(ops []optab.Op) {
		for i := range ops {
			op := &ops[i]
			d := optab.Lookup(op.Kind)
			if d == nil {
				continue
			}
			if d.Targets == optab.TargetsContainer {
				walk(op.Ops)
				continue
			}
			if d.Masks == nil {
				continue
			}
			p := 1.0
			if op.Kind == OpRandomPerspective || op.Kind == OpRandomZoomOut {
				p = op.P
			}
			if k := op.Kind; k == OpRandomRotation || k == OpRandomAffine || k == OpRandomPerspective {
				turn, turnWorst = turn+p, turnWorst+1
			}
			if op.Kind != OpFixedSizeCrop && maskFill(op) != 0 {
				fill, fillWorst = fill+p, fillWorst+1
			}
		}
	}
	walk(t.ops)
	at := func(turns, fills float64) float64 {
		turned := min(turns, 1) // the runs through an index, from the first turn on
		runs := maskRunNs + float64(turned*(maskTurnRunNs-maskRunNs))
		pass := maskFillNs + float64(turned*(maskFillTurnNs-maskFillNs))
		return float64(nominalInstances*(float64(maskSrcNs*srcPx)+float64(runs*px))) +
			float64(turns*maskIndexNs*px) + float64(min(fills, 1)*pass*px)
	}
	return at(turn, fill), at(turnWorst, fillWorst)
}
