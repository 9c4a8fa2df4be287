//go:build cgo

package cv

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include "cv.h"
*/
import "C"

import (
	"unsafe"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// HaveC: the kernels run cv.c's C, as the cost model prices them
// (pipeline/transform's YOLO geometry, pipeline/fn's yolo_random_hsv).
const HaveC = true

// cSIMD is the best vector path of cv.c's warp on this CPU: 0 none, 1
// AVX2 and FMA, 2 those and AVX-512F, 3 those and AVX-512BW and VBMI
// (HSV's 512-bit path from 2 on where the CPU has VBMI).
var cSIMD = int(C.stoker_cv_simd())

// warp is warpGo in C (cv.c): the same bytes, with AVX2 and FMA (and
// AVX-512F) where the CPU has them.
func warp(dst, src kernels.Planes, m [9]float32, persp bool, border uint8) {
	warpC(dst, src, m, persp, border, cSIMD)
}

// warpC is stoker_cv_warp at vector path simd (0 its scalar path).
func warpC(dst, src kernels.Planes, m [9]float32, persp bool, border uint8, simd int) {
	if dst.W*dst.H == 0 || src.W*src.H == 0 {
		warpGo(dst, src, m, persp, border)
		return
	}
	_ = dst.Pix[3*dst.W*dst.H-1]
	_ = src.Pix[3*src.W*src.H-1]
	C.stoker_cv_warp((*C.uint8_t)(unsafe.Pointer(&dst.Pix[0])), C.int(dst.W), C.int(dst.H),
		(*C.uint8_t)(unsafe.Pointer(&src.Pix[0])), C.int(src.W), C.int(src.H),
		(*C.float)(unsafe.Pointer(&m[0])), cbool(persp), C.int(border), C.int(simd))
}

// fmaExactC is stoker_cv_fma_exact: whether a*x + c is exactly a float64
// for every integer x in [0, n] (the tests check its claim).
func fmaExactC(a float32, n int, c float32) bool {
	return C.stoker_cv_fma_exact(C.float(a), C.int(n), C.float(c)) != 0
}

// cbool is b for C: 1 or 0.
func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// hsvPixels is hsvPixelsGo in C (cv.c): the same bytes, sixteen pixels at
// a time with AVX-512 VBMI, eight with AVX2, where the CPU has them.
func hsvPixels(p kernels.Planes, hue, sat, val *[256]uint8) { hsvC(p, hue, sat, val, cSIMD) }

// hsvC is stoker_cv_hsv at vector path simd (0 its scalar path; 2 is
// AVX2's on a CPU with AVX-512F but not VBMI).
func hsvC(p kernels.Planes, hue, sat, val *[256]uint8, simd int) {
	n := p.W * p.H
	if n == 0 {
		return
	}
	_ = p.Pix[3*n-1]
	var luts [3 * 256]uint8
	copy(luts[:256], hue[:])
	copy(luts[256:512], sat[:])
	copy(luts[512:], val[:])
	t := &hsvBackTables
	C.stoker_cv_hsv((*C.uint8_t)(unsafe.Pointer(&p.Pix[0])), C.size_t(n), (*C.uint8_t)(unsafe.Pointer(&luts[0])),
		(*C.int32_t)(unsafe.Pointer(&sdivTable[0])), (*C.int32_t)(unsafe.Pointer(&hdivTable[0])),
		(*C.float)(unsafe.Pointer(&t.frac[0])), (*C.uint8_t)(unsafe.Pointer(&t.sector[0])), (*C.float)(unsafe.Pointer(&t.over[0])), C.int(simd))
}

// resizeLinear is resizeLinearGo in C (cv.c): the same bytes.
func resizeLinear(dst, src kernels.Planes, tx, ty linearTaps) { resizeC(dst, src, tx, ty, cSIMD) }

// resizeC is stoker_cv_resize at vector path simd (0 its scalar path).
func resizeC(dst, src kernels.Planes, tx, ty linearTaps, simd int) {
	if dst.W*dst.H == 0 || src.W*src.H == 0 {
		resizeLinearGo(dst, src, tx, ty)
		return
	}
	_ = dst.Pix[3*dst.W*dst.H-1]
	_ = src.Pix[3*src.W*src.H-1]
	rows := make([]int32, 3*dst.W) // two rows' sums and the weights in pairs
	C.stoker_cv_resize((*C.uint8_t)(unsafe.Pointer(&dst.Pix[0])), C.int(dst.W), C.int(dst.H),
		(*C.uint8_t)(unsafe.Pointer(&src.Pix[0])), C.int(src.W), C.int(src.H),
		(*C.int32_t)(unsafe.Pointer(&tx.ofs[0])), (*C.int16_t)(unsafe.Pointer(&tx.w0[0])), (*C.int16_t)(unsafe.Pointer(&tx.w1[0])), C.int(tx.edge),
		(*C.int32_t)(unsafe.Pointer(&ty.ofs[0])), (*C.int16_t)(unsafe.Pointer(&ty.w0[0])), (*C.int16_t)(unsafe.Pointer(&ty.w1[0])),
		(*C.int32_t)(unsafe.Pointer(&rows[0])), C.int(simd))
}
