package kernels

import "sync/atomic"

// Planes is an image as the kernels see it: three planes (R, G, B) of H
// rows of W bytes each, back to back (CHW). Kernels work on Planes in
// place.
type Planes struct {
	Pix  []byte
	W, H int
}

// Plane returns plane c (0 R, 1 G, 2 B).
func (p Planes) Plane(c int) []byte {
	n := p.W * p.H
	return p.Pix[c*n : (c+1)*n : (c+1)*n]
}

// Scratch is the kernels' reusable memory: grown on first use and kept,
// so that once warm a kernel allocates nothing per image. Kernels ask for
// what they need by slot; two buffers of one kind used at the same time
// take different slots. The zero value is ready to use; it is not safe for
// concurrent use.
type Scratch struct {
	b     [4][]byte
	i32   [2][]int32
	f32   [2][]float32
	noise noiseLUTs // EraseRandom's tables (geom.go)
	// Mix is AugMix's blending state (mix.go).
	Mix Mixer
	// Stop is the image's abandoned flag (nil: none), set when no one
	// wants the result any more: the C kernels and the Go loops poll it
	// once a row and return at once, the image half made (the caller
	// throws it away). Only atomic loads and stores touch it.
	Stop *int32
}

// Stopped reports whether the image's work was abandoned (Stop is set).
func (s *Scratch) Stopped() bool { return s.Stop != nil && atomic.LoadInt32(s.Stop) != 0 }

// bytes returns byte buffer slot (0..3), n long; its contents are stale.
func (s *Scratch) bytes(slot, n int) []byte {
	if cap(s.b[slot]) < n {
		s.b[slot] = make([]byte, n)
	}
	return s.b[slot][:n]
}

// int32s returns int32 buffer slot (0..1), n long; its contents are stale.
func (s *Scratch) int32s(slot, n int) []int32 {
	if cap(s.i32[slot]) < n {
		s.i32[slot] = make([]int32, n)
	}
	return s.i32[slot][:n]
}

// float32s returns float32 buffer slot (0..1), n long; its contents are
// stale.
func (s *Scratch) float32s(slot, n int) []float32 {
	if cap(s.f32[slot]) < n {
		s.f32[slot] = make([]float32, n)
	}
	return s.f32[slot][:n]
}

// Held is the memory s keeps between images: its buffers' capacities,
// AugMix's state and EraseRandom's tables (what the server's memory
// budget counts of a worker's kernels, pipeline/scratch.go).
func (s *Scratch) Held() int64 {
	var n int64
	for _, b := range s.b {
		n += int64(cap(b))
	}
	for _, b := range s.i32 {
		n += 4 * int64(cap(b))
	}
	for _, b := range s.f32 {
		n += 4 * int64(cap(b))
	}
	if s.noise.lut != nil {
		n += int64(len(s.noise.lut) * len(s.noise.lut[0]))
	}
	m := &s.Mix
	return n + int64(cap(m.orig)+cap(m.run)+4*cap(m.acc))
}

// Drop lets s's buffers go (Stop is kept).
func (s *Scratch) Drop() {
	stop := s.Stop
	*s = Scratch{Stop: stop}
}

// Spare returns a byte buffer n long (contents stale) kept in s for the
// steps outside this package that change the image's size (package fn's
// resize and center crop after a RandomRotation with expand=True), so
// that they allocate nothing per image and their buffer is counted in
// Held. It is slot 3, which no kernel here takes.
func (s *Scratch) Spare(n int) []byte {
	if s == nil {
		return make([]byte, n)
	}
	return s.bytes(3, n)
}

// CHWToHWC packs three planes into interleaved pixels.
func CHWToHWC(chw, hwc []byte) {
	n := len(chw) / 3
	r, g, b := chw[:n], chw[n:2*n], chw[2*n:]
	for i := range n {
		hwc[3*i], hwc[3*i+1], hwc[3*i+2] = r[i], g[i], b[i]
	}
}

// HWCToCHW unpacks interleaved pixels into three planes.
func HWCToCHW(hwc, chw []byte) {
	n := len(chw) / 3
	for i := range n {
		chw[i], chw[n+i], chw[2*n+i] = hwc[3*i], hwc[3*i+1], hwc[3*i+2]
	}
}
