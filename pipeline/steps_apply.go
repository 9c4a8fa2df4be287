package pipeline

import (
	"errors"
	"fmt"

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

// applyStep runs one step's kernel on p: its definition's kernel, the
// step's arguments unpacked into the kernel's. Geometry steps are the
// decode's, and Normalize the packing's: both are no-ops here.
func applyStep(p kernels.Planes, st *Step, ks *kernels.Scratch) {
	if k := st.Fn.def().kernel; k != nil {
		k(p, st, ks)
	}
}

// checkStep checks a step's arguments as the kernels need them (a parsed
// trace's, say: a drawn step is valid by construction): its definition's
// check, then every float in range.
func checkStep(st *Step, w, h int) error {
	if c := st.Fn.def().check; c != nil {
		if err := c(st, w, h); err != nil {
			return err
		}
	}
	for _, f := range st.F {
		if f != f || f > 1e9 || f < -1e9 {
			return stepError(st, "argument %v out of range", f)
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
