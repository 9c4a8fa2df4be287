package pipeline

// The geometric kernels after the fused crop: torchvision.transforms.v2's
// functional ops on uint8 images, in place on planes (the output keeps
// the input's size: expand=False). STUBS: the geometric helper fills them
// in.

// affineParams are affine()'s arguments (rotate is affine with the angle
// negated, as torchvision's rotate computes its matrix).
type affineParams struct {
	angle          float64 // degrees
	tx, ty         float64 // translate, pixels
	scale          float64
	shearX, shearY float64 // degrees
	interp         Interpolation
	fill           [3]float64
	center         [2]float64 // pixels from the top left, when hasCenter
	hasCenter      bool
}

// horizontalFlip is horizontal_flip(img).
func horizontalFlip(p planes) {}

// verticalFlip is vertical_flip(img).
func verticalFlip(p planes) {}

// affine is affine(img, angle, translate, scale, shear, interpolation,
// fill, center).
func affine(p planes, a *affineParams, s *opScratch) {}

// rotate is rotate(img, angle, interpolation, expand=False, center, fill).
func rotate(p planes, angle float64, interp Interpolation, center [2]float64, hasCenter bool, fill [3]float64, s *opScratch) {
}

// erase is erase(img, i, j, h, w, v) with v one value per channel.
func erase(p planes, i, j, h, w int, v [3]float64) {}

// eraseRandom is erase with v random values (value="random"), drawn from
// seed.
func eraseRandom(p planes, i, j, h, w int, seed uint64) {}
