package pipeline

import (
	"errors"
	"sync/atomic"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

// planes is a sample's uint8 pixels as the ops after the geometry see them:
// three planes (R, G, B) of h rows of w bytes each, back to back (CHW),
// whatever the job's output layout (a HWC job's sample is packed after its
// ops). Kernels work on planes in place.
type planes struct {
	pix  []byte
	w, h int
}

// plane returns plane c (0 R, 1 G, 2 B).
func (p planes) plane(c int) []byte {
	n := p.w * p.h
	return p.pix[c*n : (c+1)*n : (c+1)*n]
}

// opScratch is a Decoder's reusable memory for the ops after the geometry:
// grown on first use and kept, so that once warm an op allocates nothing per
// sample. Kernels ask for what they need by slot; two buffers of one kind
// used at the same time take different slots.
type opScratch struct {
	b     [4][]byte
	i32   [2][]int32
	f32   [2][]float32
	mix   mixer     // AugMix's blending (kernels_mix.go)
	noise noiseLUTs // erase's random values (kernels_geom.go)
	// stop is the sample's abandoned flag (nil: none), set by an
	// Executor when no one wants the sample any more (its Fill's ctx
	// ended, its queue closed): the C kernels poll it once a row, the
	// steps' loop between steps, and a sample whose flag is set ends with
	// errAbandoned. Only atomic loads and stores touch it.
	stop *int32
	// progress is told of each step made (nil: no one asks).
	progress *batch.Progress
}

// errAbandoned is the error of a sample whose work was abandoned (its
// flag, opScratch.stop, was set): its batch's Fill returns the reason
// instead, so it never reaches a batch as a sample's error.
var errAbandoned = errors.New("pipeline: the sample's work was abandoned")

// stopped reports whether the sample's work was abandoned.
func (s *opScratch) stopped() bool { return s.stop != nil && atomic.LoadInt32(s.stop) != 0 }

// bytes returns byte buffer slot (0..3), n long; its contents are stale.
func (s *opScratch) bytes(slot, n int) []byte {
	if cap(s.b[slot]) < n {
		s.b[slot] = make([]byte, n)
	}
	return s.b[slot][:n]
}

// int32s returns int32 buffer slot (0..1), n long; its contents are stale.
func (s *opScratch) int32s(slot, n int) []int32 {
	if cap(s.i32[slot]) < n {
		s.i32[slot] = make([]int32, n)
	}
	return s.i32[slot][:n]
}

// float32s returns float32 buffer slot (0..1), n long; its contents are
// stale.
func (s *opScratch) float32s(slot, n int) []float32 {
	if cap(s.f32[slot]) < n {
		s.f32[slot] = make([]float32, n)
	}
	return s.f32[slot][:n]
}
