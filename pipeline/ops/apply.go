package ops

import (
	"errors"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// Scratch is a Decoder's reusable memory for the ops after the
// geometry: the kernels' Scratch, whose Stop is the sample's abandoned
// flag (nil: none), set by an Executor when no one wants the sample any
// more (its Fill's ctx ended, its queue closed): the C kernels poll it
// once a row, the steps' loop between steps, and a sample whose flag is
// set ends with errAbandoned.
type Scratch struct {
	kernels.Scratch
	// Progress is told of each step made (nil: no one asks).
	Progress *batch.Progress
}

// ErrAbandoned is the error of a sample whose work was abandoned (its
// flag, opScratch.Stop, was set): its batch's Fill returns the reason
// instead, so it never reaches a batch as a sample's error.
var ErrAbandoned = errors.New("pipeline: the sample's work was abandoned")

// ApplyTrace runs a trace's steps after the geometry (AppendTrace's JSON,
// parsed by ParseTrace) on pix, a w x h image as three planes (CHW, uint8),
// in place: the kernels alone, with no decode and no randomness, as the
// parity tests call them. Geometry steps and Normalize are refused: they
// are not kernels after the decode. A step that changes the size
// (rotate's expand) is refused: ApplyTraceSized takes it.
func ApplyTrace(pix []byte, w, h int, steps []fn.Step) error {
	out, ow, oh, err := ApplyTraceSized(pix, w, h, steps)
	if err == nil && (ow != w || oh != h) {
		return fmt.Errorf("%w: the trace makes a %dx%d image of the %dx%d one: ApplyTraceSized", errs.Unsupported, ow, oh, w, h)
	}
	if err == nil && len(out) > 0 && &out[0] != &pix[0] {
		copy(pix, out)
	}
	return err
}

// ApplyTraceSized is ApplyTrace with steps that may change the size
// (rotate's expand): it returns the image after them (pix's bytes when it
// fits in them) and its size.
func ApplyTraceSized(pix []byte, w, h int, steps []fn.Step) ([]byte, int, int, error) {
	if w <= 0 || h <= 0 || w > MaxSide || h > MaxSide || len(pix) != 3*w*h {
		return nil, 0, 0, fmt.Errorf("%w: %d bytes for a 3x%dx%d image (sides 1..%d)", errs.Unsupported, len(pix), h, w, MaxSide)
	}
	room, cw, ch := 3*w*h, w, h
	for i := range steps {
		if err := fn.Check(&steps[i], cw, ch); err != nil {
			return nil, 0, 0, fmt.Errorf("step %d: %w", i, err)
		}
		if cw, ch = fn.Size(&steps[i], cw, ch); cw < 1 || ch < 1 || cw > MaxSide || ch > MaxSide {
			return nil, 0, 0, fmt.Errorf("%w: step %d makes a %dx%d image (sides 1..%d)", errs.Unsupported, i, cw, ch, MaxSide)
		}
		room = max(room, 3*cw*ch)
	}
	if room > len(pix) {
		pix = append(make([]byte, 0, room), pix...)
	}
	var s kernels.Scratch
	p := kernels.Planes{Pix: pix, W: w, H: h}
	for i := range steps {
		p = fn.Apply(p, &steps[i], &s)
	}
	return p.Pix, p.W, p.H, nil
}
