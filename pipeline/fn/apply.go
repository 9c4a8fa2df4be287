package fn

// Running steps: a step's kernel on a sample's planes, its output's
// size, and the checks a parsed trace's steps pass first.

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Apply runs one step's kernel on p: its definition's kernel, the
// step's arguments unpacked into the kernel's. Geometry steps are the
// decode's, and Normalize the packing's: both are no-ops here. It returns
// the image after it: p, or of a step that changes the size (rotate's
// expand: Size), the planes it made in p's bytes' room.
func Apply(p kernels.Planes, st *Step, ks *kernels.Scratch) kernels.Planes {
	d := st.Fn.Def()
	if d.grow != nil {
		return d.grow(p, st, ks)
	}
	if d.kernel != nil {
		d.kernel(p, st, ks)
	}
	return p
}

// Size is the size of st's output on a w x h image.
func Size(st *Step, w, h int) (int, int) {
	if f := st.Fn.Def().size; f != nil {
		return f(st, w, h)
	}
	return w, h
}

// ApplySized is Apply with p's room checked first: a step whose
// output would not fit (a size past the transform's bound) is an error.
func ApplySized(p kernels.Planes, st *Step, ks *kernels.Scratch) (kernels.Planes, error) {
	if w, h := Size(st, p.W, p.H); 3*w*h > cap(p.Pix) || w > MaxSide || h > MaxSide {
		return p, fmt.Errorf("%w: %s makes a %dx%d image of the %dx%d one: past the bound of %d bytes", errs.Unsupported, st.Fn, w, h, p.W, p.H, cap(p.Pix))
	}
	return Apply(p, st, ks), nil
}

// Check checks a step's arguments as the kernels need them (a parsed
// trace's, say: a drawn step is valid by construction): its definition's
// check, then every float in range.
func Check(st *Step, w, h int) error {
	if c := st.Fn.Def().check; c != nil {
		if err := c(st, w, h); err != nil {
			return err
		}
	}
	for _, f := range st.F {
		if f != f || f > 1e9 || f < -1e9 {
			return StepError(st, "argument %v out of range", f)
		}
	}
	return nil
}
