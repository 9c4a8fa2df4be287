//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#include "kernels.h"
*/
import "C"

import "unsafe"

// kernelsSIMD is the SIMD level kernels.c and kernels_color.c use: the
// best this CPU has (0 none, 1 SSE2, 2 AVX2, 3 AVX-512). The blur has every
// level; the colour kernels run in C with AVX2 (saturation and hue with
// AVX-512 too) and in Go below it. Tests compare every level with the Go
// versions (kernels_cgo_test.go).
var kernelsSIMD = int(C.stoker_kernels_simd())

// The kernels' inner loops, in C where it pays: the same bytes as their Go
// versions (the ...Go functions).

func blurPlanes(p Planes, bx, by *blurTaps, s *Scratch) { blurPlanesC(p, bx, by, s, kernelsSIMD) }

// blurPlanesC is stoker_blur at a given SIMD level.
func blurPlanesC(p Planes, bx, by *blurTaps, s *Scratch, simd int) {
	w, h := p.W, p.H
	mid := s.bytes(1, 2*w*h)
	pad := s.bytes(2, 2*int(C.stoker_blur_pad(C.int(w), C.int(bx.r))))
	ints := s.int32s(1, int(C.stoker_blur_ints(C.int(bx.r), C.int(by.r))))
	C.stoker_blur(u8(p.Pix), C.int(w), C.int(h),
		(*C.int32_t)(&bx.w[0]), C.int(bx.r), (*C.int32_t)(&by.w[0]), C.int(by.r),
		(*C.int16_t)(unsafe.Pointer(&mid[0])), (*C.int16_t)(unsafe.Pointer(&pad[0])),
		(*C.int32_t)(&ints[0]), C.int(simd), s.cstop())
}

// cstop is the image's abandoned flag, Stop, for C (NULL: none).
func (s *Scratch) cstop() *C.int { return (*C.int)(unsafe.Pointer(s.Stop)) }

// u8 is b's first byte for C; b is not empty.
func u8(b []byte) *C.uint8_t { return (*C.uint8_t)(&b[0]) }

// lutVBMI is whether lookup runs stoker_lut_vbmi: the CPU has AVX-512
// VBMI, whose byte permutes look up 64 bytes at a time in a 256-byte
// table held in four registers.
var lutVBMI = C.stoker_cpu_vbmi() != 0

// lookup maps every byte of pix through lut: applyLUT, or with AVX-512
// VBMI where the CPU has it.
func lookup(pix []byte, lut *[256]byte) {
	if !lutVBMI || len(pix) < 64 {
		applyLUT(pix, lut)
		return
	}
	lookupVBMI(pix, lut)
}

// lookupVBMI is lookup with AVX-512 VBMI; the CPU must have it.
func lookupVBMI(pix []byte, lut *[256]byte) {
	C.stoker_lut_vbmi(u8(pix), C.int(len(pix)), *(*C.stoker_lut)(unsafe.Pointer(lut)))
}

// blendConst is blendConstGo. Its table is exact by construction, so where
// the CPU can look a table up 64 bytes at a time (VBMI) that is the
// fastest; with AVX2 alone, the float32 sum where one gives the table's
// bytes, else the float64 one.
func blendConst(pix []byte, ratio float32, c float64) {
	if kernelsSIMD < 2 && !lutVBMI {
		blendConstGo(pix, ratio, c)
		return
	}
	var lut [256]byte
	blendConstLUT(&lut, ratio, c)
	if lutVBMI {
		lookup(pix, &lut)
		return
	}
	if c32, ok := blendConst32(&lut, ratio, c); ok {
		blendConstC32(pix, ratio, c32)
		return
	}
	blendConstC64(pix, ratio, c)
}

// blendConstC32 and blendConstC64 are blendConst's two sums with AVX2:
// float32 (where blendConst32 found a c32) and float64.
func blendConstC32(pix []byte, ratio, c32 float32) {
	C.stoker_blend_const32_avx2(u8(pix), C.int(len(pix)), C.float(ratio), C.float(c32))
}

func blendConstC64(pix []byte, ratio float32, c float64) {
	C.stoker_blend_const_avx2(u8(pix), C.int(len(pix)), C.float(ratio), C.double(c))
}

func saturate(r, g, b []byte, ratio float32, alpha float64) {
	saturateC(kernelsSIMD, r, g, b, ratio, alpha)
}

// saturateC is saturate at a SIMD level the CPU has: 3 AVX-512, 2 AVX2,
// below that Go.
func saturateC(level int, r, g, b []byte, ratio float32, alpha float64) {
	switch {
	case level >= 3:
		C.stoker_saturate_avx512(u8(r), u8(g), u8(b), C.int(len(r)), C.float(ratio), C.double(alpha))
	case level == 2:
		C.stoker_saturate_avx2(u8(r), u8(g), u8(b), C.int(len(r)), C.float(ratio), C.double(alpha))
	default:
		saturateGo(r, g, b, ratio, alpha)
	}
}

func grayPlanes(r, g, b []byte) {
	if kernelsSIMD < 2 {
		grayPlanesGo(r, g, b)
		return
	}
	C.stoker_gray_avx2(u8(r), u8(g), u8(b), C.int(len(r)))
}

func graySum(r, g, b []byte) int64 {
	if kernelsSIMD < 2 {
		return graySumGo(r, g, b)
	}
	return int64(C.stoker_gray_sum_avx2(u8(r), u8(g), u8(b), C.int(len(r))))
}

func hueRotate(r, g, b []byte, shift int32) { hueRotateC(kernelsSIMD, r, g, b, shift) }

// hueRotateC is hueRotate at a SIMD level the CPU has, as saturateC.
func hueRotateC(level int, r, g, b []byte, shift int32) {
	switch {
	case level >= 3:
		C.stoker_hue_avx512(u8(r), u8(g), u8(b), C.int(len(r)), C.int32_t(shift))
	case level == 2:
		C.stoker_hue_avx2(u8(r), u8(g), u8(b), C.int(len(r)), C.int32_t(shift))
	default:
		hueRotateGo(r, g, b, shift)
	}
}

func sharpenPlane(pl []byte, w, h int, alpha float64, prev, cur []byte, dl *[511]float64) {
	if kernelsSIMD < 2 {
		sharpenPlaneGo(pl, w, h, prev, cur, dl)
		return
	}
	C.stoker_sharpen_avx2(u8(pl), C.int(w), C.int(h), C.double(alpha), u8(prev), u8(cur))
}

func xorBytes(pix []byte, m byte) {
	if kernelsSIMD < 2 {
		xorBytesGo(pix, m)
		return
	}
	C.stoker_xor_avx2(u8(pix), C.int(len(pix)), C.uint8_t(m))
}

func andBytes(pix []byte, m byte) {
	if kernelsSIMD < 2 {
		andBytesGo(pix, m)
		return
	}
	C.stoker_and_avx2(u8(pix), C.int(len(pix)), C.uint8_t(m))
}

func minMax(pl []byte) (lo, hi byte) {
	if kernelsSIMD < 2 {
		return minMaxGo(pl)
	}
	m := C.stoker_minmax_avx2(u8(pl), C.int(len(pl)))
	return byte(m), byte(m >> 8)
}

func solarizeBytes(pix []byte, k int) {
	if kernelsSIMD < 2 {
		solarizeBytesGo(pix, k)
		return
	}
	C.stoker_solarize_avx2(u8(pix), C.int(len(pix)), C.int(k))
}

func addBelow(pix []byte, k, a int) {
	if kernelsSIMD < 2 {
		addBelowGo(pix, k, a)
		return
	}
	C.stoker_add_below_avx2(u8(pix), C.int(len(pix)), C.int(k), C.int(a))
}
