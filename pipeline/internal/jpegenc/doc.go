// Package jpegenc is a libjpeg(-turbo) encoder for pipeline's tests: it
// writes the JPEG variants image/jpeg cannot (4:4:4, 4:2:2, 4:4:0, 4:1:1,
// progressive, restart markers, the RGB color space, gray with declared
// 2x2 sampling).
//
// It is test-only code: only pipeline's _test.go files import it, so no
// JPEG compressor is linked into the stoker binary (the decoder in
// package pipeline needs only libjpeg's decompressor). Encode exists in cgo
// builds only; without cgo the package is empty, as the tests that use it
// are cgo-only too.
package jpegenc
