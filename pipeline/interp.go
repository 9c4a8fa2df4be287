package pipeline

import (
	"fmt"
	"math"
	"strings"

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
// ("nearest", "bilinear", "bicubic"; case-insensitive, as InterpolationMode
// names are upper case).
func ParseInterpolation(s string) (Interpolation, error) {
	for i := Interpolation(0); i.Valid(); i++ {
		if strings.EqualFold(s, i.String()) {
			return i, nil
		}
	}
	var names []string
	for i := Interpolation(0); i.Valid(); i++ {
		names = append(names, i.String())
	}
	return 0, fmt.Errorf("%w: interpolation %q: want one of %s", ErrUnsupported, s, strings.Join(names, ", "))
}

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

// span is one axis of torch's resize as the plan does it: source pixels
// [base, base+in) are resized to out pixels, of which [off, off+n) are
// kept.
type span struct{ base, in, out, off, n int }

// spans returns the plan's geometry as torch computes it: crop then resize
// (resized_crop), or resize the whole image then crop (resize,
// center_crop).
func (p *samplePlan) spans() (x, y span) {
	if p.geom == cropResize {
		return span{p.cx, p.cw, p.outW, 0, p.outW}, span{p.cy, p.ch, p.outH, 0, p.outH}
	}
	return span{0, p.srcW, p.rw, p.cx, p.outW}, span{0, p.srcH, p.rh, p.cy, p.outH}
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
