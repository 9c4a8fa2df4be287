package kernels

import "fmt"

// Interpolation is a resampling filter, with torchvision.transforms.v2's
// semantics on uint8 tensors (torchvision 0.29.2, torch 2.15.0: torch's
// uint8 kernels, which torchvision uses on CPUs with AVX2). For the
// geometry op (RandomResizedCrop, Resize: the pipeline's resampler):
//
//   - Bilinear: the triangle filter, its support widened by the
//     downscale factor when antialiased (PIL's and torch's antialias). The
//     default.
//   - Nearest: torch's "nearest": output pixel i reads source pixel
//     floor(i * in/out), computed in single precision as torch does; never
//     antialiased.
//   - Bicubic: Keys' cubic with a = -0.5 (as PIL and torch's
//     antialiased kernel), its support of 2 widened by the downscale factor
//     when antialiased; without antialias, torch's a = -0.75 cubic on four
//     taps, edge pixels repeated. Results are clamped to 0..255.
//
// Antialias (on unless the op's NoAntialias) applies to bilinear and
// bicubic. Rotate and Affine sample with grid_sample's modes of the same
// names (affine.go, bicubic.go).
type Interpolation uint8

// The interpolations. The zero value is bilinear, torchvision's default.
const (
	Bilinear Interpolation = iota
	Nearest
	Bicubic
)

var interpNames = [...]string{Bilinear: "bilinear", Nearest: "nearest", Bicubic: "bicubic"}

// String is torchvision's lowercase name of the interpolation
// (InterpolationMode.value).
func (i Interpolation) String() string {
	if i.Valid() {
		return interpNames[i]
	}
	return fmt.Sprintf("Interpolation(%d)", uint8(i))
}

// Valid reports whether i is one of the interpolations.
func (i Interpolation) Valid() bool { return int(i) < len(interpNames) }
