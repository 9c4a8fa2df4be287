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
// on, checked against Go's decoders), FuzzWebDataset (tar shards),
// FuzzManifest (manifest files) and FuzzTransform (op lists). go test runs their seeds and every input that
// ever failed (testdata/fuzz) as ordinary tests; to fuzz one:
//
//	go test -run XXX -fuzz FuzzHeader -fuzztime 60s ./pipeline
//
// # What a dataset may hold, and what comes of it
//
// A dataset directory is outside input too. Open decides once what is a
// sample (listed), what is not (skipped) and what makes the whole dataset
// unusable (refused: Open fails). A listed sample that cannot be made is a
// per-sample error (Dataset.Read, Decoder.Decode; Executor.Fill puts it in
// Batch.Errors): a bad file wraps a sentinel, an I/O error wraps the os
// error (fs.ErrNotExist, fs.ErrPermission: IsBadInput is false, it is the
// machine's problem). Per-sample messages, which travel to clients, name
// files relative to the dataset root, never by absolute path. Nothing here blocks: FIFOs are opened
// non-blocking and every read is of a known length. The tests are
// TestImageFolderBadFiles, TestWebDatasetBadShards, TestWebDatasetRejects,
// TestWebDatasetSparse, TestFillEpochBadFiles and TestBadInput
// (testdata/bad).
//
//	ImageFolder (root/<class>/...)        Open     Read / Decode
//	image bytes that are bad              listed   ErrCorrupt, ErrTooLarge or ErrUnsupported (testdata/bad)
//	file over the size cap                listed   ErrTooLarge, not read
//	symlink to a file inside the root     listed   read (the target; indexed at its size)
//	symlink leading out of the root,      listed   ErrUnsupported; the outside file is never opened
//	  or looping
//	dangling symlink                      listed   I/O error, fs.ErrNotExist
//	FIFO, socket or device named *.jpg,   skipped  -
//	  or a symlink to one
//	directory named *.jpg (x.jpg/)        skipped  - (images inside it are samples of its class, as
//	                                                 in torchvision's os.walk)
//	unreadable file (mode 000)            listed   I/O error, fs.ErrPermission (root reads it: its
//	                                                 capabilities override the mode)
//	unreadable class subdirectory         refused  (fs.ErrPermission; root reads it)
//	file removed after Open               listed   I/O error, fs.ErrNotExist
//	file grown or shrunk after Open       listed   ErrCorrupt ("changed since the dataset was
//	                                                 indexed"): the fingerprint promised the old bytes
//	FIFO or directory put in a file's     listed   ErrUnsupported ("not a regular file"), no blocking
//	  place after Open
//
//	WebDataset (dir/*.tar)                Open     Read / Decode
//	tar member bytes that are bad         listed   as for ImageFolder
//	corrupt tar, bad or missing .cls,     refused  (ErrCorrupt)
//	  a label >= 2^20 (classes are 0..max)
//	image member stored sparse            refused  (ErrUnsupported: its data section is not its
//	  (tar --sparse)                                 content, so it cannot be read in place)
//	member that is a symlink, hard link,  skipped  -
//	  directory or device
//	*.tar that is a FIFO or a directory   refused  (ErrUnsupported)
//	*.tar symlink leading out of the      refused  (ErrUnsupported)
//	  directory
//	unreadable shard                      refused  (fs.ErrPermission; root reads it)
//	.*.tar (macOS "._x.tar")              skipped  -
//	shard truncated after Open            listed   ErrCorrupt ("shorter than its size") for members
//	                                                 past the new end; the others read as before
//	shard appended to, or replaced by     listed   no change: members are read from the shard
//	  rename, after Open                             opened at Open, at their indexed offsets
//
// # Datasets in object storage, and manifests
//
// OpenSource opens a local path as Open does, or an s3://, gs:// or
// azblob:// prefix in either layout as a StoreDataset, read through a
// source.Store and a source.Ranges (Direct, or a cache with read-ahead:
// WithRanges). The listing follows the local rules (dot-names skipped,
// classes sorted, files in torchvision's os.walk order, top-level *.tar for
// WebDataset), and each shard is read once as a stream by the same tar
// parser as a local shard, so the same files give the same samples,
// labels, errors and fingerprint wherever they are (a class without an
// image, which a store shows as a "class/" marker or other files alone, is
// refused in both).
//
// A Manifest (stoker index: IndexStore, IndexDir) records all of that once:
// objects with their ETag or generation (size and modification time where
// there is none) and samples as byte ranges, so a server starts without a
// listing. It is kept beside the data as ROOT/.stoker/manifest (ManifestName,
// which no listing takes for data) or wherever WithManifest names. Its
// format is in manifest_file.go. Versions are not in the fingerprint;
// every read checks them:
//
//	Manifest                              OpenSource  Read
//	none (beside the data, none named)    lists and   -
//	                                      scans, logs
//	                                      the time
//	named, missing                        error       -
//	corrupt, truncated, another version,  error       - (the error names the file; a server never
//	  over its size or ratio limits                     rebuilds one: run stoker index)
//	named apart from the data, made of    error       -
//	  another source (root differs)
//	beside the data, the data moved       used        objects checked as ever
//	  (a directory mounted elsewhere)
//	more than half of 32 objects looked   error: stale -
//	  up gone or changed
//	some of them gone or changed          warning     -
//	object replaced or removed after      -           ErrCorrupt and source.ErrChanged, naming it
//	  indexing (size, ETag, generation,                 and saying to run stoker index again
//	  or mtime differs; a store's object
//	  without a version: its SHA-256)
//	a shard sample whose tar header       -           ErrCorrupt and ErrManifest, naming it
//	  is not the member's (name, size)
//	an ImageFolder label that is not      error       -
//	  its key's class folder
//	sample over the size cap              -           ErrTooLarge, not read
//	store down after its retries,         -           source.ErrUnavailable, source.ErrDenied or
//	  credentials refused, or an answer                 source.ErrProtocol: source.IsStoreFault,
//	  outside the store's protocol                      the store's fault, not
//	                                                    the sample's: Fill fails the whole batch,
//	                                                    never pads or drops it
package pipeline
