//go:build cgo

package pipeline

/*
#cgo CFLAGS: -O3
#cgo LDFLAGS: -lm
#include <stdlib.h>
#include "turbo.h"
#include "huff.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// The libjpeg-turbo path: turbo.c does the whole sample in one cgo call.
const haveFast = true

// fastState is a Decoder's C scratch: a reused libjpeg decompress object and
// error manager, filter tables and row buffers, all malloc'd in C and grown
// as needed, so that a decode allocates nothing in Go.
type fastState struct {
	t       *C.stoker_turbo
	job     *C.stoker_job // inside t: Go writes the job there, not in Go memory
	cleanup runtime.Cleanup
	// stop is the Decoder's sample's abandoned flag (opScratch.Stop),
	// handed to each decode call.
	stop *int32
	// tag is CoefCache.id's scratch.
	tag [16]byte
}

// fastKnobs are the fast path's options for tests and benchmarks, which
// compare decode paths with them; zero is the default, and production
// decodes have no others. A test gives a Decoder its own through
// testKnobs (knobs_cgo_test.go): the Decoder holds none.
type fastKnobs struct {
	merged   bool // replicate chroma (libjpeg's merged upsampler), not fancy
	ifast    bool // JDCT_IFAST
	noRegion bool // decode whole rows from the top: no crop, no skip
	libHuff  bool // libjpeg's own Huffman decoder instead of huff.c's
	// simdMax bounds the SIMD level of the resampler and the coefficient
	// cache's packing: 0 the best the CPU has; n > 0 at most n (1: SSE2,
	// no SSSE3; 2: SSSE3, no AVX2; 3: AVX2, no AVX-512); -1 none.
	simdMax int
	ixPx    int // decoder index checkpoint spacing in pixels; 0: the default
	// forceIx, when set, is the decoder index every decode is given
	// instead of the Index's (an index of other bytes), and nothing is
	// learned from it.
	forceIx []byte
}

// defaults are the knobs of every decode in production, never written.
var defaults fastKnobs

// testKnobs is nil in production; tests set it (knobs_cgo_test.go) to
// give a Decoder knobs other than the defaults (nil: the defaults).
var testKnobs func(*Decoder) *fastKnobs

// knobs is the decode's knobs: the defaults, unless a test set d's.
func (d *Decoder) knobs() *fastKnobs {
	if testKnobs != nil {
		if k := testKnobs(d); k != nil {
			return k
		}
	}
	return &defaults
}

// The coefficient cache's entries are C memory (coefs.c).
func coefsNew() unsafe.Pointer          { return unsafe.Pointer(C.stoker_coefs_new()) }
func coefsFree(p unsafe.Pointer)        { C.stoker_coefs_free((*C.stoker_coefs)(p)) }
func coefsBytes(p unsafe.Pointer) int64 { return int64(C.stoker_coefs_bytes((*C.stoker_coefs)(p))) }

// simdBest is the best SIMD level the resampler uses on this CPU (0 none,
// 1 SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512).
func simdBest() int { return int(C.stoker_simd_best()) }

// free releases the scratch; it is idempotent.
func (f *fastState) free() {
	if f.t == nil {
		return
	}
	f.cleanup.Stop()
	C.stoker_free(f.t)
	f.t, f.job = nil, nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// decodeFast decodes the plan's one view into out (3*outH*outW bytes):
// decodeFastViews with one view at 0.
func (d *Decoder) decodeFast(data []byte, hd *header, p *samplePlan, layout Layout, out []byte) error {
	if len(out) != 3*p.outW*p.outH {
		return fmt.Errorf("%w: fast path: %d output bytes for %dx%d", ErrUnsupported, len(out), p.outW, p.outH)
	}
	return d.decodeFastViews(data, hd, []samplePlan{*p}, layout, out, []int{0})
}

// decodeFastViews decodes a 1- or 3-component JPEG through libjpeg-turbo and
// writes each plan's view into out at offs[v] (3*outH*outW bytes, uint8, in
// layout): the job set up in C, with the file's decoder index and
// coefficient cache when the Decoder has them, decoded once (twice when the
// index disagrees with the file: indexFinish), and what the decode learned
// kept.
func (d *Decoder) decodeFastViews(data []byte, hd *header, ps []samplePlan, layout Layout, out []byte, offs []int) error {
	f := &d.fast
	if err := f.open(d); err != nil {
		return err
	}
	if len(ps) < 1 || len(ps) > C.STOKER_MAX_VIEWS || len(offs) != len(ps) {
		return fmt.Errorf("%w: fast path: %d views at %d offsets: want 1..%d", ErrUnsupported, len(ps), len(offs), C.STOKER_MAX_VIEWS)
	}
	for v := range ps {
		if n := 3 * ps[v].outW * ps[v].outH; len(data) == 0 || offs[v] < 0 || offs[v]+n > len(out) {
			return fmt.Errorf("%w: fast path: %d input bytes, %d output bytes for view %d of %dx%d at %d", ErrUnsupported, len(data), len(out), v, ps[v].outW, ps[v].outH, offs[v])
		}
	}
	k := d.knobs()
	f.stop = d.ops.Stop
	sdata, shd, tc := d.sequential(data, hd, k)
	err := d.decodeFastJob(sdata, shd, ps, offs, layout, out, k, tc.on, &tc.keys)
	switch {
	case err == errTranscodeBusy:
		err = d.decodeFastJob(data, hd, ps, offs, layout, out, k, false, &fileKeys{})
	case err != nil && tc.on && err != errAbandoned:
		// The file is decoded again as it is: a good sample is never
		// failed for its transcode. If that succeeds, the transcode was
		// wrong (a bug): dropped, the file decoded as it is from now on.
		if err = d.decodeFastJob(data, hd, ps, offs, layout, out, k, false, &fileKeys{}); err == nil {
			d.opts.coefs.tcDrop(tc.key)
		}
	}
	return err
}

// decodeFastJob is decodeFastViews's decode of data (hd), checked; tc says
// data is a progressive file's transcode (its headers: every MCU comes
// from its coefficient entry, under fk), fk what is known of its
// identities. The file is hashed at most once for the coefficient cache
// and once for the decoder index, and on a cache hit only once: coefProbe,
// then the index key from the entry.
func (d *Decoder) decodeFastJob(data []byte, hd *header, ps []samplePlan, offs []int, layout Layout, out []byte, k *fastKnobs, tc bool, fk *fileKeys) error {
	f := &d.fast
	f.setJob(&d.opts, hd, ps, offs, len(out), layout, k)
	f.job.coefs_only = cbool(tc)
	var ix ixUse
	var cc coefUse
	if tc {
		// No index: nothing is entropy-decoded.
		f.job.index = 0
		if cc = d.transcodeCoefs(fk); cc.ce == nil {
			return errTranscodeBusy
		}
	} else {
		d.coefProbe(data, hd, k, fk)
		ix = d.indexFor(data, hd, k, fk)
		cc = d.coefsFor(data, hd, &ix, k, fk)
	}
	rc := f.decode(data, out, ix.blob)
	// A transcode's decode stores nothing: its entry stays whatever the
	// decode did (a transcode that decodes wrong is dropped by the caller).
	cc.checkin(f, rc == C.STOKER_OK || tc)
	if ix.on {
		rc = d.indexFinish(rc, data, out, ix)
	}
	if rc != C.STOKER_OK && d.ops.Stopped() {
		return errAbandoned
	}
	return f.err(rc)
}

// open makes f's C scratch on first use.
func (f *fastState) open(d *Decoder) error {
	if f.t != nil {
		return nil
	}
	t := C.stoker_new()
	if t == nil {
		return fmt.Errorf("%w: out of memory for jpeg decoder scratch", ErrTooLarge)
	}
	f.t, f.job = t, C.stoker_job_of(t)
	// A Decoder dropped without Close still frees its C memory.
	f.cleanup = runtime.AddCleanup(d, func(t *C.stoker_turbo) { C.stoker_free(t) }, t)
	return nil
}

// setJob writes the decode's job into C: each plan's geometry and where
// its view goes (offs, in an output buffer of outLen bytes, which C checks
// again), the layout, the Decoder's options and bounds, and the knobs k.
func (f *fastState) setJob(o *options, hd *header, ps []samplePlan, offs []int, outLen int, layout Layout, k *fastKnobs) {
	j := f.job
	j.out_len = C.longlong(outLen)
	j.nviews = C.int(len(ps))
	for i := range ps {
		p, v := &ps[i], &j.views[i]
		r := p.region()
		v.bx, v.by, v.bw, v.bh = C.double(r.bx), C.double(r.by), C.double(r.bw), C.double(r.bh)
		v.x0, v.y0, v.x1, v.y1 = C.int(r.x0), C.int(r.y0), C.int(r.x1), C.int(r.y1)
		v.out_w, v.out_h = C.int(p.outW), C.int(p.outH)
		v.interp, v.antialias = C.int(p.interp), cbool(p.antialias)
		sx, sy := p.spans()
		v.sx = C.stoker_span{base: C.int(sx.base), in: C.int(sx.in), out: C.int(sx.out), off: C.int(sx.off)}
		v.sy = C.stoker_span{base: C.int(sy.base), in: C.int(sy.in), out: C.int(sy.out), off: C.int(sy.off)}
		v.flip = cbool(p.flip)
		v.out_off = C.longlong(offs[i])
	}
	j.src_w, j.src_h, j.comps = C.int(hd.w), C.int(hd.h), C.int(hd.comps)
	j.hwc = cbool(layout == HWC)
	scalable := false
	for i := range ps {
		scalable = scalable || ps[i].dctScalable()
	}
	switch {
	case !scalable || o.scaling == ScaleOff:
		j.scaling = C.STOKER_SCALE_OFF
	case o.scaling == ScaleAny:
		j.scaling = C.STOKER_SCALE_ANY
	default:
		j.scaling = C.STOKER_SCALE_POW2
	}
	j.max_scans = C.int(min(max(o.maxScans, 0), 1<<30))
	// libjpeg's own allocations (progressive coefficient buffers chiefly:
	// 2 bytes per pixel per component) are bounded by the pixel budget.
	j.max_memory = C.longlong(min(max(o.pixelBudget, 0), 1<<36)*6 + 64<<20)
	j.fancy, j.ifast, j.no_region, j.simd_max = cbool(!k.merged), cbool(k.ifast), cbool(k.noRegion), C.int(k.simdMax)
	j.libjpeg_huff = cbool(k.libHuff)
	j.ix_px = C.int(k.ixPx)
}

// ixUse is one decode's use of the decoder index: the file's key (keyed:
// computed), the blob it is given (nil: none yet) and the index file it
// came from, and the Index (nil: none, or a test's forced blob).
type ixUse struct {
	on     bool
	key    indexKey
	keyed  bool
	blob   []byte
	origin uint32
	ix     *Index
}

// indexFor is the decode's use of the decoder index: for baseline JPEGs
// decoded by huff.c, when the Decoder has an Index (or k forces one). The
// file's key is fk's where known (a coefficient-cache hit's), computed
// otherwise.
func (d *Decoder) indexFor(data []byte, hd *header, k *fastKnobs, fk *fileKeys) ixUse {
	f := &d.fast
	var u ixUse
	switch {
	case hd.progressive || k.libHuff:
	case k.forceIx != nil:
		u.on, u.blob = true, k.forceIx
	case d.opts.index != nil:
		u.on, u.ix = true, d.opts.index
		if !fk.xxOK {
			fk.xx, fk.xxOK = keyOf(data), true
		}
		u.key, u.keyed = fk.xx, true
		u.blob, u.origin = u.ix.lookup(u.key)
	}
	f.job.index = cbool(u.on)
	return u
}

// coefUse is one decode's use of the coefficient cache: the file's entry,
// checked out, and the bytes it may add.
type coefUse struct {
	cc   *CoefCache
	ce   *coefEntry
	key  coefKey
	room int64
}

// coefProbe fills in fk, for a decode that may use the coefficient cache,
// what the cache knows: the file's hint, and where an entry may hold the
// file, its MAC (CoefCache.id) and, from a matching entry, its decoder-index
// key, which then need not be hashed.
func (d *Decoder) coefProbe(data []byte, hd *header, k *fastKnobs, fk *fileKeys) {
	cc := d.opts.coefs
	if cc == nil || hd.progressive || k.libHuff {
		return
	}
	if !fk.hintOK {
		fk.hint, fk.hintOK = coefHint(data), true
	}
	if !fk.cidOK {
		if !cc.mayHold(fk.hint) {
			return
		}
		fk.cid, fk.check = cc.id(data, &d.fast.tag)
		fk.cidOK = true
	}
	if !fk.xxOK {
		fk.xx, fk.xxOK = cc.indexKeyOf(fk.cid, fk.check)
	}
}

// coefsFor checks the file's coefficient-cache entry out for the decode,
// for baseline JPEGs decoded by huff.c, when the Decoder has a cache. A
// decode that fails leaves nothing in it (the entry is dropped), and the
// retry without the index goes without it.
func (d *Decoder) coefsFor(data []byte, hd *header, u *ixUse, k *fastKnobs, fk *fileKeys) coefUse {
	f := &d.fast
	j := f.job
	j.coefs, j.coefs_room = nil, 0
	cc := d.opts.coefs
	if cc == nil || hd.progressive || k.libHuff {
		return coefUse{}
	}
	// The most a decode can add: every block of the file (4:4:4 at the
	// file's size in whole MCUs, or 4:2:0's larger rounding) at its
	// largest, 200 bytes, and one block's slack.
	blocks := int64((hd.w+15)/16*2) * int64((hd.h+15)/16*2) * int64(hd.comps)
	// A file is admitted on its second decode where there is an index
	// (it has one then): the first epoch stores nothing, so it runs as
	// fast as without the cache. A sample with copies to come (repeated
	// augmentation) is admitted on its first: the copies are its next
	// decodes, within the epoch.
	admit := u.ix == nil || u.blob != nil || d.admitNow
	// The MAC is paid only by a decode that may use an entry: one
	// admitted, or one of a file the cache may hold (coefProbe computed
	// it then).
	if !fk.cidOK {
		if !admit {
			return coefUse{}
		}
		fk.cid, fk.check = cc.id(data, &d.fast.tag)
		fk.cidOK = true
	}
	ce, room := cc.checkout(fk, blocks*200+4096, admit)
	if ce == nil {
		return coefUse{}
	}
	j.coefs, j.coefs_room = ce.p, C.longlong(room)
	return coefUse{cc: cc, ce: ce, key: fk.cid, room: room}
}

// transcodeCoefs checks the coefficient entry of a progressive file's
// transcode out (fk: the file's identities), which holds every MCU; none
// when another Decoder has it, or it is gone (the transcode is then
// forgotten, to be made again).
func (d *Decoder) transcodeCoefs(fk *fileKeys) coefUse {
	f := &d.fast
	j := f.job
	j.coefs, j.coefs_room = nil, 0
	cc := d.opts.coefs
	ce, _ := cc.checkout(fk, 0, false)
	if ce == nil {
		if !cc.present(fk) {
			cc.tcForget(fk.cid)
		}
		return coefUse{}
	}
	j.coefs = ce.p
	return coefUse{cc: cc, ce: ce, key: fk.cid}
}

// checkin gives the entry back, with what the decode stored when it
// succeeded (ok), and counts what it did.
func (c coefUse) checkin(f *fastState, ok bool) {
	if c.ce == nil {
		return
	}
	j := f.job
	c.cc.checkin(c.key, c.ce, c.room, ok)
	j.coefs, j.coefs_room = nil, 0
	c.cc.mcusWanted.Add(int64(j.mcus_wanted))
	c.cc.mcusHit.Add(int64(j.coefs_hits))
	c.cc.mcusStored.Add(int64(j.coefs_stored))
}

// err is the error of stoker_decode's result rc, with its message.
func (f *fastState) err(rc C.int) error {
	switch rc {
	case C.STOKER_OK:
		return nil
	case C.STOKER_TOO_LARGE:
		return fmt.Errorf("%w: %s", ErrTooLarge, C.GoString(C.stoker_msg(f.t)))
	case C.STOKER_UNSUPPORTED:
		return fmt.Errorf("%w: %s", ErrUnsupported, C.GoString(C.stoker_msg(f.t)))
	default:
		return fmt.Errorf("%w: %s", ErrCorrupt, C.GoString(C.stoker_msg(f.t)))
	}
}

// decode runs stoker_decode on the job set up in f.job, with the decoder
// index blob (nil: none).
func (f *fastState) decode(data, out, blob []byte) C.int {
	var ip *C.uchar
	if len(blob) > 0 {
		ip = (*C.uchar)(unsafe.Pointer(&blob[0]))
	}
	rc := C.stoker_decode(f.t, (*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)), (*C.uchar)(unsafe.Pointer(&out[0])), ip, C.size_t(len(blob)),
		(*C.int)(unsafe.Pointer(f.stop)))
	runtime.KeepAlive(f) // the Decoder's cleanup must not free f.t during the call
	return rc
}

// fastStats is what the last fast decode did, for tests and benchmarks.
type fastStats struct {
	scaleM, rows, cols int
	simd               int  // 0 none, 1 SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512, 5 AVX-512 VBMI and VNNI
	rowSkew            int  // where decoded rows start, modulo 64 bytes
	huff               bool // huff.c decoded the entropy-coded data
	ixState            int  // C.STOKER_IX_*
	ixChanged          bool
	ixBytes            int
	mcus, decoded      int // MCUs in the scan, entropy-decoded
	ckSeeks, rstSeeks  int // jumps to a checkpoint, to a restart marker
	// A progressive file: phuff.c decoded its scans; their MCUs, and
	// those entropy-decoded.
	prog                  bool
	progMCUs, progDecoded int
}

func (f *fastState) stats() fastStats {
	if f.job == nil {
		return fastStats{}
	}
	j := f.job
	return fastStats{scaleM: int(j.scale_m), rows: int(j.rows_decoded), cols: int(j.cols_decoded), simd: int(j.simd_used), rowSkew: int(j.row_skew), huff: j.huff_used != 0,
		ixState: int(j.ix_state), ixChanged: j.ix_changed != 0, ixBytes: int(j.ix_bytes),
		mcus: int(j.mcus_total), decoded: int(j.mcus_decoded), ckSeeks: int(j.ck_seeks), rstSeeks: int(j.rst_seeks),
		prog: j.prog_used != 0, progMCUs: int(j.prog_total), progDecoded: int(j.prog_decoded)}
}
