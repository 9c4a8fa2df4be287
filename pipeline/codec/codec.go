// Package codec is the pipeline's C codec (as Go's image/jpeg and
// image/png are Go's): the libjpeg-turbo decode of a JPEG's needed region
// at a DCT scale (turbo.c), with stoker's own Huffman decoders for
// baseline and progressive scans (huff.c, phuff.c), their decoder index
// and coefficient cache (huff.c, coefs.c) and the progressive-to-sequential
// transcode (transcode.c); the PNG and WebP decodes (formats.c, pngrows.c);
// and the resampler all of them write through (resize.c, passes.c):
// torch's uint8 resize kernels in fixed point, each view of a decode
// resampled, flipped and packed into the caller's buffer.
//
// A JPEG decode is DecodeViews on a Scratch: the file, its Header, the Job
// and its views' Geometry (box, clip, spans, output size, interpolation,
// flip), each view's place in the output buffer, and the Caches the decode
// uses and extends: the decoder index (pipeline/codec/index, plain Go) and
// the CoefCache, which also holds progressive files' sequential
// transcodes (coefcache.go, transcode.go). Underneath, Set writes the job
// into C memory, with the output buffer's length, which C checks again;
// Decode, DecodePNG and DecodeWebP run it. ParseHeader reads a file's
// format, size and JPEG coding without decoding a pixel. The libraries'
// versions (TurboVersions, JPEGLinked) and the SIMD level (SIMDBest) say
// what the bytes were made with.
//
// The package imports no ops and not the pipeline's root: the root's
// per-sample Decoder works out each view's Geometry from its transform and
// holds the caches it hands the decodes. Without cgo the package holds its
// Go-side names only (Available is false: no Scratch, and a CoefCache
// stays empty) and the pipeline decodes in Go.
package codec

import (
	"errors"

	"github.com/stoker-dev/stoker/pipeline/codec/index"
)

// MaxViews is the most views one decode makes (turbo.h's
// STOKER_MAX_VIEWS).
const MaxViews = 32

// Span is one axis of a resize as torch does it: the source pixels
// [Base, Base+In) are resized to Out pixels, of which [Off, Off+n) are
// kept (n: the view's OutW or OutH).
type Span struct {
	Base, In, Out, Off int
}

// Box is the region of the source, in source pixels, that maps onto a
// view's output (it chooses the DCT scale).
type Box struct {
	X, Y, W, H float64
}

// Clip is the rectangle [X0,X1) x [Y0,Y1) of source pixels a view's filter
// may read.
type Clip struct {
	X0, Y0, X1, Y1 int
}

// Geometry is one view of a decode: the source region it shows, the
// resize's spans, its output size, its filter and whether it is mirrored.
type Geometry struct {
	Box        Box
	Clip       Clip
	SX, SY     Span
	OutW, OutH int
	// Interp is the filter (0 bilinear, 1 nearest, 2 bicubic: the
	// kernels' Interpolation values); Antialias whether it widens when
	// downscaling (torch's antialias), which alone allows a DCT scale.
	Interp    int
	Antialias bool
	Flip      bool
}

// Scaling says which libjpeg DCT scales a decode may use.
type Scaling int

// The DCT scalings (turbo.h's STOKER_SCALE_*).
const (
	ScalePow2 Scaling = iota // 1/2, 1/4 or 1/8
	ScaleOff                 // full size only
	ScaleAny                 // any M/8
)

// Job is what a decode is asked besides its views: the source as its header
// declares it, the output layout, the bounds, and the knobs.
type Job struct {
	SrcW, SrcH, Comps int
	HWC               bool // interleaved HWC, else planar CHW
	Scaling           Scaling
	MaxScans          int   // progressive scans read at most
	MaxMemory         int64 // the most libjpeg's own allocations may hold (memlim.c); 0: no limit
	Knobs             Knobs
}

// Knobs are a decode's options for tests and benchmarks; zero is the
// default, and production decodes have no others.
type Knobs struct {
	Merged   bool // replicate chroma (libjpeg's merged upsampler), not fancy
	IFast    bool // JDCT_IFAST
	NoRegion bool // decode whole rows from the top: no crop, no skip
	LibHuff  bool // libjpeg's own Huffman decoder instead of huff.c's
	// SIMDMax sets the SIMD level: 0 the default (the best the CPU has,
	// AVX2 at most on Intel for jobs of one or two views: passes.c,
	// turbo.c); n > 0 level n, at most the CPU's best; -1 none.
	SIMDMax int
	IxPx    int // decoder index checkpoint spacing in pixels; 0: the default
	// ForceIndex, when set, is the decoder index every decode is given
	// instead of the Index's (an index of other bytes), and nothing is
	// learnt from it.
	ForceIndex []byte
}

// Caches are what decodes keep of the files they decode for later decodes
// of the same files (DecodeViews): each nil for none.
type Caches struct {
	Index *index.Index
	Coefs *CoefCache
	// AdmitNow admits the file to Coefs on this decode even where Index
	// says it was not seen before (a sample with copies to come: repeated
	// augmentation).
	AdmitNow bool
}

// ErrStopped is what a decode returns when its stop flag turned it back.
var ErrStopped = errors.New("codec: the decode was stopped")

// Stats is what a decode did, for tests, benchmarks and the decoder
// index's and coefficient cache's bookkeeping.
type Stats struct {
	ScaleM, Rows, Cols int
	SIMD               int  // 0 none, 1 SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512, 5 AVX-512 VBMI and VNNI
	RowSkew            int  // where decoded rows start, modulo 64 bytes
	Huff               bool // huff.c decoded the entropy-coded data
	IxState            int  // Ix*
	IxChanged          bool // the index gained checkpoints: copy it out
	IxLied             bool // a checkpoint not sure disagreed with the decoder
	IxBytes            int
	MCUs, Decoded      int64 // MCUs in the scan, entropy-decoded
	CkSeeks, RstSeeks  int   // jumps to a checkpoint, to a restart marker
	// MCUs inverse-transformed, of those copied from the coefficient
	// cache, and MCUs stored in it.
	MCUsWanted, CoefsHits, CoefsStored int64
	// A progressive file: phuff.c decoded its scans; their MCUs, and
	// those entropy-decoded.
	Prog                  bool
	ProgMCUs, ProgDecoded int64
	// LibPeak: the most libjpeg's own allocations held at once (memlim.c),
	// within the job's MaxMemory.
	LibPeak int64
}
