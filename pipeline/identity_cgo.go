//go:build cgo

package pipeline

/*
#include <stdio.h>
#include <jpeglib.h>

#ifndef LIBJPEG_TURBO_VERSION_NUMBER
#define LIBJPEG_TURBO_VERSION_NUMBER 0
#endif

static int stoker_turbo_version(void) { return LIBJPEG_TURBO_VERSION_NUMBER; }
static int stoker_jpeg_lib_version(void) { return JPEG_LIB_VERSION; }
*/
import "C"

// turboVersions are LIBJPEG_TURBO_VERSION_NUMBER (0 for a libjpeg that is
// not libjpeg-turbo) and JPEG_LIB_VERSION of the headers built against.
func turboVersions() (turbo, lib int) {
	return int(C.stoker_turbo_version()), int(C.stoker_jpeg_lib_version())
}

// ResamplerSIMD is the SIMD stoker's own resampler (turbo.c) uses on this
// CPU: "ssse3" (both passes), "sse2" (the vertical pass) or "none".
// Informational, as Identity.SIMD: every level makes the same bytes.
func ResamplerSIMD() string { return [...]string{"none", "sse2", "ssse3"}[min(max(simdBest(), 0), 2)] }
