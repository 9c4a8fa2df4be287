package pipeline

import "fmt"

// Fn names a functional op: what one step of a sample does to its pixels,
// with torchvision.transforms.v2.functional's name and arguments. A
// Transform's ops (the classes: RandomRotation, TrivialAugmentWide, …) only
// draw a sample's Steps; the kernels (kernels_*.go) do the pixels. That
// split is torchvision's, and it is what the trace records and what the
// parity tests call directly.
type Fn uint8

// The functional ops. The geometry Fns (FnResizedCrop, FnResize,
// FnCenterCrop) are fused into the decode: they appear in a trace, never
// among the Steps run after it.
const (
	FnNone Fn = iota
	FnResizedCrop
	FnResize
	FnCenterCrop
	FnHorizontalFlip
	FnVerticalFlip
	FnAdjustBrightness
	FnAdjustContrast
	FnAdjustSaturation
	FnAdjustHue
	FnAdjustSharpness
	FnRGBToGrayscale
	FnGaussianBlur
	FnSolarize
	FnPosterize
	FnInvert
	FnEqualize
	FnAutocontrast
	FnRotate
	FnAffine
	FnErase
	FnNormalize
	// FnSolarizeAdd is timm's SolarizeAdd (add, clamped, to the pixels
	// below the threshold): no torchvision functional has it.
	FnSolarizeAdd
	// FnMixBegin, FnMixChain and FnMixEnd are AugMix's blending: the
	// steps between a FnMixChain and the next FnMixChain or FnMixEnd are
	// one chain applied to the image as FnMixBegin found it.
	FnMixBegin
	FnMixChain
	FnMixEnd
	// FnPad and FnCrop are RandomCrop's and Pad's geometry (torchvision's pad, with
	// a constant fill, then crop), fused into the decode as the others.
	FnPad
	FnCrop
	// FnMixBlend is timm's AugMix's last step: PIL's Image.blend of the
	// image FnMixBegin found with the mix, by its weight.
	FnMixBlend
	// FnMixFold is timm's blended AugMix's step after each chain: PIL's
	// Image.blend of the image so far (the image FnMixBegin found, at
	// first) with the chain's result, by its weight; the image then is
	// that blend.
	FnMixFold
	// FnSanitizeBoxes is SanitizeBoundingBoxes': a job's targets lose
	// their degenerate boxes (MoveBoxes); no kernel.
	FnSanitizeBoxes
	// FnIoUCrop is RandomIoUCrop's crop: torchvision's crop, then the
	// boxes whose centre was outside it set to 0 (RandomIoUCrop.transform);
	// fused into the decode as the other geometry.
	FnIoUCrop
	// FnPermuteChannels is torchvision's permute_channels: output channel
	// c is input channel I[c] (RandomPhotometricDistort's).
	FnPermuteChannels
	// FnConvertBoxFormat is ConvertBoundingBoxFormat's: a job's target
	// boxes, XYXY until then, delivered in the format I[0] (a BoxFormat);
	// no kernel.
	FnConvertBoxFormat
	// FnFixedSizeCrop is FixedSizeCrop's: torchvision's crop of
	// (top, left, height, width) (I[0:4]) when that is not the whole
	// image, the boxes it leaves empty dropped with their labels
	// (Targets.Move), then pad on the right and bottom with Fill to size
	// (I[4:6]); fused into the decode as the other geometry.
	FnFixedSizeCrop
	// FnClampBoxes, FnClampKeypoints and FnSanitizeKeypoints are
	// ClampBoundingBoxes', ClampKeyPoints' and SanitizeKeyPoints': a job's
	// targets clamped, or their instances with a keypoint off the canvas
	// dropped (Targets.Move); no kernel.
	FnClampBoxes
	FnClampKeypoints
	FnSanitizeKeypoints
	// FnPerspective is torchvision's perspective (RandomPerspective's):
	// startpoints the canvas' corners ((0, 0) to (I[4], I[5])), endpoints
	// I[0:4] (one corner each, packed: packPoint), Interp, Fill.
	FnPerspective
	numFns
)

// Step is one functional op applied to one sample with its drawn arguments.
// Which fields an Fn reads is in fnSpecs; the rest are zero.
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
	Interp    Interpolation
	Antialias bool
	// Fill is rotate's, affine's and erase's fill, one value per channel.
	Fill [3]float64
	// FillNone is rotate's and affine's fill=None (the trace's null), the
	// default of torchvision's functional ops and of its AutoAugment,
	// RandAugment and TrivialAugmentWide. It differs from a fill of 0 with
	// bilinear interpolation: a pixel near the border keeps the weighted sum
	// of its inside taps, where a fill darkens it by their weight once more.
	FillNone bool
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
	argFalse // a constant False (rotate's expand)
	argBoxFormat
	argCorners      // four packed (x, y) at I[at:at+4] (perspective's endpoints)
	argStartCorners // the corners of a canvas of I[at] + 1 x I[at+1] + 1
)

// fnSpec is one Fn's name and arguments, in torchvision's words and order.
type fnSpec struct {
	name string
	args []arg
}

var fnSpecs = [numFns]fnSpec{
	FnResizedCrop: {"resized_crop", []arg{{"top", argInt, 0, 1}, {"left", argInt, 1, 1}, {"height", argInt, 2, 1}, {"width", argInt, 3, 1},
		{"size", argInt, 4, 2}, {"interpolation", argInterp, 0, 1}, {"antialias", argAntialias, 0, 1}}},
	FnResize:           {"resize", []arg{{"size", argInt, 4, 2}, {"interpolation", argInterp, 0, 1}, {"antialias", argAntialias, 0, 1}}},
	FnCenterCrop:       {"center_crop", []arg{{"output_size", argInt, 4, 2}}},
	FnHorizontalFlip:   {"horizontal_flip", nil},
	FnVerticalFlip:     {"vertical_flip", nil},
	FnAdjustBrightness: {"adjust_brightness", []arg{{"brightness_factor", argFloat, 0, 1}}},
	FnAdjustContrast:   {"adjust_contrast", []arg{{"contrast_factor", argFloat, 0, 1}}},
	FnAdjustSaturation: {"adjust_saturation", []arg{{"saturation_factor", argFloat, 0, 1}}},
	FnAdjustHue:        {"adjust_hue", []arg{{"hue_factor", argFloat, 0, 1}}},
	FnAdjustSharpness:  {"adjust_sharpness", []arg{{"sharpness_factor", argFloat, 0, 1}}},
	FnRGBToGrayscale:   {"rgb_to_grayscale", []arg{{"num_output_channels", argInt, 0, 1}}},
	FnGaussianBlur:     {"gaussian_blur", []arg{{"kernel_size", argInt, 0, 2}, {"sigma", argFloat, 0, 2}}},
	FnSolarize:         {"solarize", []arg{{"threshold", argFloat, 0, 1}}},
	FnPosterize:        {"posterize", []arg{{"bits", argInt, 0, 1}}},
	FnInvert:           {"invert", nil},
	FnEqualize:         {"equalize", nil},
	FnAutocontrast:     {"autocontrast", nil},
	FnRotate: {"rotate", []arg{{"angle", argFloat, 0, 1}, {"interpolation", argInterp, 0, 1}, {"expand", argFalse, 0, 1},
		{"center", argCenter, 0, 1}, {"fill", argFill, 0, 1}}},
	FnAffine: {"affine", []arg{{"angle", argFloat, 0, 1}, {"translate", argFloat, 1, 2}, {"scale", argFloat, 3, 1}, {"shear", argFloat, 4, 2},
		{"interpolation", argInterp, 0, 1}, {"fill", argFill, 0, 1}, {"center", argCenter, 0, 1}}},
	FnErase:            {"erase", []arg{{"i", argInt, 0, 1}, {"j", argInt, 1, 1}, {"h", argInt, 2, 1}, {"w", argInt, 3, 1}, {"v", argEraseValue, 0, 1}}},
	FnNormalize:        {"normalize", []arg{{"mean", argFloat, 0, 3}, {"std", argFloat, 3, 3}}},
	FnSolarizeAdd:      {"solarize_add", []arg{{"addition", argInt, 0, 1}, {"threshold", argFloat, 0, 1}}},
	FnMixBegin:         {"augmix_begin", []arg{{"weight", argFloat, 0, 1}}},
	FnMixChain:         {"augmix_chain", []arg{{"weight", argFloat, 0, 1}}},
	FnMixEnd:           {"augmix_end", nil},
	FnMixBlend:         {"augmix_blend", []arg{{"weight", argFloat, 0, 1}}},
	FnMixFold:          {"augmix_fold", []arg{{"weight", argFloat, 0, 1}}},
	FnPad:              {"pad", []arg{{"padding", argInt, 0, 4}, {"fill", argFill, 0, 1}}},
	FnCrop:             {"crop", []arg{{"top", argInt, 0, 1}, {"left", argInt, 1, 1}, {"height", argInt, 2, 1}, {"width", argInt, 3, 1}}},
	FnSanitizeBoxes:    {"sanitize_bounding_boxes", []arg{{"min_size", argFloat, 0, 1}, {"min_area", argFloat, 1, 1}}},
	FnConvertBoxFormat: {"convert_bounding_box_format", []arg{{"new_format", argBoxFormat, 0, 1}}},
	FnPermuteChannels:  {"permute_channels", []arg{{"permutation", argInt, 0, 3}}},
	FnIoUCrop:          {"iou_crop", []arg{{"top", argInt, 0, 1}, {"left", argInt, 1, 1}, {"height", argInt, 2, 1}, {"width", argInt, 3, 1}}},
	FnFixedSizeCrop: {"fixed_size_crop", []arg{{"top", argInt, 0, 1}, {"left", argInt, 1, 1}, {"height", argInt, 2, 1}, {"width", argInt, 3, 1},
		{"size", argInt, 4, 2}, {"fill", argFill, 0, 1}}},
	// The targets' clamps and keypoint sanitize: no arguments.
	FnClampBoxes: {"clamp_bounding_boxes", nil}, FnClampKeypoints: {"clamp_keypoints", nil},
	FnSanitizeKeypoints: {"sanitize_keypoints", nil},
	FnPerspective: {"perspective", []arg{{"startpoints", argStartCorners, 4, 1}, {"endpoints", argCorners, 0, 1},
		{"interpolation", argInterp, 0, 1}, {"fill", argFill, 0, 1}}},
}

// String is the Fn's torchvision name.
func (f Fn) String() string {
	if f < numFns && fnSpecs[f].name != "" {
		return fnSpecs[f].name
	}
	return fmt.Sprintf("Fn(%d)", uint8(f))
}

// fnByName maps torchvision's names to Fns.
var fnByName = func() map[string]Fn {
	m := make(map[string]Fn, numFns)
	for f := Fn(1); f < numFns; f++ {
		m[fnSpecs[f].name] = f
	}
	return m
}()

// geometry reports whether f is fused into the decode.
func (f Fn) geometry() bool {
	return f == FnResizedCrop || f == FnResize || f == FnCenterCrop || f == FnPad || f == FnCrop || f == FnIoUCrop || f == FnFixedSizeCrop
}

// packPoint packs a corner (x, y), each within +-2^30, into one int
// (perspective's endpoints); unpackPoint undoes it.
func packPoint(x, y int) int { return int(int64(x)<<32 | int64(uint32(int32(y)))) }

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
