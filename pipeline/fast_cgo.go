//go:build cgo

package pipeline

import (
	"fmt"
	"unsafe"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
)

// The libjpeg-turbo path: pipeline/codec does the whole sample in one cgo
// call.
const haveFast = true

// fastState is a Decoder's C scratch (codec.Scratch: a reused libjpeg
// decompress object, filter tables and row buffers, all malloc'd in C and
// grown as needed, so that a decode allocates nothing in Go) and the views'
// geometry handed to it.
type fastState struct {
	s     *codec.Scratch
	geoms [codec.MaxViews]codec.Geometry
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
	// The C decode's own (codec.Knobs): merged chroma, JDCT_IFAST, whole
	// rows, libjpeg's Huffman decoder, the SIMD level's bound (SIMDMax: 0
	// the best the CPU has; n > 0 at most n (1: SSE2, no SSSE3; 2: SSSE3,
	// no AVX2; 3: AVX2, no AVX-512); -1 none) and the index's spacing.
	codec.Knobs
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

// The coefficient cache's entries are C memory (pipeline/codec's coefs.c).
func coefsNew() unsafe.Pointer          { return codec.CoefsNew() }
func coefsFree(p unsafe.Pointer)        { codec.CoefsFree(p) }
func coefsBytes(p unsafe.Pointer) int64 { return codec.CoefsBytes(p) }

// simdBest is the best SIMD level the resampler uses on this CPU (0 none,
// 1 SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512).
func simdBest() int { return codec.SIMDBest() }

// free releases the scratch; it is idempotent.
func (f *fastState) free() {
	f.s.Free()
	f.s = nil
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
	if err := f.open(); err != nil {
		return err
	}
	if len(ps) < 1 || len(ps) > codec.MaxViews || len(offs) != len(ps) {
		return fmt.Errorf("%w: fast path: %d views at %d offsets: want 1..%d", ErrUnsupported, len(ps), len(offs), codec.MaxViews)
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
	var ix ixUse
	var cc coefUse
	if tc {
		// No index: nothing is entropy-decoded.
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
	cc.checkin(f, rc == codec.OK || tc)
	if ix.on {
		rc = d.indexFinish(rc, data, out, ix)
	}
	if rc != codec.OK && d.ops.Stopped() {
		return errAbandoned
	}
	return f.s.Err(rc)
}

// open makes f's C scratch on first use (a Decoder dropped without Close
// still frees its C memory: the Scratch's cleanup).
func (f *fastState) open() error {
	if f.s != nil {
		return nil
	}
	s, err := codec.NewScratch()
	if err != nil {
		return err
	}
	f.s = s
	return nil
}

// setJob writes the decode's job into C: each plan's geometry and where
// its view goes (offs, in an output buffer of outLen bytes, which C checks
// again), the layout, the Decoder's options and bounds, and the knobs k.
func (f *fastState) setJob(o *options, hd *header, ps []samplePlan, offs []int, outLen int, layout Layout, k *fastKnobs) {
	gs := f.geoms[:len(ps)]
	scalable := false
	for i := range ps {
		p := &ps[i]
		r := p.region()
		sx, sy := p.spans()
		gs[i] = codec.Geometry{
			Box:  codec.Box{X: r.bx, Y: r.by, W: r.bw, H: r.bh},
			Clip: codec.Clip{X0: r.x0, Y0: r.y0, X1: r.x1, Y1: r.y1},
			SX:   codec.Span{Base: sx.base, In: sx.in, Out: sx.out, Off: sx.off},
			SY:   codec.Span{Base: sy.base, In: sy.in, Out: sy.out, Off: sy.off},
			OutW: p.outW, OutH: p.outH,
			Interp: int(p.interp), Antialias: p.antialias, Flip: p.flip,
		}
		scalable = scalable || p.dctScalable()
	}
	j := codec.Job{SrcW: hd.w, SrcH: hd.h, Comps: hd.comps, HWC: layout == HWC,
		// libjpeg's own allocations (progressive coefficient buffers
		// chiefly: 2 bytes per pixel per component) are bounded by the
		// pixel budget.
		MaxScans: min(max(o.maxScans, 0), 1<<30), MaxMemory: min(max(o.pixelBudget, 0), 1<<36)*6 + 64<<20,
		Knobs: k.Knobs}
	switch {
	case !scalable || o.scaling == ScaleOff:
		j.Scaling = codec.ScaleOff
	case o.scaling == ScaleAny:
		j.Scaling = codec.ScaleAny
	default:
		j.Scaling = codec.ScalePow2
	}
	f.s.Set(&j, gs, offs, outLen)
}

// ixUse is one decode's use of the decoder index: the file's key (keyed:
// computed), the blob it is given (nil: none yet) and the index file it
// came from, and the Index (nil: none, or a test's forced blob).
type ixUse struct {
	on     bool
	key    index.Key
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
	case hd.progressive || k.LibHuff:
	case k.forceIx != nil:
		u.on, u.blob = true, k.forceIx
	case d.opts.index != nil:
		u.on, u.ix = true, d.opts.index
		if !fk.xxOK {
			fk.xx, fk.xxOK = index.KeyOf(data), true
		}
		u.key, u.keyed = fk.xx, true
		u.blob, u.origin = u.ix.Lookup(u.key)
	}
	f.s.SetIndex(u.on)
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
	if cc == nil || hd.progressive || k.LibHuff {
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
	f.s.SetCoefs(nil, 0, false)
	cc := d.opts.coefs
	if cc == nil || hd.progressive || k.LibHuff {
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
	f.s.SetCoefs(ce.p, room, false)
	return coefUse{cc: cc, ce: ce, key: fk.cid, room: room}
}

// transcodeCoefs checks the coefficient entry of a progressive file's
// transcode out (fk: the file's identities), which holds every MCU; none
// when another Decoder has it, or it is gone (the transcode is then
// forgotten, to be made again).
func (d *Decoder) transcodeCoefs(fk *fileKeys) coefUse {
	f := &d.fast
	f.s.SetCoefs(nil, 0, true)
	cc := d.opts.coefs
	ce, _ := cc.checkout(fk, 0, false)
	if ce == nil {
		if !cc.present(fk) {
			cc.tcForget(fk.cid)
		}
		return coefUse{}
	}
	f.s.SetCoefs(ce.p, 0, true)
	return coefUse{cc: cc, ce: ce, key: fk.cid}
}

// checkin gives the entry back, with what the decode stored when it
// succeeded (ok), and counts what it did.
func (c coefUse) checkin(f *fastState, ok bool) {
	if c.ce == nil {
		return
	}
	c.cc.checkin(c.key, c.ce, c.room, ok)
	st := f.s.Stats()
	f.s.SetCoefs(nil, 0, false)
	c.cc.mcusWanted.Add(st.MCUsWanted)
	c.cc.mcusHit.Add(st.CoefsHits)
	c.cc.mcusStored.Add(st.CoefsStored)
}

// decode runs the JPEG decode on the job set up in f, with the decoder
// index blob (nil: none).
func (f *fastState) decode(data, out, blob []byte) codec.Code {
	return f.s.Decode(data, out, blob, f.stop)
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
	if f.s == nil {
		return fastStats{}
	}
	j := f.s.Stats()
	return fastStats{scaleM: j.ScaleM, rows: j.Rows, cols: j.Cols, simd: j.SIMD, rowSkew: j.RowSkew, huff: j.Huff,
		ixState: j.IxState, ixChanged: j.IxChanged, ixBytes: j.IxBytes,
		mcus: int(j.MCUs), decoded: int(j.Decoded), ckSeeks: j.CkSeeks, rstSeeks: j.RstSeeks,
		prog: j.Prog, progMCUs: int(j.ProgMCUs), progDecoded: int(j.ProgDecoded)}
}
