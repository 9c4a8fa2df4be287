//go:build cgo

package codec

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>
#include "turbo.h"
#include "huff.h"
#include "transcode.h"

#ifndef LIBJPEG_TURBO_VERSION_NUMBER
#define LIBJPEG_TURBO_VERSION_NUMBER 0
#endif

static int stoker_turbo_version(void) { return LIBJPEG_TURBO_VERSION_NUMBER; }
static int stoker_jpeg_lib_version(void) { return JPEG_LIB_VERSION; }
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// Available says the C codec is built in (cgo); without cgo this package
// holds its Go-side names only and the pipeline decodes in Go.
const Available = true

// Code is a decode's result (turbo.h's STOKER_*).
type Code int

// The results of Scratch's decodes.
const (
	OK          Code = C.STOKER_OK
	Corrupt     Code = C.STOKER_CORRUPT
	TooLarge    Code = C.STOKER_TOO_LARGE
	Unsupported Code = C.STOKER_UNSUPPORTED
	// IndexBad: the decoder index given disagreed with the file as it was
	// decoded: the output is not to be trusted; decode again without it.
	IndexBad Code = C.STOKER_INDEX_BAD
)

// What a decode did with the decoder index (Stats.IxState; turbo.h's
// STOKER_IX_*).
const (
	IxNone  = C.STOKER_IX_NONE  // none asked for, or the file cannot have one
	IxFresh = C.STOKER_IX_FRESH // none given: an empty one, filled as decoded
	IxUsed  = C.STOKER_IX_USED  // the one given, extended as decoded
	IxStale = C.STOKER_IX_STALE // the one given does not fit the file
	IxBad   = C.STOKER_IX_BAD   // the one given has a checkpoint that cannot be right
)

// Scratch is one decoder's C scratch: a reused libjpeg decompress object
// and error manager, filter tables and row buffers, all malloc'd in C and
// grown as needed, so that a decode allocates nothing in Go. Its job lives
// in C memory too (Set writes it there): a decode call passes no Go struct.
// Not safe for concurrent use.
type Scratch struct {
	t       *C.stoker_turbo
	job     *C.stoker_job
	cleanup runtime.Cleanup
	// tag is CoefCache.id's scratch.
	tag [16]byte
}

// NewScratch makes a Scratch; dropped without Free, it still frees its C
// memory once unreachable.
func NewScratch() (*Scratch, error) {
	t := C.stoker_new()
	if t == nil {
		return nil, fmt.Errorf("%w: out of memory for jpeg decoder scratch", errs.TooLarge)
	}
	s := &Scratch{t: t, job: C.stoker_job_of(t)}
	s.cleanup = runtime.AddCleanup(s, func(t *C.stoker_turbo) { C.stoker_free(t) }, t)
	return s, nil
}

// Free releases the scratch; it is idempotent.
func (s *Scratch) Free() {
	if s == nil || s.t == nil {
		return
	}
	s.cleanup.Stop()
	C.stoker_free(s.t)
	s.t, s.job = nil, nil
}

// ResamplerBytes is the C memory the scratch's resampler keeps between
// decodes (stoker_resampler_bytes): its filters and rows, grown to the
// largest a decode asked of them; 0 for a freed scratch.
func (s *Scratch) ResamplerBytes() int64 {
	if s == nil || s.t == nil {
		return 0
	}
	return int64(C.stoker_resampler_bytes(s.t))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Set writes a decode's job into C: each view's geometry and where its
// 3*OutW*OutH bytes go (offs, in an output buffer of outLen bytes, which C
// checks again), and the job's source, layout, bounds and knobs. The
// decoder index and the coefficient cache are off until SetIndex and
// SetCoefs say otherwise.
func (s *Scratch) Set(j *Job, gs []Geometry, offs []int, outLen int) {
	c := s.job
	c.out_len = C.longlong(outLen)
	c.nviews = C.int(len(gs))
	for i := range gs {
		g, v := &gs[i], &c.views[i]
		v.bx, v.by, v.bw, v.bh = C.double(g.Box.X), C.double(g.Box.Y), C.double(g.Box.W), C.double(g.Box.H)
		v.x0, v.y0, v.x1, v.y1 = C.int(g.Clip.X0), C.int(g.Clip.Y0), C.int(g.Clip.X1), C.int(g.Clip.Y1)
		v.out_w, v.out_h = C.int(g.OutW), C.int(g.OutH)
		v.interp, v.antialias = C.int(g.Interp), cbool(g.Antialias)
		v.sx = C.stoker_span{base: C.int(g.SX.Base), in: C.int(g.SX.In), out: C.int(g.SX.Out), off: C.int(g.SX.Off)}
		v.sy = C.stoker_span{base: C.int(g.SY.Base), in: C.int(g.SY.In), out: C.int(g.SY.Out), off: C.int(g.SY.Off)}
		v.flip = cbool(g.Flip)
		v.out_off = C.longlong(offs[i])
	}
	c.src_w, c.src_h, c.comps = C.int(j.SrcW), C.int(j.SrcH), C.int(j.Comps)
	c.hwc = cbool(j.HWC)
	switch j.Scaling {
	case ScaleOff:
		c.scaling = C.STOKER_SCALE_OFF
	case ScaleAny:
		c.scaling = C.STOKER_SCALE_ANY
	default:
		c.scaling = C.STOKER_SCALE_POW2
	}
	c.max_scans = C.int(j.MaxScans)
	c.max_memory = C.longlong(j.MaxMemory)
	k := &j.Knobs
	c.fancy, c.ifast, c.no_region, c.simd_max = cbool(!k.Merged), cbool(k.IFast), cbool(k.NoRegion), C.int(k.SIMDMax)
	c.libjpeg_huff = cbool(k.LibHuff)
	c.ix_px = C.int(k.IxPx)
	c.index, c.coefs, c.coefs_room, c.coefs_only = 0, nil, 0, 0
}

// SetIndex says whether the next decode keeps a decoder index (baseline
// files through huff.c).
func (s *Scratch) SetIndex(on bool) { s.job.index = cbool(on) }

// SetCoefs gives the next decodes the coefficient-cache entry p (coefsNew;
// nil: none) and the bytes they may add to it; only says every MCU is to
// come from it (a progressive file's transcode).
func (s *Scratch) SetCoefs(p unsafe.Pointer, room int64, only bool) {
	s.job.coefs, s.job.coefs_room, s.job.coefs_only = p, C.longlong(room), cbool(only)
}

// Decode runs the JPEG decode of the job Set wrote on data into out, with
// the decoder index blob (nil: none); stop (nil: none) is the sample's
// abandoned flag, polled as it goes.
func (s *Scratch) Decode(data, out, blob []byte, stop *int32) Code {
	var ip *C.uchar
	if len(blob) > 0 {
		ip = (*C.uchar)(unsafe.Pointer(&blob[0]))
	}
	rc := C.stoker_decode(s.t, (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)), (*C.uchar)(unsafe.Pointer(&out[0])), ip, C.size_t(len(blob)),
		(*C.int)(unsafe.Pointer(stop)))
	runtime.KeepAlive(s) // the cleanup must not free s.t during the call
	return Code(rc)
}

// DecodePNG decodes a PNG (through pngrows.c or libpng) per the job into
// out, as Decode does a JPEG.
func (s *Scratch) DecodePNG(data, out []byte, stop *int32) Code {
	rc := C.stoker_decode_png(s.t, (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)), (*C.uchar)(unsafe.Pointer(&out[0])), (*C.int)(unsafe.Pointer(stop)))
	runtime.KeepAlive(s)
	return Code(rc)
}

// DecodeWebP decodes a WebP through libwebp per the job into out.
func (s *Scratch) DecodeWebP(data, out []byte, stop *int32) Code {
	rc := C.stoker_decode_webp(s.t, (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)), (*C.uchar)(unsafe.Pointer(&out[0])), (*C.int)(unsafe.Pointer(stop)))
	runtime.KeepAlive(s)
	return Code(rc)
}

// Canvas resizes a RandomZoomOut's canvas per the job's one view
// (formats.c's stoker_canvas): the view's source is a crop of a canvas of
// fill on which the w x h image src (interleaved when srcHWC, else three
// planes) lies at (left, top) of the crop, the crop's columns reversed
// first when mirror.
func (s *Scratch) Canvas(src []byte, w, h int, srcHWC bool, left, top int, mirror bool, fill [3]byte, out []byte) Code {
	cf := [3]C.uchar{C.uchar(fill[0]), C.uchar(fill[1]), C.uchar(fill[2])}
	rc := C.stoker_canvas(s.t, (*C.uchar)(unsafe.Pointer(&src[0])), C.int(w), C.int(h), cbool(srcHWC),
		C.int(left), C.int(top), cbool(mirror), &cf[0], (*C.uchar)(unsafe.Pointer(&out[0])))
	runtime.KeepAlive(s)
	return Code(rc)
}

// Err is the error of a decode's result rc, with its message.
func (s *Scratch) Err(rc Code) error {
	switch rc {
	case OK:
		return nil
	case TooLarge:
		return fmt.Errorf("%w: %s", errs.TooLarge, C.GoString(C.stoker_msg(s.t)))
	case Unsupported:
		return fmt.Errorf("%w: %s", errs.Unsupported, C.GoString(C.stoker_msg(s.t)))
	default:
		return fmt.Errorf("%w: %s", errs.Corrupt, C.GoString(C.stoker_msg(s.t)))
	}
}

// IndexCopy copies the last decode's decoder index (Stats.IxBytes bytes)
// to dst and returns how many of its known checkpoints are not sure.
func (s *Scratch) IndexCopy(dst []byte) int {
	return int(C.stoker_index_copy(s.t, (*C.uchar)(unsafe.Pointer(&dst[0]))))
}

// Stats is what the last decode did, as the C job reports it back.
func (s *Scratch) Stats() Stats {
	if s == nil || s.job == nil {
		return Stats{}
	}
	j := s.job
	return Stats{ScaleM: int(j.scale_m), Rows: int(j.rows_decoded), Cols: int(j.cols_decoded), SIMD: int(j.simd_used), RowSkew: int(j.row_skew), Huff: j.huff_used != 0,
		IxState: int(j.ix_state), IxChanged: j.ix_changed != 0, IxLied: j.ix_lied != 0, IxBytes: int(j.ix_bytes),
		MCUs: int64(j.mcus_total), Decoded: int64(j.mcus_decoded), CkSeeks: int(j.ck_seeks), RstSeeks: int(j.rst_seeks),
		MCUsWanted: int64(j.mcus_wanted), CoefsHits: int64(j.coefs_hits), CoefsStored: int64(j.coefs_stored),
		Prog: j.prog_used != 0, ProgMCUs: int64(j.prog_total), ProgDecoded: int64(j.prog_decoded), LibPeak: int64(j.lib_peak)}
}

// The coefficient cache's entries are C memory (coefs.c): coefsNew makes
// an empty one (nil when out of memory), coefsFree frees it, coefsBytes is
// the memory it holds and coefsMCUs the MCUs stored in it.
func coefsNew() unsafe.Pointer          { return unsafe.Pointer(C.stoker_coefs_new()) }
func coefsFree(p unsafe.Pointer)        { C.stoker_coefs_free((*C.stoker_coefs)(p)) }
func coefsBytes(p unsafe.Pointer) int64 { return int64(C.stoker_coefs_bytes((*C.stoker_coefs)(p))) }
func coefsMCUs(p unsafe.Pointer) int64  { return int64((*C.stoker_coefs)(p).nmcu) }

// coefsForm is the form coefs_put stores blocks in (64 coefficients
// each, natural order) at SIMD level simd (the best the CPU has at most):
// for tests, that every level makes the same bytes.
func coefsForm(blocks []int16, simd int) []byte {
	n := len(blocks) / 64
	if n == 0 {
		return nil
	}
	out := make([]byte, n*(2+8+63*2+8))
	l := C.stoker_coefs_form((*C.JCOEF)(unsafe.Pointer(&blocks[0])), C.int(n), C.int(simd), (*C.uint8_t)(unsafe.Pointer(&out[0])))
	return out[:l]
}

// SIMDBest is the best SIMD level the resampler uses on this CPU (0 none,
// 1 SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512, 5 AVX-512 VBMI and VNNI).
func SIMDBest() int { return int(C.stoker_simd_best()) }

// SIMDDefault is the level decodes of one or two views use unless
// Knobs.SIMDMax says otherwise: SIMDBest, but AVX2 (3) at most on Intel
// CPUs (passes.c). Jobs of three views or more use SIMDBest (turbo.c).
func SIMDDefault() int { return int(C.stoker_simd_default()) }

// TurboVersions are LIBJPEG_TURBO_VERSION_NUMBER (0 for a libjpeg that is
// not libjpeg-turbo) and JPEG_LIB_VERSION of the headers built against.
func TurboVersions() (turbo, lib int) {
	return int(C.stoker_turbo_version()), int(C.stoker_jpeg_lib_version())
}

// tcCode is a transcode's result (transcode.h's STOKER_TC_*).
type tcCode int

// The results of transcodeToCoefs.
const (
	tcOK      tcCode = C.STOKER_TC_OK
	tcStopped tcCode = C.STOKER_TC_STOPPED // the sample's work was abandoned
)

// transcodeToCoefs reads the progressive JPEG data whole and stores in the
// empty coefficient-cache entry p (coefsNew) the MCUs of the sequential
// JPEG with the same coefficients (transcode.c), within room bytes;
// libjpeg may allocate at most maxMemory bytes and read maxScans scans,
// and stops when *stop (nil: none) turns nonzero. On anything but tcOK p
// may hold some MCUs (free it), and the string says why. peak is the most
// libjpeg's own allocations held (memlim.c's count).
func transcodeToCoefs(data []byte, maxScans int, maxMemory int64, stop *int32, p unsafe.Pointer, room int64) (rc tcCode, why string, peak int64) {
	var msg [256]C.char
	var lp C.longlong
	rc = tcCode(C.stoker_transcode((*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)),
		C.int(maxScans), C.longlong(maxMemory), (*C.int)(unsafe.Pointer(stop)), p, C.longlong(room), &msg[0], C.size_t(len(msg)), &lp))
	if rc == tcOK {
		return tcOK, "", int64(lp)
	}
	return rc, C.GoString(&msg[0]), int64(lp)
}

// MaxViews is turbo.h's STOKER_MAX_VIEWS: both checked here.
const (
	_ = uint(MaxViews - C.STOKER_MAX_VIEWS)
	_ = uint(C.STOKER_MAX_VIEWS - MaxViews)
)
