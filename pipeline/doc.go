// Package pipeline turns dataset files into augmented image samples.
//
// What goes in: a Dataset (an ImageFolder tree or WebDataset tar shards), a
// Transform (torchvision-named ops, for example the "imagenet-train" preset)
// and a Key (seed, epoch, sample index) per sample.
//
// What comes out: for each sample, Transform.SampleBytes() bytes written into
// the caller's buffer: uint8 pixels, C=3 (RGB), row-major, CHW by default or
// HWC on request (float32 little-endian instead of uint8 when the transform
// ends in Normalize). Batches pack samples back to back: [B, C, H, W].
//
// Every random choice (crop box, flip, jitter) comes from a counter-based RNG
// keyed by (seed, epoch, sample index), so a sample is the same bytes on any
// machine, in any order, on any goroutine.
//
// JPEG goes through libjpeg-turbo (cgo) on the fast path: only the crop's
// region is decoded, at a DCT scale when the crop is at least twice the output,
// and crop, resize, flip and packing happen in one C call into the caller's
// buffer with per-Decoder scratch and no per-image Go allocation. For
// baseline files the Huffman stage (most of the time on high-quality photos)
// is our own (huff.c), installed through libjpeg's entropy-decoder hook: it
// decodes a code and its coefficient in one table lookup, and yields the
// same coefficients as libjpeg's, byte for byte (tested). Everything
// else (PNG, CMYK JPEG, builds with CGO_ENABLED=0) goes through the pure-Go
// reference path built on github.com/disintegration/imaging, which follows
// torchvision's op order literally and is what the fast path is tested
// against.
//
// Bad input is an error, never a crash: sizes are checked from the header
// against a pixel budget before any pixel is decoded, progressive JPEG scans
// are capped, and every decode runs under recover. Errors wrap the sentinels
// ErrCorrupt, ErrTooLarge and ErrUnsupported.
package pipeline
