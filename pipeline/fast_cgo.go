//go:build cgo

package pipeline

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
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
}

// fastKnobs are the fast path's options for tests and benchmarks, which
// compare decode paths with them; zero is the default, and production
// decodes have no others. A test gives a Decoder its own through
// testKnobs (knobs_cgo_test.go): the Decoder holds none. They are the C
// decode's own (codec.Knobs): merged chroma, JDCT_IFAST, whole rows,
// libjpeg's Huffman decoder, the SIMD level (SIMDMax: 0 the default, the
// best the CPU has but AVX2 at most on Intel; n > 0 level n, at most the
// best (1: SSE2, no SSSE3; 2: SSSE3, no AVX2; 3: AVX2, no AVX-512); -1
// none), the index's spacing and a forced index.
type fastKnobs = codec.Knobs

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

// simdBest is the best SIMD level the resampler can use on this CPU (0
// none, 1 SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512, 5 AVX-512 VBMI and VNNI);
// decodes use codec.SIMDDefault unless their knobs say otherwise.
func simdBest() int { return codec.SIMDBest() }

// resampler is what f's C resampler keeps (codec.Scratch.ResamplerBytes;
// 0 before its first decode).
func (f *fastState) resampler() int64 { return f.s.ResamplerBytes() }

// free releases the scratch; it is idempotent.
func (f *fastState) free() {
	f.s.Free()
	f.s = nil
}

// decodeFast decodes the plan's one view into out (3*outH*outW bytes):
// decodeFastViews with one view at 0.
func (d *Decoder) decodeFast(data []byte, hd *header, p *transform.SamplePlan, layout transform.Layout, out []byte) error {
	if len(out) != 3*p.OutW*p.OutH {
		return fmt.Errorf("%w: fast path: %d output bytes for %dx%d", errs.Unsupported, len(out), p.OutW, p.OutH)
	}
	return d.decodeFastViews(data, hd, []transform.SamplePlan{*p}, layout, out, []int{0})
}

// decodeFastViews decodes a 1- or 3-component JPEG through libjpeg-turbo and
// writes each plan's view into out at offs[v] (3*outH*outW bytes, uint8, in
// layout): the plans' geometry and the job made here, decoded by
// pipeline/codec (Scratch.DecodeViews) with the Decoder's decoder index and
// coefficient cache.
func (d *Decoder) decodeFastViews(data []byte, hd *header, ps []transform.SamplePlan, layout transform.Layout, out []byte, offs []int) error {
	f := &d.fast
	if err := f.open(); err != nil {
		return err
	}
	if len(ps) < 1 || len(ps) > codec.MaxViews || len(offs) != len(ps) {
		return fmt.Errorf("%w: fast path: %d views at %d offsets: want 1..%d", errs.Unsupported, len(ps), len(offs), codec.MaxViews)
	}
	for v := range ps {
		if n := 3 * ps[v].OutW * ps[v].OutH; len(data) == 0 || offs[v] < 0 || offs[v]+n > len(out) {
			return fmt.Errorf("%w: fast path: %d input bytes, %d output bytes for view %d of %dx%d at %d", errs.Unsupported, len(data), len(out), v, ps[v].OutW, ps[v].OutH, offs[v])
		}
	}
	gs, j := f.job(&d.opts, hd, ps, layout, d.knobs())
	hdr := codec.Header{Format: hd.format, W: hd.w, H: hd.h, Comps: hd.comps, Progressive: hd.progressive}
	caches := codec.Caches{Index: d.opts.index, Coefs: d.opts.coefs, AdmitNow: d.admitNow}
	err := f.s.DecodeViews(data, hdr, &j, gs, offs, out, caches, d.ops.Stop)
	if err == codec.ErrStopped {
		return ops.ErrAbandoned
	}
	return err
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

// setJob writes the decode's job into C (codec.Scratch.Set): job's, and
// where each view goes (offs, in an output buffer of outLen bytes, which C
// checks again).
func (f *fastState) setJob(o *options, hd *header, ps []transform.SamplePlan, offs []int, outLen int, layout transform.Layout, k *fastKnobs) {
	gs, j := f.job(o, hd, ps, layout, k)
	f.s.Set(&j, gs, offs, outLen)
}

// job is the decode's views and job: each plan's geometry, the layout,
// the Decoder's options and bounds, and the knobs k.
func (f *fastState) job(o *options, hd *header, ps []transform.SamplePlan, layout transform.Layout, k *fastKnobs) ([]codec.Geometry, codec.Job) {
	gs := f.geoms[:len(ps)]
	scalable := false
	for i := range ps {
		p := &ps[i]
		r := p.Region()
		sx, sy := p.Spans()
		gs[i] = codec.Geometry{
			Box:  codec.Box{X: r.BX, Y: r.BY, W: r.BW, H: r.BH},
			Clip: codec.Clip{X0: r.X0, Y0: r.Y0, X1: r.X1, Y1: r.Y1},
			SX:   codec.Span{Base: sx.Base, In: sx.In, Out: sx.Out, Off: sx.Off},
			SY:   codec.Span{Base: sy.Base, In: sy.In, Out: sy.Out, Off: sy.Off},
			OutW: p.OutW, OutH: p.OutH,
			Interp: int(p.Interp), Antialias: p.Antialias, Flip: p.Flip,
		}
		scalable = scalable || p.DCTScalable()
	}
	j := codec.Job{SrcW: hd.w, SrcH: hd.h, Comps: hd.comps, HWC: layout == transform.HWC,
		// libjpeg's own allocations (progressive coefficient buffers
		// chiefly: 2 bytes per pixel per component) are capped at their
		// bound from the header, what the memory budget reserved for
		// them (scratch.go).
		MaxScans: min(max(o.maxScans, 0), 1<<30), MaxMemory: hd.libBytes(),
		Knobs: *k}
	switch {
	case !scalable || o.scaling == ScaleOff:
		j.Scaling = codec.ScaleOff
	case o.scaling == ScaleAny:
		j.Scaling = codec.ScaleAny
	default:
		j.Scaling = codec.ScalePow2
	}
	return gs, j
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
