package pipeline

import (
	"errors"
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// opScratch is a Decoder's reusable memory for the ops after the
// geometry: the kernels' Scratch, whose Stop is the sample's abandoned
// flag (nil: none), set by an Executor when no one wants the sample any
// more (its Fill's ctx ended, its queue closed): the C kernels poll it
// once a row, the steps' loop between steps, and a sample whose flag is
// set ends with errAbandoned.
type opScratch struct {
	kernels.Scratch
	// progress is told of each step made (nil: no one asks).
	progress *batch.Progress
}

// errAbandoned is the error of a sample whose work was abandoned (its
// flag, opScratch.Stop, was set): its batch's Fill returns the reason
// instead, so it never reaches a batch as a sample's error.
var errAbandoned = errors.New("pipeline: the sample's work was abandoned")

// applyStep runs one step's kernel on p: the step's arguments unpacked
// into the kernel's. Geometry steps are the decode's, and Normalize the
// packing's: both are no-ops here.
func applyStep(p kernels.Planes, st *Step, ks *kernels.Scratch) {
	switch st.Fn {
	case FnHorizontalFlip:
		kernels.HorizontalFlip(p)
	case FnVerticalFlip:
		kernels.VerticalFlip(p)
	case FnAdjustBrightness:
		kernels.AdjustBrightness(p, st.F[0])
	case FnAdjustContrast:
		kernels.AdjustContrast(p, st.F[0])
	case FnAdjustSaturation:
		kernels.AdjustSaturation(p, st.F[0])
	case FnAdjustHue:
		kernels.AdjustHue(p, st.F[0])
	case FnAdjustSharpness:
		kernels.AdjustSharpness(p, st.F[0], ks)
	case FnRGBToGrayscale:
		kernels.RGBToGrayscale(p)
	case FnGaussianBlur:
		kernels.GaussianBlur(p, st.I[0], st.I[1], st.F[0], st.F[1], ks)
	case FnSolarize:
		kernels.Solarize(p, st.F[0])
	case FnSolarizeAdd:
		kernels.SolarizeAdd(p, st.I[0], st.F[0])
	case FnPosterize:
		kernels.Posterize(p, st.I[0])
	case FnInvert:
		kernels.Invert(p)
	case FnEqualize:
		kernels.Equalize(p)
	case FnAutocontrast:
		kernels.Autocontrast(p)
	case FnRotate:
		kernels.Rotate(p, st.F[0], st.Interp, st.Center, st.HasCenter, st.Fill, st.FillNone, ks)
	case FnPerspective:
		start, end := st.corners()
		c, _ := kernels.PerspectiveCoeffs(&start, &end) // drawn or checked (checkStep): not singular
		kernels.Perspective(p, &c, st.Interp, st.Fill, st.FillNone, ks)
	case FnAffine:
		a := kernels.AffineParams{Angle: st.F[0], TX: st.F[1], TY: st.F[2], Scale: st.F[3], ShearX: st.F[4], ShearY: st.F[5],
			Interp: st.Interp, Fill: st.Fill, Center: st.Center, HasCenter: st.HasCenter, NoFill: st.FillNone}
		kernels.Affine(p, &a, ks)
	case FnErase:
		if st.Random {
			mean, std := [3]float64{st.F[0], st.F[1], st.F[2]}, [3]float64{st.F[3], st.F[4], st.F[5]}
			if !(std[0] > 0 && std[1] > 0 && std[2] > 0) { // a parsed trace's: no Normalize given
				mean, std = imagenetMean, imagenetStd
			}
			kernels.EraseRandom(p, st.I[0], st.I[1], st.I[2], st.I[3], st.Seed, mean, std, ks)
		} else {
			kernels.Erase(p, st.I[0], st.I[1], st.I[2], st.I[3], st.Fill)
		}
	case FnMixBegin:
		ks.Mix.Begin(p, st.F[0])
	case FnMixChain:
		ks.Mix.Chain(p, st.F[0])
	case FnMixEnd:
		ks.Mix.End(p)
	case FnMixBlend:
		ks.Mix.Blend(p, st.F[0])
	case FnMixFold:
		ks.Mix.Fold(p, st.F[0])
	case FnPermuteChannels:
		kernels.PermuteChannels(p, [3]int(st.I[:3]))
	}
}

// checkStep checks a step's arguments as the kernels need them (a parsed
// trace's, say: a drawn step is valid by construction).
func checkStep(st *Step, w, h int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrUnsupported, st.Fn, fmt.Sprintf(format, a...))
	}
	switch st.Fn {
	case FnGaussianBlur:
		for _, k := range st.I[:2] {
			if k <= 0 || k%2 == 0 || k > maxKernel {
				return bad("kernel_size %v: want odd, positive and at most %d", st.I[:2], maxKernel)
			}
		}
		if !(st.F[0] > 0 && st.F[1] > 0) || st.F[0] > 1e6 || st.F[1] > 1e6 {
			return bad("sigma %v: want positive", st.F[:2])
		}
	case FnAdjustBrightness, FnAdjustContrast, FnAdjustSaturation, FnAdjustSharpness:
		if !(st.F[0] >= 0) {
			return bad("factor %v: want >= 0", st.F[0])
		}
	case FnMixBlend:
		if !(st.F[0] >= 0 && st.F[0] <= 1) {
			return bad("weight %v: want 0..1 (PIL's blend between the two images)", st.F[0])
		}
	case FnMixFold:
		if !(st.F[0] >= 0 && st.F[0] <= 2) {
			return bad("weight %v: want 0..2 (PIL's blend, a little past 1 where timm's float32 weights round up)", st.F[0])
		}
	case FnPermuteChannels:
		if pm := st.I; pm[0]+pm[1]+pm[2] != 3 || pm[0]*pm[1]*pm[2] != 0 || min(pm[0], pm[1], pm[2]) < 0 || max(pm[0], pm[1], pm[2]) > 2 ||
			pm[0] == pm[1] || pm[1] == pm[2] || pm[0] == pm[2] {
			return bad("permutation %v: want a permutation of 0, 1, 2", st.I[:3])
		}
	case FnAdjustHue:
		if !(st.F[0] >= -0.5 && st.F[0] <= 0.5) {
			return bad("hue_factor %v: want -0.5..0.5", st.F[0])
		}
	case FnSolarize:
		if !(st.F[0] >= 0 && st.F[0] <= 255) {
			return bad("threshold %v: want 0..255", st.F[0])
		}
	case FnPosterize:
		if st.I[0] < 0 || st.I[0] > 8 {
			return bad("bits %d: want 0..8", st.I[0])
		}
	case FnRGBToGrayscale:
		if st.I[0] != 3 && st.I[0] != 0 {
			return bad("num_output_channels %d: stoker's samples have 3 channels", st.I[0])
		}
	case FnPerspective:
		if st.I[4] != w-1 || st.I[5] != h-1 {
			return bad("startpoints with the corner (%d, %d) on a %dx%d image: want its corners", st.I[4], st.I[5], w, h)
		}
		if st.Interp != InterpNearest && st.Interp != InterpBilinear {
			return bad("interpolation %s: torchvision's perspective of a tensor is nearest or bilinear", st.Interp)
		}
		if err := perspectiveError(st); err != nil {
			return err
		}
	case FnErase:
		i, j, eh, ew := st.I[0], st.I[1], st.I[2], st.I[3]
		if i < 0 || j < 0 || eh < 0 || ew < 0 || i+eh > h || j+ew > w {
			return bad("box (i=%d, j=%d, h=%d, w=%d) is outside the %dx%d image", i, j, eh, ew, w, h)
		}
	case FnResizedCrop, FnResize, FnCenterCrop, FnPad, FnCrop, FnIoUCrop, FnFixedSizeCrop, FnNormalize:
		return bad("a geometry op or Normalize is no kernel after the decode")
	}
	if err := checkGeom(st); err != nil {
		return err
	}
	for _, f := range st.F {
		if f != f || f > 1e9 || f < -1e9 {
			return bad("argument %v out of range", f)
		}
	}
	return nil
}

// ApplyTrace runs a trace's steps after the geometry (AppendTrace's JSON,
// parsed by ParseTrace) on pix, a w x h image as three planes (CHW, uint8),
// in place: the kernels alone, with no decode and no randomness, as the
// parity tests call them. Geometry steps and Normalize are refused: they
// are not kernels after the decode.
func ApplyTrace(pix []byte, w, h int, steps []Step) error {
	if w <= 0 || h <= 0 || w > maxSide || h > maxSide || len(pix) != 3*w*h {
		return fmt.Errorf("%w: %d bytes for a 3x%dx%d image (sides 1..%d)", ErrUnsupported, len(pix), h, w, maxSide)
	}
	for i := range steps {
		if err := checkStep(&steps[i], w, h); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	var s kernels.Scratch
	p := kernels.Planes{Pix: pix, W: w, H: h}
	for i := range steps {
		applyStep(p, &steps[i], &s)
	}
	return nil
}

// checkGeom checks a geometric step's arguments as torchvision's kernels
// would (a scale that is not positive) and refuses fills outside 0..255,
// which torch would wrap around on uint8. Bicubic rotate and affine, which
// torchvision refuses for tensors, are kernels/bicubic.go's.
func checkGeom(st *Step) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrUnsupported, st.Fn, fmt.Sprintf(format, a...))
	}
	switch st.Fn {
	case FnRotate, FnAffine, FnPerspective:
		if st.Fn == FnAffine && !(st.F[3] > 0) {
			return bad("scale %v: want positive", st.F[3])
		}
		for _, c := range st.Center {
			if !(math.Abs(c) <= 1e9) {
				return bad("center %v out of range", st.Center)
			}
		}
	case FnErase:
		if st.Random {
			return nil
		}
	default:
		return nil
	}
	for _, v := range st.Fill {
		if !(v >= 0 && v <= 255) {
			return bad("fill %v: want values in 0..255 on uint8 images", st.Fill)
		}
	}
	return nil
}

// perspectiveError is a perspective step's error when its corners give no
// perspective (a singular system: three corners in a line), nil for any
// other step. A drawn one (endpoints that land in a line, which the
// overlapping bands of a distortion_scale near 1 allow) fails its sample,
// as torchvision's raises (its least squares finds no full rank).
func perspectiveError(st *Step) error {
	if st.Fn != FnPerspective {
		return nil
	}
	start, end := st.corners()
	if _, err := kernels.PerspectiveCoeffs(&start, &end); err != nil {
		return fmt.Errorf("%w: perspective: endpoints %v: %v", ErrUnsupported, end, err)
	}
	return nil
}
