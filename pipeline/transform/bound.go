package transform

// The bound on per-sample sizes of a geometry that keeps the image's own
// size or a part of it: the detection references' recipes that do not
// resize (hflip: no geometry op; ssdlite and ssd: a RandomIoUCrop, after a
// RandomZoomOut for ssd, with no Resize after it). Nothing in their ops
// bounds a sample, so the job gives the bound (TransformSpec.max_size), or
// the dataset does where it lists its images' sizes (NewTransformData);
// each sample is then made at its own size into a slot of the bound, as
// RandomShortestSize's are (lsj.go), and one past the bound fails.

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/internal/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// NewTransformBound is NewTransform with a bound on a sample's size,
// (height, width), for the recipes whose geometry keeps the image's own
// size or a part of it (no geometry op; a RandomIoUCrop, after a
// RandomZoomOut if any, without a Resize): each sample is its own size,
// at most the bound, and a sample past it fails. A zero bound is none;
// a transform whose size is fixed, or bounded by its ops, ignores it.
func NewTransformBound(layout Layout, bound [2]int, ops ...optab.Op) (*Transform, error) {
	return newTransform(layout, bound, "", ops...)
}

// NewTransformData is NewTransform for a dataset whose images are at most
// w x h (COCO's annotations list every image's size): the bound on a
// sample's size, where the geometry needs one, is that size times what
// the ops grow it by (DataBound). A sample past it (a file larger than
// its annotation says) fails, naming the bound's source.
func NewTransformData(layout Layout, w, h int, ops ...optab.Op) (*Transform, error) {
	if w < 1 || h < 1 {
		return NewTransform(layout, ops...)
	}
	b := DataBound(ops, w, h)
	return newTransform(layout, b, fmt.Sprintf("the dataset's largest image, %dx%d in its annotations, times the ops' growth", w, h), ops...)
}

// checkBoundArg checks a bound given: none, or 1..MaxSide a side.
func checkBoundArg(bound [2]int) error {
	if bound != [2]int{} && (bound[0] < 1 || bound[1] < 1 || bound[0] > optab.MaxSide || bound[1] > optab.MaxSide) {
		return fmt.Errorf("%w: transform: max_size %dx%d (height x width): want 1..%d a side", errs.Unsupported, bound[0], bound[1], optab.MaxSide)
	}
	return nil
}

// boundSize sets the output of a geometry that keeps the image's own size
// (own: no geometry op) or a part of it (what, a RandomIoUCrop without a
// Resize): each sample is its own size, at most the job's bound
// (t.bound, NewTransformBound), past which a sample fails (checkBound).
// Without a bound it is refused: nothing else bounds the source images.
func (t *Transform) boundSize(what string) error {
	if t.bound == [2]int{} {
		return fmt.Errorf("%w: transform: %s keeps each image's own size (or a crop of it), which no op bounds: "+
			"follow it with Resize((h, w)), or give the job a bound on the sizes, max_size=(h, w) (the batch's memory is counted at it)", errs.Unsupported, what)
	}
	t.geom, t.vary, t.varyGeom, t.outH, t.outW = CropResize, true, true, t.bound[0], t.bound[1]
	return nil
}

// DataBound is the bound on a sample's size, (height, width), that ops
// give the images of a dataset at most w x h: their size, times a
// RandomZoomOut's side_range maximum where the geometry starts with one
// (after RandomPhotometricDistorts), its canvas int(side * r) with r
// drawn in float32 (a pixel's slack), at most MaxSide a side (a sample
// past it fails by itself).
func DataBound(ops []optab.Op, w, h int) [2]int {
	if n := leadingPre(ops); n < len(ops) && ops[n].Kind == OpRandomZoomOut {
		if s := ops[n].SideRange[1]; s >= 1 && s <= maxZoom {
			w, h = int(math.Ceil(float64(w)*s))+1, int(math.Ceil(float64(h)*s))+1
		}
	}
	return [2]int{min(h, optab.MaxSide), min(w, optab.MaxSide)}
}

// checkBound fails a sample whose own size (a transform under the job's
// bound) is past the bound.
func (t *Transform) checkBound(p *SamplePlan) error {
	if t.bound == [2]int{} || !t.varyGeom || (!t.own && (t.iou == nil || t.resize != nil)) {
		return nil
	}
	if p.OutW > t.outW || p.OutH > t.outH {
		from := fmt.Sprintf("max_size=(%d, %d): height, width", t.outH, t.outW)
		if t.boundFrom != "" {
			from = t.boundFrom + "; give the job a max_size=(h, w) past it"
		}
		return fmt.Errorf("%w: the %dx%d image (width x height) makes a %dx%d sample, past the job's bound of %dx%d (%s)",
			errs.TooLarge, p.SrcW, p.SrcH, p.OutW, p.OutH, t.outW, t.outH, from)
	}
	return nil
}
