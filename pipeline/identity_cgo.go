//go:build cgo

package pipeline

import "github.com/stoker-dev/stoker/pipeline/codec"

// turboVersions are LIBJPEG_TURBO_VERSION_NUMBER (0 for a libjpeg that is
// not libjpeg-turbo) and JPEG_LIB_VERSION of the headers built against.
func turboVersions() (turbo, lib int) {
	return codec.TurboVersions()
}

// ResamplerSIMD is the SIMD stoker's own resampler (pipeline/codec's resize.c and passes.c) uses on this
// CPU: "ssse3" (both passes), "sse2" (the vertical pass) or "none".
// Informational, as Identity.SIMD: every level makes the same bytes.
func ResamplerSIMD() string { return [...]string{"none", "sse2", "ssse3"}[min(max(simdBest(), 0), 2)] }
