package transform

// What a job's targets add to the cost model's price of a sample (cost.go):
// a YOLO segment set's polygons and overlap mask, torchvision's instance
// masks.

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
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
	// MaskStats is what the dataset's annotations say of its masks'
	// work (instances and their extents), where they say it (COCO's):
	// the masks are priced by it rather than by a nominal image.
	MaskStats dataset.MaskStats
}

// The targets' terms (bench cost --annotations on a polygon set of 640 px
// photos, mkdata --coco --yolo --instances 7, 2026-11-25): an instance's
// polygon through a pre_transform (its resampling, the tiles' moves,
// the warp and segment2box), and the overlap mask an output pixel at
// ratio 4 (fill and downsample of about ten instances: 0.86 ms a 640 x
// 640 sample), 2.4 times that at ratio 1 (2.0 ms: the part that scales
// with the mask's pixels a ratio's square less). Fitted on that set's
// yolo and yolo-letterbox presets (BENCHMARKS.md, the cost model).
var (
	segInstanceNs     = 32_000.0 // through a multi-image pre_transform
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
	if ms, ok := ds.(dataset.MaskStatser); ok && tc.Masks {
		tc.MaskStats = ms.MaskStats()
	}
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
// (segLoadInstanceNs without a multi-image op),
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
			n := float64(t.mosaicArgs.N)
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
		m, x := t.instanceMasksNs(tc.MaskStats)
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
// worst. Each instance's work is its extent (AppendMasks): its source
// mask over its extent's pixels (maskSrcNs a pixel), its runs over the
// output pixels it can reach (the output's pixels times its extent's
// share of its image: maskRunNs, or maskTurnRunNs through a canvas
// index), and the canvas' rows and columns (maskLineNs each). Where the
// dataset's annotations say its images' instances and extents (ms: the
// mean and the most of each, the most of each term taken apart, an
// upper bound), those; else nominalInstances instances, each the whole
// nominal source (the output's size if larger, as Cost's decode, but for
// a detection geometry). Each rotation, affine or perspective adds the
// index of the canvas and the runs through it in place of the axis maps'
// (at its chance in the mean); a Mask fill other than 0 (FixedSizeCrop's
// pads masks with 0) the fill block's pass, at its op's chance. The ops
// in a container count as if they applied.
func (t *Transform) instanceMasksNs(ms dataset.MaskStats) (mean, worst float64) {
	px := float64(t.outW * t.outH)
	lines := float64(t.outW + t.outH)
	srcPx := float64(NominalSourcePx)
	if !t.detGeometry() {
		srcPx = max(srcPx, px)
	}
	// An image's instances, their extents summed and their cover, mean
	// and at worst.
	inst, ext, cover := nominalInstances, nominalInstances*srcPx, nominalInstances
	instW, extW, coverW := inst, ext, cover
	if ms.Known {
		inst, ext, cover = ms.MeanInstances, ms.MeanExtent, ms.MeanCover
		instW, extW, coverW = ms.MaxInstances, ms.MaxExtent, ms.MaxCover
	}
	turn, turnWorst, fill, fillWorst := t.maskSteps()
	at := func(turns, fills, inst, ext, cover float64) float64 {
		turned := min(turns, 1) // the runs through an index, from the first turn on
		runs := maskRunNs + float64(turned*(maskTurnRunNs-maskRunNs))
		pass := maskFillNs + float64(turned*(maskFillTurnNs-maskFillNs))
		return float64(maskSrcNs*ext) + float64(runs*cover*px) + float64(maskLineNs*inst*lines) +
			float64(turns*maskIndexNs*px) + float64(min(fills, 1)*pass*px)
	}
	return at(turn, fill, inst, ext, cover), at(turnWorst, fillWorst, instW, extW, coverW)
}

// maskLineNs is each instance's cost a row and a column of the output
// canvas (its maps' rows and columns walked for it): not fitted apart, a
// run's output pixel's (maskRunNs) taken for it; with nominalInstances
// instances it is under 1% of a sample.
var maskLineNs = maskRunNs

// maskSteps counts the rotations, affines and perspectives the instance
// masks go through (turn: at their chance; turnWorst: all of them) and
// the ops that may fill them with other than 0 (fill, fillWorst).
func (t *Transform) maskSteps() (turn, turnWorst, fill, fillWorst float64) {
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
	return turn, turnWorst, fill, fillWorst
}

// CheckMaskWork refuses, before anything is read, a job whose instance
// masks' work the dataset's annotations (tc.MaskStats) put past the bound
// a sample's masks are held to (targets.MaxInstancePixels: its
// instances' extents, the output pixels each can reach, the canvas' rows
// and columns, summed), naming the image whose instances' extents are
// the largest: every one of its samples would fail there. The most of
// each term is taken apart (an upper bound of the worst image's). Nil
// when the job asks for no masks or the annotations do not say.
func (t *Transform) CheckMaskWork(tc TargetCost) error {
	ms := tc.MaskStats
	if !tc.Masks || !ms.Known || t.views != nil {
		return nil
	}
	px := float64(t.outW * t.outH)
	// Each product rounded before the sum (float64(x*y)): the same bits on
	// every machine, no fused multiply-add (internal/fmacheck).
	work := ms.MaxExtent + float64(ms.MaxCover*px) + float64(ms.MaxInstances*float64(t.outW+t.outH))
	if work <= targets.MaxInstancePixels {
		return nil
	}
	return fmt.Errorf("%w: the instance masks' work would reach %.3g pixels a sample (image %q: %d instances whose boxes cover %.3g pixels, %.0f times its own; on a %dx%d output), over the bound of %d a sample's masks are held to: "+
		"ask for no masks of this dataset, or a smaller output", errs.TooLarge, work, ms.Worst, ms.WorstInstances, ms.MaxExtent, ms.MaxCover, t.outW, t.outH, targets.MaxInstancePixels)
}
