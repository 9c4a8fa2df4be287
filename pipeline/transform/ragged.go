package transform

import (
	"bytes"
	"encoding/binary"
)

// A ragged job's samples (JobSpec.ragged, a transform of per-sample sizes:
// SmartResize's, RandomShortestSize's) are made compact at the start of
// their slot, h*w pixels (its layout, uint8 or float32), with the size
// trailer at the slot's end and the rest of the slot left as it was: no
// spreading to the bound (PadSample: most of a SmartResize job's CPU, a
// 1428x1428 slot for a 644x476 image). PackRagged then moves each compact
// sample to its place back to back: what the trainer receives. Whoever
// compares a ragged slot (a peer's, verified) compares its compact bytes
// and trailer alone (ViewLayout.SameSample).

// WithRagged returns a copy of t whose samples are made compact in their
// slots (see above); t itself when its samples have one size, or several
// views.
func (t *Transform) WithRagged() *Transform {
	if !t.vary || t.views != nil {
		return t
	}
	c := *t
	c.ragged = true
	c.vlayout.ragged, c.vlayout.elem = true, c.sampler().elem()
	if s := c.stop; s != nil && s.after != nil { // a stop_epoch's variant too
		cs := *s
		cs.after = s.after.WithRagged()
		c.stop = &cs
	}
	return &c
}

// Ragged reports whether t's samples are made compact (WithRagged).
func (t *Transform) Ragged() bool { return t.ragged }

// elem is the bytes of one value of t's output: 1 (uint8), 4 (float32,
// after a Normalize).
func (t sampler) elem() int {
	if t.norm != nil {
		return 4
	}
	return 1
}

// CompactSample ends a ragged sample made compact at the start of out (a
// slot): its size, in the trailer. A sample of a transform that is not
// ragged is spread to its place in the bound instead (PadSample).
func (t sampler) CompactSample(out []byte, w, h int) {
	if !t.ragged {
		t.PadSample(out, w, h)
		return
	}
	px := len(out) - SizeTrailer
	binary.LittleEndian.PutUint32(out[px:], uint32(h))
	binary.LittleEndian.PutUint32(out[px+4:], uint32(w))
}

// slotSize is the (h, w) a slot's trailer says, each at most the bound: a
// peer's lie is taken as the bound (the verifier sees the rest).
func (t *Transform) slotSize(slot []byte) (h, w int) {
	tr := slot[len(slot)-SizeTrailer:]
	h, w = int(binary.LittleEndian.Uint32(tr)), int(binary.LittleEndian.Uint32(tr[4:]))
	return min(h, t.outH), min(w, t.outW)
}

// PackRagged packs n ragged samples, each compact in its slot of
// SampleBytes, back to back, in place: it returns each sample's (h, w),
// the largest height and width among them, and data[:sum of 3*h*w*elem].
// A sample only ever moves towards the start, past bytes already moved.
func (t *Transform) PackRagged(data []byte, n int) (bh, bw int, sizes [][2]int, packed []byte) {
	slot, elem := t.SampleBytes(), t.sampler().elem()
	sizes = make([][2]int, n)
	off := 0
	for i := range n {
		h, w := t.slotSize(data[i*slot : (i+1)*slot])
		sizes[i] = [2]int{h, w}
		bh, bw = max(bh, h), max(bw, w)
		k := 3 * h * w * elem
		copy(data[off:off+k], data[i*slot:i*slot+k])
		off += k
	}
	return bh, bw, sizes, data[:off]
}

// SameSample reports whether two samples of l (each SampleBytes, views in
// order) are the same: every byte, or of a ragged layout the trailer and
// the compact bytes it sizes (the rest of a ragged slot is whatever the
// slot held).
func (l ViewLayout) SameSample(a, b []byte) bool {
	if !l.ragged {
		return bytes.Equal(a, b)
	}
	if len(a) != len(b) || len(a) < SizeTrailer {
		return false
	}
	ta, tb := a[len(a)-SizeTrailer:], b[len(b)-SizeTrailer:]
	if !bytes.Equal(ta, tb) {
		return false
	}
	k := 3 * int(binary.LittleEndian.Uint32(ta)) * int(binary.LittleEndian.Uint32(ta[4:])) * l.elem
	if k < 0 || k > len(a)-SizeTrailer {
		return false
	}
	return bytes.Equal(a[:k], b[:k])
}
