package pipeline

import (
	"fmt"
	"math"

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
func (t *Transform) geomInterp(p *samplePlan) error {
	op := t.center
	switch {
	case t.yolo != nil: // the image at its own size: no resampling
		p.interp, p.antialias = InterpBilinear, true
		return nil
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
		return fmt.Errorf("%w: transform: %s interpolation %d: want bilinear, nearest or bicubic", ErrUnsupported, op.Kind, op.Interp)
	}
	p.interp = op.Interp
	p.antialias = !op.NoAntialias && op.Interp != InterpNearest
	return nil
}

// dctScalable reports whether the plan may decode at a DCT scale: only when
// its transform asks for DecodeFast (the default, DecodeExact, decodes at
// full scale, as torchvision does). A scaled IDCT averages pixels, a
// low-pass: right before an antialiased filter, wrong before nearest
// (which must pick pixels) or a filter that is not widened (torch's
// non-antialiased kernels alias, and are asked for as such).
func (p *samplePlan) dctScalable() bool { return !p.exact && p.antialias }

// spans returns the plan's geometry as torch computes it: crop then resize
// (resized_crop), or resize the whole image then crop (resize,
// center_crop).
func (p *samplePlan) spans() (x, y fn.Span) {
	if p.geom == cropResize {
		return fn.Span{Base: p.cx, In: p.cw, Out: p.outW, N: p.outW}, fn.Span{Base: p.cy, In: p.ch, Out: p.outH, N: p.outH}
	}
	return fn.Span{In: p.srcW, Out: p.rw, Off: p.cx, N: p.outW}, fn.Span{In: p.srcH, Out: p.rh, Off: p.cy, N: p.outH}
}

// clipMargin is how far, in source pixels, the plan's filter reaches past a
// box whose side is s times its output's: the radius of the support plus
// one pixel of slack for rounding (bilinear's support is 1, bicubic's 2,
// widened by s when antialiased and s > 1).
func (p *samplePlan) clipMargin(s float64) float64 {
	if p.interp == InterpBicubic {
		return 2*math.Max(s, 1) + 1
	}
	return math.Max(s, 1) + 1
}
