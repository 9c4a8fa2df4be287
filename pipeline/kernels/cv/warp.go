package cv

import (
	"errors"
	"math"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// The warps are OpenCV 5's (imgproc/warp_kernels.simd.hpp, the kernels
// cv::warpAffine and cv::warpPerspective run for uint8 with INTER_LINEAR
// since 4.11, in place of the fixed-point remap of INTER_BITS=5 and
// INTER_REMAP_COEF_BITS=15): the inverse matrix in double, rounded to
// float; for output row y, float(y*M[1]) + M[2] (and the same for the
// other rows of M) in float; each pixel's source coordinate a fused
// multiply-add of that with M[0]*x (for a perspective, both divided by the
// third, in float); its floor the top-left source pixel and the rest the
// weights; the four pixels (the border value for those outside) blended in
// float by three fused multiply-adds, v0 = p00 + a*(p01-p00), v1 likewise,
// v0 + b*(v1-v0), rounded to nearest even and saturated. That is the code
// OpenCV dispatches on a CPU with AVX2 and FMA3 (the x86-64 machines the
// tests run on); a build of OpenCV without FMA rounds each product and
// may differ by one in rare pixels. The vector loop takes 16 pixels at a
// time (AVX2); the last W%16 of a row are OpenCV's scalar loop, whose
// coordinate x*M[0] + y*M[1] + M[2] GCC compiles (-mfma, contraction on)
// to fma(x, M[0], y*M[1]) + M[2], and whose blend it fuses as the vector
// code does.
const warpLanes = 16

// fma32 is the float32 fused multiply-add a*b + c, rounded once. The
// product of two float32 is exact in float64 and the sum of it and a
// float32 within the ranges here too, so the one rounding is to float32.
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// InvertAffine is cv::invertAffineTransform as cv::warpAffine computes it
// (in double) for a forward 2x3 matrix: the map from output to source.
func InvertAffine(m [6]float64) [6]float64 {
	d := float64(m[0]*m[4]) - float64(m[1]*m[3])
	if d != 0 {
		d = 1 / d
	}
	a11, a22 := float64(m[4]*d), float64(m[0]*d)
	m[0], m[4] = a11, a22
	m[1] *= -d
	m[3] *= -d
	b1 := float64(-m[0]*m[2]) - float64(m[1]*m[5])
	b2 := float64(-m[3]*m[2]) - float64(m[4]*m[5])
	m[2], m[5] = b1, b2
	return m
}

// InvertPerspective is cv::invert of a 3x3 double matrix as
// cv::warpPerspective calls it (DECOMP_LU, which for 3x3 is the adjugate
// over the determinant), row-major; a singular matrix gives zeros.
func InvertPerspective(s [9]float64) [9]float64 {
	at := func(i, j int) float64 { return s[3*i+j] }
	det := float64(at(0, 0)*(float64(at(1, 1)*at(2, 2))-float64(at(1, 2)*at(2, 1)))) -
		float64(at(0, 1)*(float64(at(1, 0)*at(2, 2))-float64(at(1, 2)*at(2, 0)))) +
		float64(at(0, 2)*(float64(at(1, 0)*at(2, 1))-float64(at(1, 1)*at(2, 0))))
	var t [9]float64
	if det == 0 {
		return t
	}
	d := 1 / det
	// t[k] = (s[a]*s[b] - s[c]*s[e]) * d, lapack.cpp's order.
	for k, q := range [9][4]int{
		{4, 8, 5, 7}, {2, 7, 1, 8}, {1, 5, 2, 4},
		{5, 6, 3, 8}, {0, 8, 2, 6}, {2, 3, 0, 5},
		{3, 7, 4, 6}, {1, 6, 0, 7}, {0, 4, 1, 3},
	} {
		t[k] = float64((float64(s[q[0]]*s[q[1]]) - float64(s[q[2]]*s[q[3]])) * d)
	}
	return t
}

// WarpAffine is cv2.warpAffine(src, m, dsize=(dst.W, dst.H),
// flags=INTER_LINEAR, borderMode=BORDER_CONSTANT, borderValue=border) on
// uint8, m the forward 2x3 matrix (as ultralytics passes M[:2], float32
// values widened to double).
func WarpAffine(dst, src kernels.Planes, m [6]float64, border uint8) {
	inv := InvertAffine(m)
	var f [9]float32
	for i := range inv {
		f[i] = float32(inv[i])
	}
	f[8] = 1
	warp(dst, src, f, false, border)
}

// WarpPerspective is cv2.warpPerspective(src, m, dsize=(dst.W, dst.H),
// flags=INTER_LINEAR, borderMode=BORDER_CONSTANT, borderValue=border) on
// uint8, m the forward 3x3 matrix, row-major.
func WarpPerspective(dst, src kernels.Planes, m [9]float64, border uint8) {
	inv := InvertPerspective(m)
	var f [9]float32
	for i := range inv {
		f[i] = float32(inv[i])
	}
	warp(dst, src, f, true, border)
}

// warpGo resamples with the inverse matrix m (float, row-major; its last
// row used only for a perspective): warp's Go version, the pure-Go build's
// and the reference of the C (cv.c) in the tests.
func warpGo(dst, src kernels.Planes, m [9]float32, persp bool, border uint8) {
	n, dn := src.W*src.H, dst.W*dst.H
	bv := float32(border)
	for y := 0; y < dst.H; y++ {
		fy := float32(y)
		mx := float32(fy*m[1]) + m[2]
		my := float32(fy*m[4]) + m[5]
		mw := float32(fy*m[7]) + m[8]
		tail := dst.W - dst.W%warpLanes
		for x := 0; x < dst.W; x++ {
			fx := float32(x)
			var sx, sy float32
			if x < tail {
				sx, sy = fma32(m[0], fx, mx), fma32(m[3], fx, my)
				if persp {
					w := fma32(m[6], fx, mw)
					sx, sy = sx/w, sy/w
				}
			} else {
				sx = fma32(fx, m[0], float32(fy*m[1])) + m[2]
				sy = fma32(fx, m[3], float32(fy*m[4])) + m[5]
				if persp {
					w := fma32(fx, m[6], float32(fy*m[7])) + m[8]
					sx, sy = sx/w, sy/w
				}
			}
			ix, iy := floorInt(sx), floorInt(sy)
			ax, ay := sx-float32(ix), sy-float32(iy)
			inside := uint32(ix) < uint32(src.W-1) && uint32(iy) < uint32(src.H-1)
			outside := uint32(ix+1) >= uint32(src.W+1) || uint32(iy+1) >= uint32(src.H+1)
			for c := 0; c < 3; c++ {
				sp := src.Pix[c*n : (c+1)*n]
				var p00, p01, p10, p11 float32
				switch {
				case inside:
					o := iy*src.W + ix
					p00, p01 = float32(sp[o]), float32(sp[o+1])
					p10, p11 = float32(sp[o+src.W]), float32(sp[o+src.W+1])
				case outside:
					p00, p01, p10, p11 = bv, bv, bv, bv
				default:
					p00, p01 = pixelOr(sp, src.W, src.H, ix, iy, bv), pixelOr(sp, src.W, src.H, ix+1, iy, bv)
					p10, p11 = pixelOr(sp, src.W, src.H, ix, iy+1, bv), pixelOr(sp, src.W, src.H, ix+1, iy+1, bv)
				}
				v0 := fma32(ax, p01-p00, p00)
				v1 := fma32(ax, p11-p10, p10)
				dst.Pix[c*dn+y*dst.W+x] = roundSat(fma32(ay, v1-v0, v0))
			}
		}
	}
}

// floorInt is v_floor: the floor as an int32, and math.MinInt32 (the
// conversion's "integer indefinite") for NaN, infinities and values past
// int32, so that such a coordinate falls outside the image as in OpenCV.
func floorInt(v float32) int {
	f := math.Floor(float64(v))
	if !(f >= math.MinInt32 && f <= math.MaxInt32) {
		return math.MinInt32
	}
	return int(int32(f))
}

// pixelOr is the pixel at (x, y), or bv outside the image.
func pixelOr(p []byte, w, h, x, y int, bv float32) float32 {
	if uint(x) < uint(w) && uint(y) < uint(h) {
		return float32(p[y*w+x])
	}
	return bv
}

// roundSat is v_round then a saturating pack to uint8: nearest, ties to
// even; NaN and values past int32 (cvtps2dq's 0x80000000) to 0.
func roundSat(v float32) uint8 {
	r := math.RoundToEven(float64(v))
	switch {
	case r > math.MaxInt32:
		return 0
	case r >= 255:
		return 255
	case r > 0:
		return uint8(r)
	}
	return 0
}

// The parity cases "warp_affine" and "warp_perspective": images[0] by m
// (6 numbers, 9) into dw x dh, the border border (114 when not given).
func init() {
	warp := func(n int) func(c *CaseIn) (CaseOut, error) {
		return func(c *CaseIn) (CaseOut, error) {
			var a struct {
				sizeArgs
				M      []float64 `json:"m"`
				Border *int      `json:"border"`
			}
			if err := c.Args(&a); err != nil {
				return CaseOut{}, err
			}
			if err := a.checkSize(); err != nil {
				return CaseOut{}, err
			}
			if len(a.M) != n {
				return CaseOut{}, errors.New("m: want 6 numbers for an affine, 9 for a perspective")
			}
			border := uint8(114)
			if a.Border != nil {
				border = uint8(*a.Border)
			}
			dst := newPlanes(a.DW, a.DH)
			if n == 6 {
				WarpAffine(dst, c.Images[0], [6]float64(a.M), border)
			} else {
				WarpPerspective(dst, c.Images[0], [9]float64(a.M), border)
			}
			return CaseOut{Images: []kernels.Planes{dst}}, nil
		}
	}
	addCase("warp_affine", 1, warp(6))
	addCase("warp_perspective", 1, warp(9))
}
