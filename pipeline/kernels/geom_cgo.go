//go:build cgo

package kernels

/*
#cgo CFLAGS: -O3
#include "geom.h"
*/
import "C"

import "unsafe"

// affineC is resampleAffine in C (geom.c), where the CPU has AVX2 and
// FMA; it reports false, having done nothing, elsewhere.
func affineC(p Planes, g *affineGrid, interp Interpolation, f [3]float32, noFill bool, s *Scratch) bool {
	if C.stoker_affine_ok() == 0 {
		return false
	}
	mode := C.STOKER_BILINEAR
	switch interp {
	case Nearest:
		mode = C.STOKER_NEAREST
	case Bicubic:
		mode = C.STOKER_BICUBIC
	}
	n := p.W * p.H
	rgbx := s.int32s(0, n)
	prm := s.float32s(0, 9) // in scratch, not on the stack: cgo would move it to the heap
	copy(prm, []float32{g.r0x, g.r1x, g.r2x, g.r0y, g.r1y, g.r2y, f[0], f[1], f[2]})
	C.stoker_affine((*C.uint32_t)(unsafe.Pointer(&rgbx[0])), (*C.uint8_t)(unsafe.Pointer(&p.Pix[0])), C.int(p.W), C.int(p.H),
		(*C.float)(unsafe.Pointer(&prm[0])), cbool(noFill), C.int(mode), (*C.int)(unsafe.Pointer(s.Stop)))
	return true
}

// affineCTo is affineC from p into o (of its own size: rotate's
// expand; o's bytes may be p's).
func affineCTo(p, o Planes, g *affineGrid, interp Interpolation, f [3]float32, noFill bool, s *Scratch) bool {
	if C.stoker_affine_ok() == 0 {
		return false
	}
	mode := C.STOKER_BILINEAR
	if interp == Nearest {
		mode = C.STOKER_NEAREST
	}
	rgbx := s.int32s(0, p.W*p.H)
	prm := s.float32s(0, 9)
	copy(prm, []float32{g.r0x, g.r1x, g.r2x, g.r0y, g.r1y, g.r2y, f[0], f[1], f[2]})
	C.stoker_affine_to((*C.uint32_t)(unsafe.Pointer(&rgbx[0])), (*C.uint8_t)(unsafe.Pointer(&p.Pix[0])), C.int(p.W), C.int(p.H),
		(*C.uint8_t)(unsafe.Pointer(&o.Pix[0])), C.int(o.W), C.int(o.H),
		(*C.float)(unsafe.Pointer(&prm[0])), cbool(noFill), C.int(mode), (*C.int)(unsafe.Pointer(s.Stop)))
	return true
}

// affineCAvailable reports whether affineC runs on this CPU.
func affineCAvailable() bool { return C.stoker_affine_ok() != 0 }

// reverseRows reverses each of rows rows of w bytes in b, in C with SSSE3
// where the CPU has it.
func reverseRows(b []byte, w, rows int) {
	if w < 16 || C.stoker_reverse_ok() == 0 {
		reverseRowsGo(b, w, rows)
		return
	}
	C.stoker_reverse_rows((*C.uint8_t)(unsafe.Pointer(&b[0])), C.int(w), C.int(rows))
}

// flipRows puts the h rows of w bytes of each of pix's three planes in the
// opposite order, in C.
func flipRows(pix []byte, w, h int) {
	C.stoker_flip_rows((*C.uint8_t)(unsafe.Pointer(&pix[0])), C.int(w), C.int(h), 3)
}

// cbool is b for C: 1 or 0.
func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
