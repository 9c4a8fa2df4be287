//go:build cgo

package jpegenc

/*
#cgo LDFLAGS: -ljpeg
#include <stdlib.h>
#include "enc.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Options says how to encode.
type Options struct {
	Quality int // 1..100
	// HS, VS are the luma sampling factors (chroma is 1x1): 1,1 is 4:4:4,
	// 2,1 4:2:2, 2,2 4:2:0, 1,2 4:4:0, 4,1 4:1:1.
	HS, VS      int
	Progressive bool
	RestartRows int  // a restart marker every RestartRows MCU rows; 0: none
	RGB         bool // the RGB color space: no YCbCr transform
}

// Encode encodes pix (nc 1 gray or 3 RGB, interleaved, w*h*nc bytes) with
// libjpeg.
func Encode(pix []byte, w, h, nc int, o Options) ([]byte, error) {
	if len(pix) != w*h*nc || len(pix) == 0 || (nc != 1 && nc != 3) {
		return nil, fmt.Errorf("jpegenc: %d bytes for %dx%dx%d", len(pix), w, h, nc)
	}
	var n C.ulong
	buf := C.jpegenc_encode((*C.uchar)(unsafe.Pointer(&pix[0])), C.int(w), C.int(h), C.int(nc),
		C.int(o.Quality), C.int(o.HS), C.int(o.VS), cbool(o.Progressive), C.int(o.RestartRows), cbool(o.RGB), &n)
	if buf == nil {
		return nil, fmt.Errorf("jpegenc: libjpeg refused %dx%dx%d %+v", w, h, nc, o)
	}
	defer C.jpegenc_free(buf)
	return C.GoBytes(unsafe.Pointer(buf), C.int(n)), nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
