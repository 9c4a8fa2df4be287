package transform

// The checks NewTransform runs on each op's arguments, as torchvision's
// constructors check them.

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// geometryKind reports whether k is a geometry op that newTransform's
// loop places (it has a placer): not PadIfSmaller, which op_seg.go's
// segmentation run takes.
func geometryKind(k optab.OpKind) bool {
	_, ok := placers[k]
	return ok
}

// maxIoUTrials and maxIoUOptions bound RandomIoUCrop's trials and
// sampler_options; maxIoURounds its rounds of an option and its trials,
// which torchvision repeats until one finds a crop (forever, on a sample
// whose boxes no crop can meet and no option >= 1): stoker fails such a
// sample.
const (
	maxIoUTrials  = 1000
	maxIoUOptions = 64
	maxIoURounds  = 1000
)

// iouCrop checks a RandomIoUCrop, the geometry's op n, and the ops after
// it up to the Resize(h, w) it needs: SanitizeBoundingBoxes and at most
// one RandomHorizontalFlip (t.iouMid, t.preFlip). It returns the Resize's
// index.
func (t *Transform) iouCrop(op *optab.Op, n int) (int, error) {
	bad := func(format string, a ...any) (int, error) {
		return 0, transformErr(format, a...)
	}
	if n > 0 && !(n == 1 && t.zoom != nil) {
		return bad("RandomIoUCrop must be the first op, or come right after a RandomZoomOut")
	}
	ia := optab.ArgsOf[IoUCropArgs](op)
	if s := ia.Scale; !(s[0] > 0 && s[0] <= s[1] && s[1] <= 1) {
		return bad("RandomIoUCrop min_scale %v, max_scale %v: want 0 < min_scale <= max_scale <= 1", s[0], s[1])
	}
	if r := ia.Ratio; !(r[0] > 0 && r[0] <= r[1] && r[1] <= 1e9) {
		return bad("RandomIoUCrop min_aspect_ratio %v, max_aspect_ratio %v: want 0 < min <= max", r[0], r[1])
	}
	if len(ia.Options) < 1 || len(ia.Options) > maxIoUOptions {
		return bad("RandomIoUCrop sampler_options of %d values: want 1 to %d", len(ia.Options), maxIoUOptions)
	}
	for _, v := range ia.Options {
		if !(v >= 0 && v <= 1e9) {
			return bad("RandomIoUCrop sampler_options %v: want minimal IoUs >= 0 (one >= 1 leaves the image)", ia.Options)
		}
	}
	if ia.Trials < 1 || ia.Trials > maxIoUTrials {
		return bad("RandomIoUCrop trials=%d: want 1 to %d", ia.Trials, maxIoUTrials)
	}
	if p := iouP(op); !(p > 0 && p <= 1) {
		return bad("RandomIoUCrop p=%v: want 0 < p <= 1", op.P)
	}
	j, flip := n+1, false
	for ; j < len(t.ops); j++ {
		o := &t.ops[j]
		switch {
		case o.Kind == optab.OpSanitizeBoundingBoxes:
			if err := optab.CheckSanitize(o); err != nil {
				return bad("op %d (%s): %v", j, o.Kind, err)
			}
			t.iouMid = append(t.iouMid, optab.Lookup(o.Kind).Step(o))
			continue
		case o.Kind == optab.OpRandomHorizontalFlip && !flip:
			if !(o.P >= 0 && o.P <= 1) {
				return bad("op %d (%s): p=%v: want 0 <= p <= 1", j, o.Kind, o.P)
			}
			t.preFlip, flip = o.P, true
			t.iouMid = append(t.iouMid, fn.Step{Fn: fn.HorizontalFlip})
			continue
		}
		break
	}
	resized := j < len(t.ops) && t.ops[j].Kind == OpResize && t.ops[j].Size[1] > 0
	if !resized && (t.bound == [2]int{} || j < len(t.ops) && geometryKind(t.ops[j].Kind)) {
		return bad("RandomIoUCrop needs Resize((h, w)) after it (after SanitizeBoundingBoxes and one RandomHorizontalFlip, if any): its crop's size varies per sample; " +
			"or give the job a bound on the sizes, max_size=(h, w), to keep each crop at its own size")
	}
	t.iou = op
	return j, nil
}

// checkPadding checks a padding op's padding (a RandomCrop's or Pad's;
// none for the others) and constant fill.
func checkPadding(op *optab.Op, padding [4]int) error {
	for _, v := range padding {
		if v < 0 || v > optab.MaxSide {
			return fmt.Errorf("%w: transform: %s padding %v: want 0..%d a side", errs.Unsupported, op.Kind, padding, optab.MaxSide)
		}
	}
	for _, v := range op.Fill {
		if !(v >= 0 && v <= 255) || v != math.Trunc(v) {
			return fmt.Errorf("%w: transform: %s fill %v: want integers 0..255 (uint8 pixels)", errs.Unsupported, op.Kind, op.Fill)
		}
	}
	return nil
}

// checkRRC checks a RandomResizedCrop, its zero scale and ratio set to
// torchvision's defaults (in a copy of its arguments: others may share
// them).
func checkRRC(op *optab.Op) error {
	a := optab.ArgsOf[RRCArgs](op)
	if a.Scale == [2]float64{} {
		a.Scale = [2]float64{0.08, 1}
	}
	if a.Ratio == [2]float64{} {
		a.Ratio = [2]float64{3.0 / 4, 4.0 / 3}
	}
	op.Args = &a
	// torchvision takes a lower bound of 0 (scale=(0.0, 1.0)): a draw of
	// an empty area fails the try, as one too large for the image does,
	// and the ten failed tries fall back to the center crop.
	if !(a.Scale[0] >= 0 && a.Scale[0] <= a.Scale[1] && a.Scale[1] <= 1) {
		return fmt.Errorf("%w: transform: RandomResizedCrop scale %v: want 0 <= lo <= hi <= 1", errs.Unsupported, a.Scale)
	}
	if !(a.Ratio[0] > 0 && a.Ratio[0] <= a.Ratio[1]) || math.IsInf(a.Ratio[1], 0) {
		return fmt.Errorf("%w: transform: RandomResizedCrop ratio %v: want 0 < lo <= hi, finite", errs.Unsupported, a.Ratio)
	}
	// When no drawn crop fits, torchvision's fallback crops the whole
	// height at width height*hi (or the whole width at height width/lo):
	// a range that makes that side round to 0 for every image a decoder
	// takes would fail every sample as an empty crop.
	if a.Ratio[1]*maxImageSide < 0.5 || maxImageSide/a.Ratio[0] < 0.5 {
		return fmt.Errorf("%w: transform: RandomResizedCrop ratio %v: every crop would be empty (a side of 0 pixels) on any image up to %d pixels a side; want a range that meets [1/%d, %d]",
			errs.Unsupported, a.Ratio, maxImageSide, maxImageSide, maxImageSide)
	}
	return checkSize(op, false)
}

// maxImageSide is the longest side of an image a JPEG can declare, the
// bound checkRRC takes for "any image".
const maxImageSide = 65535

// checkP checks a RandomHorizontalFlip fused into the decode (op pos).
func checkP(op *optab.Op, pos int) error {
	if !(op.P >= 0 && op.P <= 1) { // NaN too
		return optab.OpError(fmt.Sprintf("op %d (%s)", pos, op.Kind), "p=%v: want 0 <= p <= 1", op.P)
	}
	return nil
}

// checkInterp checks a geometry op's interpolation.
func checkInterp(op *optab.Op, geometry bool) error {
	if op.Kind == OpRandomResizedCrop && optab.ArgsOf[RRCArgs](op).RandomInterp && op.Interp != InterpBilinear {
		return fmt.Errorf("%w: transform: %s: a random interpolation draws bilinear or bicubic (Interp bilinear), got %s", errs.Unsupported, op.Kind, op.Interp)
	}
	switch op.Interp {
	case InterpBilinear, InterpBicubic, InterpNearest:
		return nil
	}
	return fmt.Errorf("%w: transform: %s: interpolation %s: want nearest, bilinear or bicubic", errs.Unsupported, op.Kind, op.Interp)
}

func checkSize(op *optab.Op, shorterOK bool) error {
	h, w := op.Size[0], op.Size[1]
	if w == 0 && !shorterOK {
		w = h
		op.Size[1] = w
	}
	if h <= 0 || h > optab.MaxSide || w < 0 || w > optab.MaxSide {
		return fmt.Errorf("%w: transform: %s size %v: sides must be in 1..%d", errs.Unsupported, op.Kind, op.Size, optab.MaxSide)
	}
	return nil
}

// growPadAfter adds a Pad after the crop (t.padAfter) to the output size.
func (t *Transform) growPadAfter() error {
	if t.padAfter == nil {
		return nil
	}
	pd := optab.ArgsOf[PadArgs](t.padAfter).Padding
	if t.outW += pd[0] + pd[2]; t.outW > optab.MaxSide {
		return fmt.Errorf("%w: transform: Pad after the crop: width %d is more than %d", errs.Unsupported, t.outW, optab.MaxSide)
	}
	if t.outH += pd[1] + pd[3]; t.outH > optab.MaxSide {
		return fmt.Errorf("%w: transform: Pad after the crop: height %d is more than %d", errs.Unsupported, t.outH, optab.MaxSide)
	}
	return nil
}
