package pipeline

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
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
	index       *Index     // WithIndex
	coefs       *CoefCache // WithCoefCache
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

// WithDCTScaling sets the DCT scales the fast path may use. Default ScalePow2.
func WithDCTScaling(s DCTScaling) Option { return func(o *options) { o.scaling = s } }

// Decoder turns encoded images into transformed samples. It holds reusable
// scratch, so give each goroutine its own; it is not safe for concurrent use.
// Close it to free its C memory.
type Decoder struct {
	opts options
	fast fastState
	pix  []byte // uint8 pixels before Normalize, when the output is float
	chw  []byte // a HWC sample's planes while its ops run
	// post is the last Decode's time in the ops after decoding (the
	// steps, Normalize), measured when the Decoder times stages (an
	// Executor's, with a StageObserver); 0 otherwise.
	post time.Duration
	// The last Decode's plan and steps (its trace), and the ops' scratch.
	last  samplePlan
	steps []Step
	ops   opScratch
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
func (d *Decoder) Close() { d.fast.free() }

// Fast reports whether this build has the libjpeg-turbo path.
func Fast() bool { return haveFast }

// Decode decodes data, applies t for key k and writes the sample into out,
// which must be t.SampleBytes() long. On error out holds unspecified bytes
// and the error wraps ErrCorrupt, ErrTooLarge or ErrUnsupported.
func (d *Decoder) Decode(data []byte, t *Transform, k Key, out []byte) error {
	if len(out) != t.SampleBytes() {
		return fmt.Errorf("%w: output buffer is %d bytes, sample is %d", ErrUnsupported, len(out), t.SampleBytes())
	}
	hd, err := parseHeader(data)
	if err != nil {
		return err
	}
	if px := int64(hd.w) * int64(hd.h); px > d.opts.pixelBudget {
		return fmt.Errorf("%w: %dx%d is %d pixels, over the budget of %d", ErrTooLarge, hd.w, hd.h, px, d.opts.pixelBudget)
	}
	p, err := t.plan(hd.w, hd.h, k)
	if err != nil {
		return err
	}
	// RandomResizedCrop's fallback (torchvision's formula) rounds a side
	// to zero on images much thinner than its ratio range: (3, 4) on a
	// 1x10 image, say. Neither path can resample an empty crop (the
	// reference path would return a sample of stale bytes).
	if p.cw < 1 || p.ch < 1 {
		return fmt.Errorf("%w: the transform's crop of the %dx%d image is empty (%dx%d)", ErrUnsupported, hd.w, hd.h, p.cw, p.ch)
	}
	d.last = p
	d.steps = d.steps[:0]
	if len(t.post) > 0 {
		if cap(d.steps) < t.maxSteps {
			d.steps = make([]Step, 0, t.maxSteps)
		}
		d.steps = t.drawSteps(k, d.steps)
	}
	pix := out
	if t.norm != nil {
		if cap(d.pix) < t.pixelBytes() {
			d.pix = make([]byte, t.pixelBytes())
		}
		pix = d.pix[:t.pixelBytes()]
	}
	// The ops after the geometry work on planes: a HWC sample with ops is
	// decoded as planes and packed after them.
	planar, layout := pix, t.layout
	if len(d.steps) > 0 && layout == HWC {
		if cap(d.chw) < len(pix) {
			d.chw = make([]byte, len(pix))
		}
		planar, layout = d.chw[:len(pix)], CHW
	}
	if err := d.decodeGuarded(data, &hd, &p, layout, planar); err != nil {
		return err
	}
	var t0 time.Time
	timed := d.opts.stages != nil && (len(d.steps) > 0 || t.norm != nil)
	if timed {
		t0 = time.Now()
	}
	if len(d.steps) > 0 {
		if err := d.applyGuarded(planes{pix: planar, w: t.outW, h: t.outH}); err != nil {
			return err
		}
		if t.layout == HWC {
			chwToHWC(planar, pix)
		}
	}
	if t.norm != nil {
		normalize(pix, out, t.layout, t.norm)
	}
	if timed {
		d.post = time.Since(t0)
	}
	return nil
}

// applyGuarded runs the sample's steps under recover, as decodeGuarded
// runs the decode: a kernel's bug is one sample's error, never a dead
// server.
func (d *Decoder) applyGuarded(p planes) (err error) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("pipeline: an op panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: an op panicked: %v", ErrUnsupported, r)
		}
	}()
	for i := range d.steps {
		applyStep(p, &d.steps[i], &d.ops)
	}
	return nil
}

// chwToHWC packs three planes into interleaved pixels.
func chwToHWC(chw, hwc []byte) {
	n := len(chw) / 3
	r, g, b := chw[:n], chw[n:2*n], chw[2*n:]
	for i := range n {
		hwc[3*i], hwc[3*i+1], hwc[3*i+2] = r[i], g[i], b[i]
	}
}

// decodeGuarded runs the decode under recover: a decoder bug or a panic in
// an image library on hostile input becomes ErrCorrupt, not a dead server.
func (d *Decoder) decodeGuarded(data []byte, hd *header, p *samplePlan, layout Layout, out []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			// The stack goes to the log, not into the error: the error
			// travels to clients as a per-sample reason.
			slog.Error("pipeline: decoder panicked", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: decoder panicked: %v", ErrCorrupt, r)
		}
	}()
	if haveFast && !d.opts.reference && hd.format == formatJPEG && hd.comps != 4 {
		return d.decodeFast(data, hd, p, layout, out)
	}
	if hd.format == formatJPEG && hd.progressive {
		if n := countScans(data); n > d.opts.maxScans {
			return fmt.Errorf("%w: progressive jpeg has %d scans, over the cap of %d", ErrTooLarge, n, d.opts.maxScans)
		}
	}
	return decodeRef(data, p, layout, out)
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
