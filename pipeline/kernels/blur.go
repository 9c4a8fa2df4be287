package kernels

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// The convolution kernels: gaussian_blur and adjust_sharpness.

// The blur's fixed point: weights are Q14 (so a byte or a Q7 pixel times
// a weight fits a 16x16->32-bit multiply, SSE2's pmaddwd), the pass
// between the two directions is Q7 (int16), and every sum is exact in
// int32: the C and Go versions give the same bytes, on every machine.
const (
	blurPrec = 14
	blurMid  = 7 // fraction bits of the horizontal pass's output
	// blurHShift and blurVShift round the horizontal pass to Q7 and the
	// vertical one (Q14 times Q7) to a byte, half up.
	blurHShift = blurPrec - blurMid
	blurVShift = blurPrec + blurMid
)

// GaussianBlur is gaussian_blur(img, kernel_size=[kx, ky], sigma=[sx, sy]):
// separable, kx and sx along rows, with torchvision's reflect padding
// (index -1 is 1, n is n-2), mirrored again where the kernel is wider than
// the image (torchvision refuses that), a one-pixel side being its own
// padding. The weights are exp(-t*t/(2 sigma**2)), normalized (torchvision's
// softmax), in Q14; taps whose weight rounds to zero are skipped, so the
// cost follows sigma as well as the kernel size.
func GaussianBlur(p Planes, kx, ky int, sx, sy float64, s *Scratch) {
	var bx, by blurTaps
	w := s.int32s(0, kx/2+1+ky/2+1)
	blurWeights(w[:kx/2+1], sx, &bx)
	blurWeights(w[kx/2+1:], sy, &by)
	if bx.r == 0 && by.r == 0 {
		return // the centre weighs 1 << 14: the image as it is
	}
	blurPlanes(p, &bx, &by, s)
}

// blurTaps is one direction's filter: w[t] for taps -r..r, w[-t] = w[t].
type blurTaps struct {
	w []int32 // w[0..r]
	r int
}

// blurWeights fills w, a kernel's taps 0..kernel/2, with Q14 weights that
// sum to 1 << 14 over all its taps, and t with the taps that weigh
// anything. Weights are rounded to nearest and the centre takes the rest,
// unless that leaves it below its neighbour (a kernel far wider than its
// sigma's precision): then all are rounded down, and the centre only
// gains.
func blurWeights(w []int32, sigma float64, t *blurTaps) {
	half := len(w) - 1
	weight := func(k int) float64 { return det.Exp(-float64(k*k) / float64(2*sigma*sigma)) }
	total := weight(0)
	for k := 1; k <= half; k++ {
		total += 2 * weight(k)
	}
	quantize := func(round func(float64) float64) int32 {
		sum := int32(0)
		for k := 1; k <= half; k++ {
			w[k] = int32(round(weight(k) / total * (1 << blurPrec)))
			sum += 2 * w[k]
		}
		return 1<<blurPrec - sum
	}
	w[0] = quantize(math.Round)
	if half > 0 && w[0] < w[1] {
		w[0] = quantize(math.Floor)
	}
	t.w, t.r = w, 0
	for k := half; k > 0; k-- {
		if w[k] != 0 {
			t.r = k
			break
		}
	}
}

// reflect maps index i (-n < i < 2n, or anything when mirrored again) into
// 0..n-1 as torch's reflect padding does, mirroring again beyond.
func reflectIndex(i, n int) int {
	if i >= 0 && i < n {
		return i
	}
	if n == 1 {
		return 0
	}
	period := 2 * (n - 1)
	i %= period
	if i < 0 {
		i += period
	}
	if i >= n {
		i = period - i
	}
	return i
}

// blurPlanesGo is the blur in Go: each plane through the horizontal filter
// into mid (Q7), then the vertical one back into the plane. blurPlanes
// (kernels_cgo.go) is the same in C, with SIMD.
func blurPlanesGo(p Planes, bx, by *blurTaps, s *Scratch) {
	w, h := p.W, p.H
	buf := s.int32s(1, w*h+w)
	mid, acc := buf[:w*h], buf[w*h:]
	pad := s.bytes(0, w+2*bx.r)
	for c := range 3 {
		pl := p.Plane(c)
		for y := range h {
			if s.Stopped() {
				return // abandoned, as stoker_blur polls once a row
			}
			blurRowGo(pl[y*w:(y+1)*w], pad, mid[y*w:(y+1)*w], bx)
		}
		for y := range h {
			if s.Stopped() {
				return
			}
			blurColumnsGo(mid, acc, pl[y*w:(y+1)*w], y, h, by)
		}
	}
}

// blurRowGo filters one row into m (Q7), through pad, the row with its
// reflected borders.
func blurRowGo(row, pad []byte, m []int32, bx *blurTaps) {
	w, r := len(row), bx.r
	copy(pad[r:], row)
	for j := range r {
		pad[j] = row[reflectIndex(j-r, w)]
		pad[r+w+j] = row[reflectIndex(w+j, w)]
	}
	wt := bx.w[:r+1]
	for x := range m {
		c := pad[x : x+2*r+1]
		acc := wt[0] * int32(c[r])
		for t := 1; t <= r; t++ {
			acc += wt[t] * (int32(c[r-t]) + int32(c[r+t]))
		}
		m[x] = (acc + 1<<(blurHShift-1)) >> blurHShift
	}
}

// blurColumnsGo writes output row y from mid's rows, through acc.
func blurColumnsGo(mid, acc []int32, out []byte, y, h int, by *blurTaps) {
	w := len(out)
	acc = acc[:w]
	m0 := mid[y*w : (y+1)*w]
	w0 := by.w[0]
	for x := range acc {
		acc[x] = w0 * m0[x]
	}
	for t := 1; t <= by.r; t++ {
		a := mid[reflectIndex(y-t, h)*w:][:w]
		b := mid[reflectIndex(y+t, h)*w:][:w]
		wt := by.w[t]
		for x := range acc {
			acc[x] += wt * (a[x] + b[x])
		}
	}
	for x := range out {
		out[x] = byte((acc[x] + 1<<(blurVShift-1)) >> blurVShift)
	}
}

// AdjustSharpness is adjust_sharpness(img, f): torchvision blends each
// interior pixel with its 3x3 blur (weights 1/13 around and 5/13 at the
// centre, rounded to an integer) and leaves the border rows and columns
// (and images 2 pixels or fewer across) as they are. The blur's sum is an
// integer over 13, never at a half, so it is computed exactly; the blend
// c + (1-f)*(blur-c) takes torchvision's float32 steps.
func AdjustSharpness(p Planes, f float64, s *Scratch) {
	w, h := p.W, p.H
	if f == 1 || w <= 2 || h <= 2 {
		return
	}
	// dl[d+255] is d*(1-f) for d = blur - c: exact in float64, and
	// c + dl rounded once to float32, as torch's fused add_(…, alpha).
	var dl [511]float64
	alpha := float64(float32(1 - f))
	for d := range dl {
		dl[d] = float64(float64(d-255) * alpha)
	}
	prev, cur := s.bytes(0, w), s.bytes(1, w) // rows y-1 and y as they were
	for c := range 3 {
		sharpenPlane(p.Plane(c), w, h, alpha, prev, cur, &dl)
	}
}

// sharpenPlaneGo sharpens one plane's interior, keeping in prev and cur
// the rows above and at the one being written as they were.
func sharpenPlaneGo(pl []byte, w, h int, prev, cur []byte, dl *[511]float64) {
	copy(prev, pl[:w])
	copy(cur, pl[w:2*w])
	for y := 1; y < h-1; y++ {
		next := pl[(y+1)*w : (y+2)*w]
		sharpenRow(pl[y*w:(y+1)*w], prev, cur, next, dl)
		prev, cur = cur, prev
		copy(cur, next)
	}
}

// sharpenRow writes row's interior from the rows above, at and below it as
// they were.
func sharpenRow(row, up, at, down []byte, dl *[511]float64) {
	w := len(row)
	up, at, down = up[:w], at[:w], down[:w]
	for x := 1; x < w-1; x++ {
		c := int(at[x])
		n := int(up[x-1]) + int(up[x]) + int(up[x+1]) + int(at[x-1]) + 5*c + int(at[x+1]) +
			int(down[x-1]) + int(down[x]) + int(down[x+1])
		blur := (2*n + 13) / 26 // round(n/13), never a tie
		row[x] = clampTrunc(float32(float64(c) + dl[blur-c+255]))
	}
}
