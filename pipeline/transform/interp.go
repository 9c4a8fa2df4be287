package transform

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Interpolation is the resampling filter of the geometry op (RandomResizedCrop,
// Resize) and of rotate and affine: kernels.Interpolation, whose doc says
// each one's semantics.
type Interpolation = kernels.Interpolation

// The interpolations. The zero value is bilinear, torchvision's default.
const (
	InterpBilinear = kernels.Bilinear
	InterpNearest  = kernels.Nearest
	InterpBicubic  = kernels.Bicubic
)

// ParseInterpolation parses torchvision's name of an interpolation
// ("nearest", "bilinear", "bicubic"; case-insensitive): fn's.
func ParseInterpolation(s string) (Interpolation, error) { return fn.ParseInterpolation(s) }

// geomInterp sets the plan's filter from its geometry op: RandomResizedCrop,
// else Resize (which a CenterCrop after it follows), else CenterCrop, which
// does not resample. Antialias is off for nearest, as torchvision has it.
func (t *Transform) geomInterp(p *SamplePlan) error {
	op := t.center
	switch {
	case t.yolo != nil, t.whole, t.own, t.iou != nil && t.resize == nil: // the image (or a crop) at its own size: no resampling
		p.Interp, p.Antialias = InterpBilinear, true
		return nil
	case t.seg != nil: // RandomResize resamples, the crop copies
		op = t.resize
	case t.rcrop != nil:
		op = t.rcrop
	case t.rrc != nil:
		op = t.rrc
	case t.resize != nil:
		op = t.resize
	case t.fixed != nil:
		op = t.fixed // its crop copies pixels
		if t.jitter != nil {
			op = t.jitter
		}
	}
	if !op.Interp.Valid() {
		return fmt.Errorf("%w: transform: %s interpolation %d: want bilinear, nearest or bicubic", errs.Unsupported, op.Kind, op.Interp)
	}
	p.Interp = op.Interp
	p.Antialias = !op.NoAntialias && op.Interp != InterpNearest
	return nil
}

// DCTScalable reports whether the plan may decode at a DCT scale: only when
// its transform asks for DecodeFast (the default, DecodeExact, decodes at
// full scale, as torchvision does). A scaled IDCT averages pixels, a
// low-pass: right before an antialiased filter, wrong before nearest
// (which must pick pixels) or a filter that is not widened (torch's
// non-antialiased kernels alias, and are asked for as such).
func (p *SamplePlan) DCTScalable() bool { return !p.Exact && p.Antialias }

// Spans returns the plan's geometry as torch computes it: crop then resize
// (resized_crop), or resize the whole image then crop (resize,
// center_crop).
func (p *SamplePlan) Spans() (x, y fn.Span) {
	if p.Geom == CropResize {
		return fn.Span{Base: p.CX, In: p.CW, Out: p.OutW, N: p.OutW}, fn.Span{Base: p.CY, In: p.CH, Out: p.OutH, N: p.OutH}
	}
	return fn.Span{In: p.SrcW, Out: p.RW, Off: p.CX, N: p.OutW}, fn.Span{In: p.SrcH, Out: p.RH, Off: p.CY, N: p.OutH}
}

// clipMargin is how far, in source pixels, the plan's filter reaches past a
// box whose side is s times its output's: the radius of the support plus
// one pixel of slack for rounding (bilinear's support is 1, bicubic's 2,
// widened by s when antialiased and s > 1).
func (p *SamplePlan) clipMargin(s float64) float64 {
	if p.Interp == InterpBicubic {
		return 2*math.Max(s, 1) + 1
	}
	return math.Max(s, 1) + 1
}
