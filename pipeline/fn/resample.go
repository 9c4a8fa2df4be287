package fn

// Floating point in this file: as in pipeline's plan.go, every product
// that is added or subtracted is wrapped in float64(...), so that the
// compiler does not fuse it into a multiply-add: the weights must be the
// same doubles as torch's and turbo.c's on every machine.

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TorchAxis is one axis of torch's uint8 resize kernel (aten's
// UpSampleKernel.cpp: HelperInterpLinear, HelperInterpCubic and
// nearest_idx, with int16 weights): output i reads taps [start[i],
// start[i]+len(k[i])) of the Span's source pixels, weights in fixed point
// with prec fractional bits. resize.c's stoker_torch_coeffs computes the same.
type TorchAxis struct {
	Start []int
	K     [][]int16
	Prec  uint
}

// torchFilter is what one axis' weights are computed from.
type torchFilter struct {
	interp                   kernels.Interpolation
	aa                       bool
	scale, support, invscale float64
	nscale                   float32 // nearest: in/out, in single precision
	maxTaps, in              int
}

// torchSpanMax is resize.c's TORCH_SPAN_MAX: the longest Span whose every
// output's weights set the precision (past it, only the kept outputs').
const torchSpanMax = 65536

// NewTorchAxis computes the weights of outputs [s.off, s.off+s.n) of a
// resize of s.in pixels (the Span's, from 0) to s.out.
func NewTorchAxis(s Span, interp kernels.Interpolation, aa bool) TorchAxis {
	f := torchFilter{interp: interp, aa: aa, in: s.In}
	f.scale = float64(s.In) / float64(s.Out)
	taps := 2
	if interp == kernels.Bicubic {
		taps = 4
	}
	f.support, f.maxTaps, f.invscale = float64(taps)*0.5, taps, 1
	if interp == kernels.Nearest {
		f.maxTaps = 1
	} else if aa {
		if f.scale >= 1 {
			f.support = float64(float64(taps)*0.5) * f.scale
			f.invscale = 1 / f.scale
		}
		f.maxTaps = int(math.Ceil(f.support))*2 + 1
	}
	f.nscale = float32(s.In) / float32(s.Out)
	from, to := 0, s.Out
	if s.Out > torchSpanMax {
		from, to = s.Off, s.Off+s.N
	}
	ws := make([][]float64, s.N)
	x0s := make([]int, s.N)
	scratch := make([]float64, f.maxTaps)
	wmax := 0.0
	for i := from; i < to; i++ {
		keep := i >= s.Off && i < s.Off+s.N
		w := scratch
		if keep {
			w = make([]float64, f.maxTaps)
		}
		x0, n := f.weights(i, w, &wmax)
		if keep {
			ws[i-s.Off], x0s[i-s.Off] = w[:n], x0
		}
	}
	a := TorchAxis{Start: x0s, K: make([][]int16, s.N), Prec: torchPrecision(wmax)}
	for i, w := range ws {
		a.K[i] = a.quantize(i, w, s.In)
	}
	return a
}

// quantize puts output i's weights w in fixed point, rounded half away
// from zero as torch does, without the zero taps at either end (turbo.c
// drops them too: they add nothing).
func (a *TorchAxis) quantize(i int, w []float64, in int) []int16 {
	if len(w) == 0 { // no tap inside the image: cannot happen
		a.Start[i] = min(max(a.Start[i], 0), in-1)
		return []int16{int16(1 << a.Prec)}
	}
	q := make([]int16, len(w))
	first, last := -1, 0
	for j, v := range w {
		v = float64(v * float64(int(1)<<a.Prec))
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
	a.Start[i] += first
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
	if f.interp == kernels.Nearest {
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
	cub := f.interp == kernels.Bicubic
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
	case f.interp != kernels.Bicubic:
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

// sum is output i of the axis over the pixels px(j) of its taps: rounded,
// shifted back and clamped to 0..255, as torch's kernels do.
func (a *TorchAxis) Sum(i int, px func(j int) byte) byte {
	v := int32(1) << (a.Prec - 1)
	for j, k := range a.K[i] {
		v += int32(px(a.Start[i]+j)) * int32(k)
	}
	return byte(min(max(v>>a.Prec, 0), 255))
}
