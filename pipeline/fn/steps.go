package fn

// Fn and Step: a functional op and one sample's drawn arguments for it.

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Fn names a functional op: what one step of a sample does to its pixels,
// with torchvision.transforms.v2.functional's name and arguments. A
// Transform's ops (the classes: RandomRotation, TrivialAugmentWide, …) only
// draw a sample's Steps; the kernels (pipeline/kernels) do the pixels. That
// split is torchvision's, and it is what the trace records and what the
// parity tests call directly.
type Fn uint8

// None is no op: a step that does nothing. Every other Fn is defined by
// its family's file (flip.go, warp.go, …), through define (registry.go).
const None Fn = 0

// Step is one functional op applied to one sample with its drawn arguments.
// Which fields an Fn reads is in its Def's args; the rest are zero.
type Step struct {
	Fn Fn
	// I: top, left, height, width (resized_crop; erase's i, j, h, w),
	// size or output_size (I[4], I[5]: height, width), kernel_size (I[0],
	// I[1]: x, y), bits, num_output_channels, addition.
	I [6]int
	// F: the factor (adjust_*), threshold, angle, sigma (x, y), affine's
	// angle, translate (x, y), scale, shear (x, y); normalize's mean and
	// std.
	F [6]float64
	// Interp and Antialias: resampling (resized_crop, resize, rotate,
	// affine).
	Interp    kernels.Interpolation
	Antialias bool
	// Fill is rotate's, affine's and erase's fill, one value per channel.
	Fill [3]float64
	// FillNone is rotate's and affine's fill=None (the trace's null), the
	// default of torchvision's functional ops and of its AutoAugment,
	// RandAugment and TrivialAugmentWide. It differs from a fill of 0 with
	// bilinear interpolation: a pixel near the border keeps the weighted sum
	// of its inside taps, where a fill darkens it by their weight once more.
	FillNone bool
	// MaskFill is pad's, rotate's and affine's fill of a job's masks (a
	// tv_tensors.Mask's value): the op's fill per type's Mask value, else
	// its one fill (None: 0). Not in the trace, whose fill is the pixels'.
	MaskFill uint8
	// Center is rotate's and affine's center (pixels from the top left;
	// torchvision's `center`); HasCenter false is None: the image's center.
	Center    [2]float64
	HasCenter bool
	// Random: erase writes random values (value="random"), from Seed.
	Random bool
	Seed   uint64
}

// arg says where a step's argument lives, for the trace.
type arg struct {
	name string
	kind argKind
	at   int // index into I or F
	n    int // 2 for a pair (size, sigma, …); 3 for mean/std; 1 otherwise
}

type argKind uint8

const (
	argInt argKind = iota
	argFloat
	argInterp
	argAntialias
	argFill
	argCenter
	argEraseValue
	argBool // a bool in I[at] (0 or 1): rotate's expand
	argBoxFormat
	argCorners      // four packed (x, y) at I[at:at+4] (perspective's endpoints)
	argStartCorners // the corners of a canvas of I[at] + 1 x I[at+1] + 1
	argPair         // two floats in Center (YOLO's perspective terms)
	argFlipIdx      // a flip_idx table's number at I[at] (0: None)
)

// String is the Fn's torchvision name.
func (f Fn) String() string {
	if int(f) < len(defs) && defs[f].name != "" {
		return defs[f].name
	}
	return fmt.Sprintf("Fn(%d)", uint8(f))
}

// Geometry reports whether f is fused into the decode.
func (f Fn) Geometry() bool { return f.Def().Geometry }

// PackPoint packs a corner (x, y), each within +-2^30, into one int
// (perspective's endpoints); unpackPoint undoes it.
func PackPoint(x, y int) int { return int(int64(x)<<32 | int64(uint32(int32(y)))) }

func unpackPoint(v int) (x, y int) { return int(int64(v) >> 32), int(int32(uint32(v))) }

// corners are a perspective step's startpoints and endpoints.
func (st *Step) corners() (start, end [4][2]int) {
	w1, h1 := st.I[4], st.I[5]
	start = [4][2]int{{0, 0}, {w1, 0}, {w1, h1}, {0, h1}}
	for i := range 4 {
		end[i][0], end[i][1] = unpackPoint(st.I[i])
	}
	return start, end
}

// StepError is a parsed step's error: its Fn, what is wrong.
func StepError(st *Step, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", errs.Unsupported, st.Fn, fmt.Sprintf(format, a...))
}

// MaxSide bounds output sides so a request cannot ask for absurd buffers.
const MaxSide = 4096
