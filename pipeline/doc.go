// Package pipeline turns dataset files into augmented image samples.
//
// What goes in: a Dataset (an ImageFolder tree or WebDataset tar shards, on
// a local disk or in object storage: OpenSource), a Transform (torchvision-named ops, for example the "imagenet-train" preset)
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
// same coefficients as libjpeg's, byte for byte (tested). It decodes only
// the MCUs whose coefficients libjpeg uses (the crop's columns and rows),
// catching up from the nearest restart marker or, with an Index
// (WithIndex), from the nearest checkpoint of the file's decoder index: a
// by-product of earlier decodes (bit position and DC predictors every few
// MCUs of every row), so that from the second epoch on a crop costs about
// its share of the file's entropy decoding. Decoding starts only at
// checkpoints this process recorded or confirmed (reached from the scan's
// start, a restart marker or another such checkpoint, and found equal);
// an index loaded from disk (Index.Load) is evidence, not truth: each
// entry is checked against its file's bytes (positions inside the scan and
// increasing by at least 2 bits a block, DC predictors the quantization
// allows, the first checkpoint and those at restart markers where they
// must be), and each loaded checkpoint is compared as decodes pass it, but
// none is a starting point until then, since only a decode from the
// scan's start can vouch for its DC predictors. An entry that fails either
// is dropped with its whole file; the output is the same bytes whatever a
// file says. With a CoefCache
// (WithCoefCache), for datasets that fit in memory, the MCUs decoded are
// kept in a compact form and later crops copy them out instead of decoding
// them. PNG and WebP take their own C path (formats.c, pngrows.c: libpng,
// libwebp, and a row decoder for the common PNGs) into the same resampler,
// decoding only down to the last row the crop reads, with torchvision's
// decode_image pixels. Everything
// else (BMP, TIFF, GIF, CMYK JPEG, builds with CGO_ENABLED=0) goes through the pure-Go
// reference path: Go's image decoders (through
// github.com/disintegration/imaging), then torch's resize kernels in Go
// (resample.go), following torchvision's op order literally; it is what
// the fast path is tested against.
//
// Bad input is an error, never a crash: sizes are checked from the header
// against a pixel budget before any pixel is decoded, progressive JPEG scans
// are capped, and every decode runs under recover. Errors wrap the sentinels
// ErrCorrupt, ErrTooLarge and ErrUnsupported.
//
// Every parser of outside bytes has a fuzz target: FuzzDecode (image
// bytes, both decoders), FuzzHeader (the header parser the budget relies
// on, checked against Go's decoders), FuzzTransform (op lists), and in
// pipeline/dataset FuzzWebDataset (tar shards) and FuzzManifest (manifest
// files). go test runs their seeds and every input that ever failed (each
// package's testdata/fuzz) as ordinary tests; to fuzz one:
//
//	go test -run XXX -fuzz FuzzHeader -fuzztime 60s ./pipeline
//
// # Datasets
//
// The datasets are pipeline/dataset's (ImageFolder, WebDataset, COCO, YOLO,
// StoreDataset over a manifest, Mixed), re-exported here under their
// names: what a dataset may hold and what comes of it, and the datasets in
// object storage and their manifests, are told in that package's
// documentation.
package pipeline
