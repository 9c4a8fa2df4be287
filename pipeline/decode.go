package pipeline

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// DCTScaling says which libjpeg DCT scales the fast path may decode at.
type DCTScaling int

const (
	// ScalePow2 decodes at 1/2, 1/4 or 1/8 when the crop is at least 2, 4
	// or 8 times the output on both sides.
	ScalePow2 DCTScaling = iota
	// ScaleOff always decodes at full size.
	ScaleOff
	// ScaleAny decodes at the smallest M/8 (M in 1..8) that keeps the crop
	// at least as large as the output.
	ScaleAny
)

type options struct {
	pixelBudget int64
	maxScans    int
	reference   bool
	scaling     DCTScaling
	schedule    Schedule // read by NewExecutor only (WithSchedule)
	stages      StageObserver
	cpu         CPUClock         // read by NewExecutor only (WithCPUClock)
	index       *index.Index     // WithIndex
	coefs       *codec.CoefCache // WithCoefCache
	partners    *cv.PartnerCache // WithPartnerCache
	scratch     ScratchBudget    // WithScratchBudget (scratch.go), waiting up to scratchWait
	scratchWait time.Duration
}

// Option configures a Decoder (and, through NewExecutor, an Executor's
// decoders and its schedule).
type Option func(*options)

// WithPixelBudget refuses images that declare more than n pixels, before
// decoding them. Default 64 Mpx (64<<20).
func WithPixelBudget(n int64) Option { return func(o *options) { o.pixelBudget = n } }

// WithMaxScans refuses progressive JPEGs with more than n scans. Default 100.
func WithMaxScans(n int) Option { return func(o *options) { o.maxScans = n } }

// WithReference forces the pure-Go reference path for every image. Default
// false: JPEGs take the libjpeg-turbo path where cgo is available.
func WithReference(on bool) Option { return func(o *options) { o.reference = on } }

// WithDCTScaling sets the DCT scales the fast path may use for transforms
// that decode in DecodeFast (Transform.WithDecode). Default ScalePow2. A
// transform in DecodeExact, the default, decodes at full scale whatever
// this says.
func WithDCTScaling(s DCTScaling) Option { return func(o *options) { o.scaling = s } }

// Decoder turns encoded images into transformed samples. It holds reusable
// scratch, so give each goroutine its own; it is not safe for concurrent use.
// Close it to free its C memory.
type Decoder struct {
	opts options
	fast fastState
	// pix holds the views' decoded pixels when they do not go straight to
	// the output (float output, or HWC output with ops: the ops work on
	// planes), chw one view's planes packed to HWC before Normalize.
	pix []byte
	chw []byte
	// kplans, koffs: the plans and offsets of the views a decode makes
	// (not its Sample's skip).
	kplans []transform.SamplePlan
	koffs  []int
	// dup[v]: view v's canvas is an earlier view's, decoded and its ops
	// before the geometry run once (a SharedPre transform's).
	dup []bool
	// post is the last Decode's time in the ops after decoding (the
	// steps, Normalize), measured when the Decoder times stages (an
	// Executor's, with a StageObserver); 0 otherwise.
	post time.Duration
	// plan is the last Decode's sample plan (transform.Plan: each view's
	// geometry and steps, its trace); plans its views' geometry, handed to
	// the decode, and offs its offsets; ops the ops' scratch.
	plan  transform.Plan
	plans []transform.SamplePlan
	offs  []int
	soffs []int
	// A padded CenterCrop's decode: each view's plan as decoded (its visible part), where it goes in d.pix.
	dplans []transform.SamplePlan
	voffs  []int
	ops    ops.Scratch
	// admitNow: the sample being decoded has copies to come (its
	// Sample's admitNow).
	admitNow bool
	targets  targets.Targets // appendTargets' scratch
	// canvas is a RandomZoomOut canvas' RGBA scratch (resizeCanvas), mid
	// its horizontal pass' rows (resampleRGBA); yoloRoom the YOLO geometry's.
	canvas, mid []byte
	yoloRoom    transform.YOLOScratch
	// boxSrc and boxIdx: where the last sample's targets are (its
	// Sample's Targets and Index), for its draw (a RandomIoUCrop's, a
	// multi-image op's) and its targets (appendTargets).
	boxSrc transform.Targeted
	boxIdx int
	// multi: the multi-image geometry's partners and scratch
	// (decode_multi.go).
	multi multiState
	// scratch is its counted scratch's reservation (scratch.go).
	scratch scratchState
	// padded is canvasView's room for an AnyResResize's image before its
	// padding (at most its slot's size).
	padded []byte
}

// NewDecoder returns a Decoder with the given options.
func NewDecoder(opts ...Option) *Decoder {
	d := &Decoder{opts: options{pixelBudget: 64 << 20, maxScans: 100}}
	for _, o := range opts {
		o(&d.opts)
	}
	return d
}

// Close frees the Decoder's scratch. The Decoder must not be used after.
func (d *Decoder) Close() {
	d.fast.free()
	d.dropScratch()
}

// Fast reports whether this build has the libjpeg-turbo path.
func Fast() bool { return haveFast }

// Decode decodes data, applies t for key k and writes the sample into out,
// which must be t.SampleBytes() long: of a transform of several views, the
// views back to back, in order. On error out holds unspecified bytes and
// the error wraps ErrCorrupt, ErrTooLarge or ErrUnsupported. It is
// DecodeSample of a sample without targets or partners.
func (d *Decoder) Decode(data []byte, t *transform.Transform, k det.Key, out []byte) error {
	return d.DecodeSample(Sample{Data: data}, t, k, out)
}

// Sample is one sample as a Decoder makes it (DecodeSample): its file,
// Data; where its targets are, for a draw that wants them (a
// RandomIoUCrop's, a multi-image op's) and for AppendTargets after it:
// Targets (nil: none, a job without targets), the sample's Index there,
// and Fields, the fields they are read as (their masks and label
// numbering; nil: the defaults); and the partners its multi-image ops
// drew for its key (Transform.AppendPartners), with their files
// (PartnerFiles[i] is Partners[i]'s), read during its decode only. The
// executor hands each sample whole, so nothing of one sample is set on
// the Decoder before another's decode.
type Sample struct {
	Data         []byte
	Targets      transform.Targeted
	Index        int
	Fields       *dataset.FieldSet
	Partners     []int
	PartnerFiles [][]byte
	// The executor's: skip is which views not to make (its
	// Transform.SkipViews for the sample's record; nil: every view);
	// admitNow, that the sample has copies to come (repeated
	// augmentation), so its file is admitted to the coefficient cache on
	// this decode rather than its second.
	skip     []bool
	admitNow bool
}

// DecodeSample is Decode of s: its targets, where its draw wants them,
// read once, with it, and its partners' files made into it.
func (d *Decoder) DecodeSample(s Sample, t *transform.Transform, k det.Key, out []byte) error {
	if len(out) != t.SampleBytes() {
		return fmt.Errorf("%w: output buffer is %d bytes, sample is %d", errs.Unsupported, len(out), t.SampleBytes())
	}
	d.offs = d.offs[:0]
	off := 0
	for v := range t.Views() {
		d.offs = append(d.offs, off)
		off += t.View(v).SampleBytes()
	}
	return d.decodeAt(s, t, k, out, d.offs)
}

// decodeAt is Decode with view v going to out[offs[v]:], View(v)'s
// sample size long: a sample's place in a batch buffer (ViewLayout).
func (d *Decoder) decodeAt(s Sample, t *transform.Transform, k det.Key, out []byte, offs []int) error {
	d.boxSrc, d.boxIdx, d.admitNow = s.Targets, s.Index, s.admitNow
	d.wantTargets(s.Fields)
	if t.Multi(k) {
		return d.decodeMulti(s, t, k, out, offs)
	}
	data := s.Data
	hd, err := parseHeader(data)
	if err != nil {
		return err
	}
	if px := int64(hd.w) * int64(hd.h); px > d.opts.pixelBudget {
		return fmt.Errorf("%w: %dx%d is %d pixels, over the budget of %d", errs.TooLarge, hd.w, hd.h, px, d.opts.pixelBudget)
	}
	direct, decLayout, err := d.draw(t, &hd, k)
	if err != nil {
		return err
	}
	// A CenterCrop larger than the image decodes its visible part into
	// room after the views', then is padded into its place: never
	// straight into out.
	// So does a RandomZoomOut's canvas before a Resize: the image is
	// decoded at its own size, padded onto the canvas and resized.
	skip := s.skip
	if len(skip) != len(d.plans) {
		skip = nil
	}
	padded := false
	for i := range d.plans {
		if skip != nil && skip[i] {
			continue
		}
		p := &d.plans[i]
		padded = padded || p.Padded || p.Canvas
		if px := int64(p.ZoomW) * int64(p.ZoomH); p.Canvas && px > d.opts.pixelBudget {
			return fmt.Errorf("%w: RandomZoomOut's canvas of the %dx%d image is %dx%d, %d pixels, over the budget of %d",
				errs.TooLarge, p.SrcW, p.SrcH, p.ZoomW, p.ZoomH, px, d.opts.pixelBudget)
		}
	}
	d.dup = d.dup[:0]
	direct = direct && !padded && !t.Varies() && t.Needs().GeomW == 0 // per-sample sizes: made compact, then padCorner; grown: in room
	// Where the decode writes: straight into out, or the views back to
	// back in d.pix when they are not yet the output's bytes.
	dst, doffs, plans := out, offs, d.plans
	if !direct {
		d.soffs = d.soffs[:0]
		n := 0
		for v := range t.Views() {
			d.soffs = append(d.soffs, n)
			var err error
			if n, err = d.addRoom(n, t.View(v), &hd); err != nil {
				return err
			}
		}
		d.voffs = d.voffs[:0]
		if padded {
			d.dplans = append(d.dplans[:0], d.plans...)
			canvas := -1 // of SharedPre's views, the first whose canvas is decoded
			for v := range d.dplans {
				p := &d.plans[v]
				dup := t.SharedPre() && p.Canvas && canvas >= 0 && (skip == nil || !skip[v])
				d.dup = append(d.dup, dup)
				switch {
				case dup: // the one image, jittered once: the first canvas view's
					d.dplans[v] = d.dplans[canvas]
					d.voffs = append(d.voffs, d.voffs[canvas])
				case (p.Padded || p.Canvas) && (skip == nil || !skip[v]): // a skipped view: no room for its visible part
					if p.Canvas {
						canvas = v
					}
					d.dplans[v] = p.Visible()
					d.voffs = append(d.voffs, n)
					n += 3 * d.dplans[v].OutW * d.dplans[v].OutH
				default:
					d.voffs = append(d.voffs, d.soffs[v])
				}
			}
			plans = d.dplans
		}
		if cap(d.pix) < n {
			d.pix = make([]byte, n)
		}
		dst, doffs = d.pix[:n], d.soffs
		if padded {
			doffs = d.voffs
		}
	}
	dup := d.dup
	if len(dup) != len(plans) {
		dup = nil
	}
	kplans, koffs := plans, doffs
	if skip != nil || slices.Contains(dup, true) { // the views the sample gets: their region alone decoded, a shared canvas once
		d.kplans, d.koffs = d.kplans[:0], d.koffs[:0]
		for v := range plans {
			if (skip == nil || !skip[v]) && (dup == nil || !dup[v]) {
				d.kplans, d.koffs = append(d.kplans, plans[v]), append(d.koffs, doffs[v])
			}
		}
		kplans, koffs = d.kplans, d.koffs
	}
	if err := d.decodeGuarded(data, &hd, kplans, decLayout, dst, koffs); err != nil {
		return err
	}
	if d.ops.Stopped() {
		return ops.ErrAbandoned // the resampler stopped with the rows half made
	}
	if padded {
		for v := range d.plans {
			if skip != nil && skip[v] {
				continue
			}
			if p := &d.plans[v]; p.Canvas {
				vp := &d.dplans[v]
				if pre := d.plan.Views[v].Pre; len(pre) > 0 && (dup == nil || !dup[v]) {
					if _, err := d.applyGuarded(pre, kernels.Planes{Pix: dst[d.voffs[v]:][:3*vp.OutW*vp.OutH], W: vp.OutW, H: vp.OutH}); err != nil {
						return err
					}
				}
				d.canvasView(dst[d.soffs[v]:][:3*p.OutW*p.OutH], p, dst[d.voffs[v]:][:3*vp.OutW*vp.OutH], decLayout)
			} else if p.Padded {
				vp := &d.dplans[v]
				x, y := p.PadAt()
				vw, vh := vp.OutW, vp.OutH
				if p.Vis && (p.VW < 1 || p.VH < 1) {
					vw, vh = 0, 0 // all padding
				}
				padInto(dst[d.soffs[v]:][:3*p.OutW*p.OutH], p.OutW, p.OutH, dst[d.voffs[v]:][:3*vp.OutW*vp.OutH], vw, vh, x, y, p.RCFill, decLayout)
			}
		}
		doffs = d.soffs
	}
	var t0 time.Time
	timed := d.opts.stages != nil && !(direct && d.noSteps())
	if timed {
		t0 = time.Now()
	}
	for v := range t.Views() {
		vt := t.View(v)
		if skip != nil && skip[v] { // zeros; of per-sample sizes 0 x 0, the image's size beside
			slot := out[offs[v]:][:vt.SampleBytes()]
			if vt.Varies() {
				sw, sh := d.plans[v].ImageSize()
				vt.CompactSample(slot, 0, 0, sw, sh)
			} else {
				clear(slot)
			}
			continue
		}
		w, h := vt.SampleSize(&d.plans[v])
		pix := dst[doffs[v]:][:3*w*h]
		if vt.Varies() || vt.Needs().GeomW > 0 { // room for the steps that grow it (rotate's expand), up to the bound
			pix = dst[doffs[v]:][: 3*w*h : vt.RoomFor(hd.w, hd.h)]
		}
		w, h, err := d.finishView(vt, &d.plan.Views[v], pix, decLayout, direct, out[offs[v]:], w, h)
		if vh, vw := vt.Size(); err == nil && !vt.Varies() && (w != vw || h != vh) {
			err = fmt.Errorf("%w: the ops made a %dx%d image, not the transform's %dx%d", errs.Unsupported, w, h, vw, vh)
		}
		if err != nil {
			return err
		}
		if vt.Varies() { // the image's size as the geometry took it (a crop's before it: the crop's)
			sw, sh := d.plans[v].ImageSize()
			vt.CompactSample(out[offs[v]:][:vt.SampleBytes()], w, h, sw, sh)
		}
	}
	if timed {
		d.post = time.Since(t0)
	}
	return nil
}

// draw draws the sample's plan for key k of a source of header hd
// (transform.Plan: its targets, when a RandomIoUCrop draws against them,
// from its Sample's) into d.plan, and each view's geometry into d.plans.
// It returns whether the decode writes the output's bytes (uint8, and the
// layout the ops need) and the layout it decodes to: planes for ops, which
// an HWC output gets packed after them.
func (d *Decoder) draw(t *transform.Transform, hd *header, k det.Key) (direct bool, decLayout transform.Layout, err error) {
	d.plans = d.plans[:0]
	src := transform.BoxSource{From: d.boxSrc, Index: d.boxIdx, Masks: d.targets.WantMasks, Contiguous: d.targets.ContiguousLabels}
	if err := t.Plan(&d.plan, hd.w, hd.h, k, src); err != nil {
		return false, 0, err
	}
	for v := range d.plan.Views {
		d.plans = append(d.plans, d.plan.Views[v].Geom)
	}
	return d.plan.Direct, d.plan.Layout, nil
}

// canvasView makes a canvas plan's view of src (the image decoded at its
// own size, its ops before the geometry run) in dst: the canvas resized,
// and of an AnyResResize's plan (Padded) resized to the image's size in
// its resolution (RW x RH), then padded with zeros into it, centred.
func (d *Decoder) canvasView(dst []byte, p *transform.SamplePlan, src []byte, layout transform.Layout) {
	if !p.Padded {
		d.resizeCanvas(dst, p, src, layout)
		return
	}
	cp := *p
	cp.OutW, cp.OutH, cp.Padded = p.RW, p.RH, false
	n := 3 * p.RW * p.RH
	if cap(d.padded) < n {
		d.padded = make([]byte, n)
	}
	d.resizeCanvas(d.padded[:n], &cp, src, layout)
	x := p.PadL
	if p.Flip { // the resized image flipped: its padding too
		x = p.OutW - p.RW - p.PadL
	}
	padInto(dst, p.OutW, p.OutH, d.padded[:n], p.RW, p.RH, x, p.PadT, [3]float64{}, layout)
}

// noSteps reports whether no view of the last sample drew a step.
func (d *Decoder) noSteps() bool {
	for i := range d.plan.Views {
		if len(d.plan.Views[i].Steps) > 0 {
			return false
		}
	}
	return true
}

// finishView runs one view's steps on its decoded pixels pix (w x h, in
// decLayout) and makes its output in its slot: pix itself when the
// decode was direct, else pix packed to the transform's layout,
// normalized or copied (of per-sample sizes, compact: compactOut). It
// returns the size after the steps (rotate's expand may grow it, in
// pix's room).
func (d *Decoder) finishView(t *transform.Transform, vp *transform.ViewPlan, pix []byte, decLayout transform.Layout, direct bool, slot []byte, w, h int) (int, int, error) {
	if len(vp.Steps) > 0 {
		p, err := d.applyGuarded(vp.Steps, kernels.Planes{Pix: pix, W: w, H: h})
		if err != nil {
			return w, h, err
		}
		pix, w, h = p.Pix, p.W, p.H
	}
	if direct {
		return w, h, nil
	}
	return w, h, d.packView(t, pix, decLayout, t.CompactOut(slot, w, h))
}

// packView makes a view's output out from its pixels pix (in decLayout):
// packed to the transform's layout, normalized or copied.
func (d *Decoder) packView(t *transform.Transform, pix []byte, decLayout transform.Layout, out []byte) error {
	norm := t.Needs().Norm
	if decLayout != t.Layout() { // planes to HWC
		if norm == nil {
			kernels.CHWToHWC(pix, out)
			return nil
		}
		if cap(d.chw) < len(pix) {
			d.chw = make([]byte, len(pix))
		}
		kernels.CHWToHWC(pix, d.chw[:len(pix)])
		pix = d.chw[:len(pix)]
	}
	if norm != nil {
		normalize(pix, out, t.Layout(), norm)
	} else {
		copy(out, pix)
	}
	return nil
}

// applyGuarded runs a view's steps under recover, as decodeGuarded runs
// the decode: a kernel's bug is one sample's error, never a dead server.
// It returns the image after them (rotate's expand grows it in p's room).
func (d *Decoder) applyGuarded(steps []fn.Step, p kernels.Planes) (_ kernels.Planes, err error) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("pipeline: an op panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: an op panicked: %v", errs.Unsupported, r)
		}
	}()
	for i := range steps {
		if d.ops.Stopped() {
			return p, ops.ErrAbandoned
		}
		if err := steps[i].DrawnError(p.W, p.H); err != nil {
			return p, err
		}
		if p, err = fn.ApplySized(p, &steps[i], &d.ops.Scratch); err != nil {
			return p, err
		}
		if d.ops.Progress != nil {
			d.ops.Progress.Add()
		}
	}
	if d.ops.Stopped() {
		return p, ops.ErrAbandoned // the last step may have stopped half made
	}
	return p, nil
}

// decodeGuarded runs the decode of the plans' views into out at offs
// under recover: a decoder bug or a panic in an image library on hostile
// input becomes ErrCorrupt, not a dead server.
func (d *Decoder) decodeGuarded(data []byte, hd *header, ps []transform.SamplePlan, layout transform.Layout, out []byte, offs []int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			// The stack goes to the log, not into the error: the error
			// travels to clients as a per-sample reason.
			slog.Error("pipeline: decoder panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: decoder panicked: %v", errs.Corrupt, r)
		}
	}()
	if haveFast && !d.opts.reference && hd.format == formatJPEG && hd.comps != 4 {
		return d.decodeFastViews(data, hd, ps, layout, out, offs)
	}
	if haveFast && !d.opts.reference && (hd.format == formatPNG || hd.format == formatWebP) {
		return d.decodeFormatViews(data, hd, ps, layout, out, offs)
	}
	if hd.format == formatJPEG && hd.progressive {
		if n := countScans(data); n > d.opts.maxScans {
			return fmt.Errorf("%w: progressive jpeg has %d scans, over the cap of %d", errs.TooLarge, n, d.opts.maxScans)
		}
	}
	return decodeRefViews(data, ps, layout, out, offs)
}

// countScans counts a JPEG's scans by walking its segment structure, as a
// decoder does: marker segments are skipped by their length, so marker-like
// bytes inside them (an EXIF thumbnail's EOI, say) are not mistaken for the
// file's own markers, and the entropy-coded data after each SOS is skipped
// to the next marker (inside it 0xFF is followed only by 0x00 stuffing, a
// restart marker or more 0xFF fill). Bytes between segments are skipped
// until a 0xFF, as Go's decoder and libjpeg do.
func countScans(data []byte) int {
	n := 0
	for p := 2; p+1 < len(data); {
		if data[p] != 0xFF || data[p+1] == 0xFF {
			p++ // extraneous data or fill before a marker
			continue
		}
		m := data[p+1]
		p += 2
		switch {
		case m == 0xD9:
			return n
		case m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD8):
			continue // no length follows
		}
		if p+2 > len(data) {
			return n
		}
		p += int(binary.BigEndian.Uint16(data[p:]))
		if m != 0xDA {
			continue
		}
		n++
		for ; p+1 < len(data); p++ {
			if data[p] == 0xFF && data[p+1] != 0x00 && data[p+1] != 0xFF && (data[p+1] < 0xD0 || data[p+1] > 0xD7) {
				break
			}
		}
	}
	return n
}
