package transform

import (
	"bytes"
	"encoding/binary"

	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// A ragged job's samples (JobSpec.ragged, a transform of per-sample sizes:
// SmartResize's, RandomShortestSize's) are made compact at the start of
// their slot, h*w pixels (its layout, uint8 or float32), with the size
// trailer at the slot's end and the rest of the slot left as it was: no
// spreading to the bound (padSample: most of a SmartResize job's CPU, a
// 1428x1428 slot for a 644x476 image). PackRagged then moves each compact
// sample to its place back to back: what the trainer receives. Whoever
// compares a ragged slot (a peer's, verified) compares its compact bytes
// and trailer alone (ViewLayout.SameSample).

// WithRagged returns a copy of t whose samples are made compact in their
// slots (see above), of several views each view of per-sample sizes; t
// itself when its samples have one size (or are ragged already).
func (t *Transform) WithRagged() *Transform {
	if !t.vary || t.ragged {
		return t
	}
	c := *t
	c.ragged = true
	c.vlayout.ragged, c.vlayout.elem = make([]bool, c.Views()), c.elem()
	if c.views != nil {
		c.views = make([]*Transform, len(t.views))
		for v, vt := range t.views {
			c.views[v] = vt.WithRagged()
			c.vlayout.ragged[v] = vt.vary
		}
	} else {
		c.vlayout.ragged[0] = true
	}
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
func (t *Transform) elem() int {
	if t.norm != nil {
		return 4
	}
	return 1
}

// CompactSample ends a ragged sample made compact at the start of out (a
// slot): its size and its image's (srcW x srcH), in the trailer. A sample of a transform that is not
// ragged is spread to its place in the bound instead (padSample).
func (t *Transform) CompactSample(out []byte, w, h, srcW, srcH int) {
	if !t.ragged {
		t.padSample(out, w, h, srcW, srcH)
		return
	}
	putTrailer(out, w, h, srcW, srcH)
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
// Of several views, PackRaggedViews.
func (t *Transform) PackRagged(data []byte, n int) (bh, bw int, sizes [][2]int, packed []byte) {
	dims, sizes, packed := t.PackRaggedViews(data, n)
	return dims[0][0], dims[0][1], sizes, packed
}

// PackRaggedViews packs n samples of a ragged transform, in place, view
// after view (the batch buffer's order, ViewLayout): of a view of
// per-sample sizes each sample's compact bytes back to back, of a view of
// one size its samples as they are. It returns each view's largest (h, w),
// every view's samples' sizes (view-major: n of view 0, then view 1's...)
// and the packed data.
func (t *Transform) PackRaggedViews(data []byte, n int) (dims, sizes [][2]int, packed []byte) {
	l, elem := t.vlayout, t.elem()
	dims, sizes = make([][2]int, t.Views()), make([][2]int, 0, n*t.Views())
	off := 0
	for v := range t.Views() {
		vt, b := t.View(v), l.Bytes(v)
		for i := range n {
			slot := data[l.Offset(n, v, i):][:b]
			h, w, k := vt.outH, vt.outW, b
			if vt.vary {
				h, w = vt.slotSize(slot)
				k = 3 * h * w * elem
			}
			sizes = append(sizes, [2]int{h, w})
			dims[v] = [2]int{max(dims[v][0], h), max(dims[v][1], w)}
			copy(data[off:off+k], slot[:k])
			off += k
		}
	}
	return dims, sizes, data[:off]
}

// SameSample reports whether two samples of l (each SampleBytes, views in
// order) are the same: every byte, or of a ragged view the trailer and
// the compact bytes it sizes (the rest of a ragged slot is whatever the
// slot held).
func (l ViewLayout) SameSample(a, b []byte) bool {
	if l.ragged == nil {
		return bytes.Equal(a, b)
	}
	if len(a) != len(b) || len(a) != l.SampleBytes() {
		return false
	}
	for v := range l.Views() {
		va, vb := a[l.Start(v):][:l.Bytes(v)], b[l.Start(v):][:l.Bytes(v)]
		if !l.ragged[v] {
			if !bytes.Equal(va, vb) {
				return false
			}
			continue
		}
		if len(va) < SizeTrailer {
			return false
		}
		ta, tb := va[len(va)-SizeTrailer:], vb[len(vb)-SizeTrailer:]
		if !bytes.Equal(ta, tb) {
			return false
		}
		h, w := int(binary.LittleEndian.Uint32(ta)), int(binary.LittleEndian.Uint32(ta[4:]))
		if h > optab.MaxSide || w > optab.MaxSide { // a lie past any bound (and 3*h*w*elem would overflow)
			return false
		}
		k := 3 * h * w * l.elem
		if k > len(va)-SizeTrailer || !bytes.Equal(va[:k], vb[:k]) {
			return false
		}
	}
	return true
}
