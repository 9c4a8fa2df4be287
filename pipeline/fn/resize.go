package fn

// One axis of torch's resize (Span), and the interpolations' names.

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Span is one axis of torch's resize as the plan does it: source pixels
// [base, base+in) are resized to out pixels, of which [off, off+n) are
// kept.
type Span struct{ Base, In, Out, Off, N int }

// ParseInterpolation parses torchvision's name of an interpolation
// ("nearest", "bilinear", "bicubic"; case-insensitive, as InterpolationMode
// names are upper case).
func ParseInterpolation(s string) (kernels.Interpolation, error) {
	for i := kernels.Interpolation(0); i.Valid(); i++ {
		if strings.EqualFold(s, i.String()) {
			return i, nil
		}
	}
	var names []string
	for i := kernels.Interpolation(0); i.Valid(); i++ {
		names = append(names, i.String())
	}
	return 0, fmt.Errorf("%w: interpolation %q: want one of %s", errs.Unsupported, s, strings.Join(names, ", "))
}
