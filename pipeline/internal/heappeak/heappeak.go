//go:build linux && cgo

package heappeak

/*
#cgo LDFLAGS: -lwebp
#include <stdlib.h>
#include <webp/encode.h>
#include "heap.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Peak runs f on one OS thread and returns the most C heap (glibc's
// blocks, at their usable size) that thread held beyond what it held
// when f started, and the blocks it took. f must do its C work on the
// calling goroutine (a cgo call runs on its thread).
func Peak(f func()) (peak, blocks int64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.heappeak_arm()
	f()
	var nb C.longlong
	p := C.heappeak_disarm(&nb)
	return int64(p), int64(nb)
}

// EncodeWebP encodes w x h pixels of nc (3: RGB, 4: RGBA) interleaved
// bytes with libwebp: lossy at quality (0..100), or lossless.
func EncodeWebP(pix []byte, w, h, nc int, quality float32, lossless bool) ([]byte, error) {
	if (nc != 3 && nc != 4) || w < 1 || h < 1 || len(pix) < w*h*nc {
		return nil, fmt.Errorf("heappeak: %d bytes for %dx%d of %d channels", len(pix), w, h, nc)
	}
	var out *C.uint8_t
	p, stride := (*C.uint8_t)(unsafe.Pointer(&pix[0])), C.int(w*nc)
	var n C.size_t
	switch {
	case nc == 3 && lossless:
		n = C.WebPEncodeLosslessRGB(p, C.int(w), C.int(h), stride, &out)
	case nc == 3:
		n = C.WebPEncodeRGB(p, C.int(w), C.int(h), stride, C.float(quality), &out)
	case lossless:
		n = C.WebPEncodeLosslessRGBA(p, C.int(w), C.int(h), stride, &out)
	default:
		n = C.WebPEncodeRGBA(p, C.int(w), C.int(h), stride, C.float(quality), &out)
	}
	if n == 0 || out == nil {
		return nil, fmt.Errorf("heappeak: libwebp could not encode %dx%d", w, h)
	}
	defer C.WebPFree(unsafe.Pointer(out))
	return C.GoBytes(unsafe.Pointer(out), C.int(n)), nil
}
