package pipeline

// Floating point in this file: as in plan.go, every product that is added
// or subtracted is wrapped in float64(...), so that the compiler does not
// fuse it into a multiply-add: the weights must be the same doubles as
// torch's and turbo.c's on every machine.

import (
	"image"
	"math"
)

// torchAxis is one axis of torch's uint8 resize kernel (aten's
// UpSampleKernel.cpp: HelperInterpLinear, HelperInterpCubic and
// nearest_idx, with int16 weights): output i reads taps [start[i],
// start[i]+len(k[i])) of the span's source pixels, weights in fixed point
// with prec fractional bits. resize.c's stoker_torch_coeffs computes the same.
type torchAxis struct {
	start []int
	k     [][]int16
	prec  uint
}

// torchFilter is what one axis' weights are computed from.
type torchFilter struct {
	interp                   Interpolation
	aa                       bool
	scale, support, invscale float64
	nscale                   float32 // nearest: in/out, in single precision
	maxTaps, in              int
}

// torchSpanMax is resize.c's TORCH_SPAN_MAX: the longest span whose every
// output's weights set the precision (past it, only the kept outputs').
const torchSpanMax = 65536

// newTorchAxis computes the weights of outputs [s.off, s.off+s.n) of a
// resize of s.in pixels (the span's, from 0) to s.out.
func newTorchAxis(s span, interp Interpolation, aa bool) torchAxis {
	f := torchFilter{interp: interp, aa: aa, in: s.in}
	f.scale = float64(s.in) / float64(s.out)
	taps := 2
	if interp == InterpBicubic {
		taps = 4
	}
	f.support, f.maxTaps, f.invscale = float64(taps)*0.5, taps, 1
	if interp == InterpNearest {
		f.maxTaps = 1
	} else if aa {
		if f.scale >= 1 {
			f.support = float64(float64(taps)*0.5) * f.scale
			f.invscale = 1 / f.scale
		}
		f.maxTaps = int(math.Ceil(f.support))*2 + 1
	}
	f.nscale = float32(s.in) / float32(s.out)
	from, to := 0, s.out
	if s.out > torchSpanMax {
		from, to = s.off, s.off+s.n
	}
	ws := make([][]float64, s.n)
	x0s := make([]int, s.n)
	scratch := make([]float64, f.maxTaps)
	wmax := 0.0
	for i := from; i < to; i++ {
		keep := i >= s.off && i < s.off+s.n
		w := scratch
		if keep {
			w = make([]float64, f.maxTaps)
		}
		x0, n := f.weights(i, w, &wmax)
		if keep {
			ws[i-s.off], x0s[i-s.off] = w[:n], x0
		}
	}
	a := torchAxis{start: x0s, k: make([][]int16, s.n), prec: torchPrecision(wmax)}
	for i, w := range ws {
		a.k[i] = a.quantize(i, w, s.in)
	}
	return a
}

// quantize puts output i's weights w in fixed point, rounded half away
// from zero as torch does, without the zero taps at either end (turbo.c
// drops them too: they add nothing).
func (a *torchAxis) quantize(i int, w []float64, in int) []int16 {
	if len(w) == 0 { // no tap inside the image: cannot happen
		a.start[i] = min(max(a.start[i], 0), in-1)
		return []int16{int16(1 << a.prec)}
	}
	q := make([]int16, len(w))
	first, last := -1, 0
	for j, v := range w {
		v = float64(v * float64(int(1)<<a.prec))
		if v < 0 {
			q[j] = int16(int(-0.5 + v))
		} else {
			q[j] = int16(int(0.5 + v))
		}
		if q[j] != 0 {
			if first < 0 {
				first = j
			}
			last = j
		}
	}
	if first < 0 {
		first, last = 0, 0
	}
	a.start[i] += first
	return q[first : last+1]
}

// torchPrecision is the fractional bits torch gives int16 weights whose
// largest is wmax: the most that keep it under 2^15.
func torchPrecision(wmax float64) uint {
	p := uint(0)
	for ; p < 22; p++ {
		if int(0.5+float64(wmax*float64(int(1)<<(p+1)))) >= 1<<15 {
			break
		}
	}
	return p
}

// weights computes output i's weights into w for taps [x0, x0+n), returns
// x0 and n, and raises *wmax to the largest weight as torch counts it (see
// resize.c's tweights).
func (f *torchFilter) weights(i int, w []float64, wmax *float64) (x0, n int) {
	if f.interp == InterpNearest {
		x0 = int(math.Floor(float64(float32(i) * f.nscale)))
		w[0], *wmax = 1, math.Max(*wmax, 1)
		return min(max(x0, 0), f.in-1), 1
	}
	if !f.aa {
		return f.weightsNoAA(i, w, wmax)
	}
	// torch's _compute_indices_min_size_weights_aa
	center := float64(f.scale * (float64(i) + 0.5))
	x0 = max(int(center-f.support+0.5), 0)
	n = min(int(center+f.support+0.5), f.in) - x0
	n = min(max(n, 0), f.maxTaps)
	total := 0.0
	for j := range n {
		x := float64((float64(j+x0) - center + 0.5) * f.invscale)
		w[j] = f.at(x)
		total += w[j]
	}
	if total != 0 {
		for j := range n {
			w[j] /= total
			*wmax = math.Max(*wmax, w[j])
		}
	}
	return x0, n
}

// weightsNoAA is torch's _compute_indices_min_size_weights: two or four
// taps from the source index (floored in single precision, as torch's
// guard_index_and_lambda does), a = -0.75 for bicubic; taps past the edge
// fold onto the edge pixel, and the largest weight is taken as they add up.
func (f *torchFilter) weightsNoAA(i int, w []float64, wmax *float64) (x0, n int) {
	cub := f.interp == InterpBicubic
	sup := 1
	if cub {
		sup = 2
	}
	real := float64(f.scale*(float64(i)+0.5)) - 0.5
	if !cub && real < 0 {
		real = 0
	}
	ii := min(int(math.Floor(float64(float32(real)))), f.in-1)
	lambda := min(max(real-float64(ii), 0), 1)
	umin := ii - sup + 1
	x0 = max(umin, 0)
	n = min(ii+sup+1, f.in) - x0
	n = min(max(n, 0), f.maxTaps)
	clear(w[:f.maxTaps])
	wi := 0
	for j := 0; j < f.maxTaps && n > 0; j++ {
		x := math.Abs(float64(j+1-sup) - lambda)
		var v float64
		switch {
		case !cub:
			v = max(1-x, 0)
		case x < 1:
			v = cubic1(x, -0.75)
		case x < 2:
			v = cubic2(x, -0.75)
		}
		if umin+j <= 0 {
			wi = 0
		} else if umin+j >= f.in-1 {
			wi = n - 1
		}
		w[wi] += v
		*wmax = math.Max(*wmax, w[wi])
		wi++
	}
	return x0, n
}

// at is the antialiased filters' kernel: the triangle, or Keys' cubic with
// a = -0.5.
func (f *torchFilter) at(x float64) float64 {
	x = math.Abs(x)
	switch {
	case f.interp != InterpBicubic:
		return max(1-x, 0)
	case x < 1:
		return cubic1(x, -0.5)
	case x < 2:
		return cubic2(x, -0.5)
	}
	return 0
}

// cubic1 and cubic2 are Keys' cubic convolution for |x| < 1 and
// 1 <= |x| < 2 (torch's cubic_convolution1 and 2, same operations).
func cubic1(x, a float64) float64 {
	return float64(float64(float64(float64((a+2)*x)-(a+3))*x)*x) + 1
}

func cubic2(x, a float64) float64 {
	v := float64(a*x) - float64(5*a)
	v = float64(v*x) + float64(8*a)
	return float64(v*x) - float64(4*a)
}

// resampleTorch is the reference path's resampling, every filter: torch's
// uint8 kernels, the horizontal pass first and rounded to 8 bits, then the
// vertical. src holds the spans' source
// pixels from its origin (the crop, or the whole image); the output is
// flipped if the plan says so and packed into out.
func resampleTorch(src *image.NRGBA, p *samplePlan, layout Layout, out []byte) {
	sx, sy := p.spans()
	ax, ay := newTorchAxis(sx, p.interp, p.antialias), newTorchAxis(sy, p.interp, p.antialias)
	w, h := p.outW, p.outH
	// The rows the vertical taps read, horizontally resampled.
	y0, y1 := math.MaxInt, 0
	for i, s := range ay.start {
		y0, y1 = min(y0, s), max(y1, s+len(ay.k[i]))
	}
	mid := make([]byte, (y1-y0)*w*3)
	for y := y0; y < y1; y++ {
		row := src.Pix[src.PixOffset(src.Rect.Min.X, src.Rect.Min.Y+y):]
		m := mid[(y-y0)*w*3:]
		for x := range w {
			for c := range 3 {
				m[3*x+c] = ax.sum(x, func(j int) byte { return row[4*j+c] })
			}
		}
	}
	plane := w * h
	for y := range h {
		for x := range w {
			ox := x
			if p.flip {
				ox = w - 1 - x
			}
			for c := range 3 {
				v := ay.sum(y, func(j int) byte { return mid[((j-y0)*w+x)*3+c] })
				if layout == HWC {
					out[3*(y*w+ox)+c] = v
				} else {
					out[c*plane+y*w+ox] = v
				}
			}
		}
	}
}

// sum is output i of the axis over the pixels px(j) of its taps: rounded,
// shifted back and clamped to 0..255, as torch's kernels do.
func (a *torchAxis) sum(i int, px func(j int) byte) byte {
	v := int32(1) << (a.prec - 1)
	for j, k := range a.k[i] {
		v += int32(px(a.start[i]+j)) * int32(k)
	}
	return byte(min(max(v>>a.prec, 0), 255))
}
