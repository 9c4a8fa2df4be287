package pipeline

import "fmt"

// Interpolation is a resampling filter, as torchvision's InterpolationMode.
type Interpolation uint8

// The interpolations. The zero value is bilinear, torchvision's default.
const (
	InterpBilinear Interpolation = iota
	InterpNearest
	InterpBicubic
)

// String is torchvision's lowercase name.
func (i Interpolation) String() string {
	switch i {
	case InterpBilinear:
		return "bilinear"
	case InterpNearest:
		return "nearest"
	case InterpBicubic:
		return "bicubic"
	}
	return fmt.Sprintf("Interpolation(%d)", uint8(i))
}

// ParseInterpolation parses torchvision's name of an interpolation.
func ParseInterpolation(s string) (Interpolation, error) {
	switch s {
	case "bilinear":
		return InterpBilinear, nil
	case "nearest":
		return InterpNearest, nil
	case "bicubic":
		return InterpBicubic, nil
	}
	return 0, fmt.Errorf("%w: interpolation %q: want nearest, bilinear or bicubic", ErrUnsupported, s)
}
