package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// A worker's scratch that the server's memory budget counts: the decode's
// own pixels (a sample made apart before its output's bytes: each view's
// pixels, the visible part of a crop past the image or of a canvas, the
// planes packed to HWC before Normalize) and a RandomZoomOut's canvas
// made whole in Go (the reference path's: the C path resamples it row by
// row); the masks'
// (the source mask, a byte a pixel; the maps and, after a rotation, an
// affine or a perspective, the canvas indexes, 4 bytes a canvas pixel; the
// runs and a fill block's), the multi-image geometry's (its images
// load_image'd when there is no partner cache, one image decoded whole,
// the canvas, a MixUp's, CutMix's or CopyPaste's image and mask), the
// YOLO kernels' (their planes between load, letterbox and warp) and the
// steps' kernels' (kern: kernels.Scratch, by the kinds of steps,
// transform's KernelScratch, and the spare buffer of the Resize or
// CenterCrop after a RandomRotation(expand=True), GrowBytes); the
// buffers the sample's file and its partners' are read into (files); and
// the C decoders' own memory while they decode (lib: libjpeg's, libpng's,
// libwebp's, codec.Header.LibBytes from each image's header, the largest
// of the sample's and its partners', which are decoded one at a time; a
// JPEG's and a PNG's decode, and a WebP's rows, are capped at it:
// memlim.c, formats.c); and the C resampler's (res: its filters and the
// rows each view resamples across, kept in the decoder's C scratch,
// resBound).
//
// A Decoder holds a reservation (scratch.held) at least what it keeps of
// that scratch (of lib, the largest it reserved: C memory is freed after
// each decode, the reservation kept as a buffer's would be). Before a
// sample's files are read, where the dataset knows their sizes
// (dataset.FileSizer), the reservation grows to hold the buffers they
// will be read into (reserveFiles); else they are counted once read.
// Before a sample is decoded (its header and its partners'
// parsed, nothing of it made) the reservation grows to the bound of what
// the sample may hold (scratchParts.after), waiting up to the budget's wait for
// others to give bytes back; a sample that does not fit fails with the
// budget's error (the sizes named). After it, the reservation is set to
// what the Decoder keeps: the excess given back, and a sample that kept
// more than its bound (a pathological mask's runs) takes the difference
// if it fits, else fails and its scratch is let go: nothing is kept past
// its sample unreserved. A worker lets its scratch go, and gives the reservation back,
// when a job's queue closes and it is idle (Executor.trimIdle), so that
// the budget's scratch returns to zero once no job runs.

// scratchState is a Decoder's reservation: held, at least what
// scratchBytes counts; trimmed, the Executor's trim generation it last let
// its scratch go at (Executor.trimIdle).
type scratchState struct {
	held    int64
	trimmed uint64
	// file and pfiles are the buffers a sample's file and its partners'
	// are read into, reused; lib the C decoders' memory reserved.
	file   []byte
	pfiles [][]byte
	lib    int64
}

// ScratchBudget is where an Executor's workers reserve the scratch the
// memory budget counts (the server's limits.Budget).
type ScratchBudget interface {
	// Acquire takes n bytes, waiting up to wait for others to give some
	// back; its error names what needed them and the budget's numbers.
	Acquire(ctx context.Context, n int64, wait time.Duration, what string) error
	// Try takes n bytes if they fit now.
	Try(n int64) bool
	// Release gives n bytes back.
	Release(n int64)
}

// WithScratchBudget has a Decoder (an Executor's workers) reserve its
// counted scratch in b, a sample waiting up to wait for bytes others give
// back before it fails. Default: none (nothing reserved).
func WithScratchBudget(b ScratchBudget, wait time.Duration) Option {
	return func(o *options) { o.scratch, o.scratchWait = b, wait }
}

// scratchParts are the counted scratch's parts, in bytes: what a Decoder
// keeps of each (scratchBytes), or what a sample needs of each
// (scratchBound); transient, what a sample makes and drops (the overlap
// mask's canvas), is never kept.
type scratchParts struct {
	pix, zoom                   int64 // the decode's own pixels (d.pix, d.chw); a RandomZoomOut's canvas in Go (d.canvas, d.mid)
	pad                         int64 // AnyResResize's canvas resized, before its padding (d.padded: canvasView)
	maskSrc, maskMaps, maskRuns int64 // the source mask, the maps and canvas indexes, the runs
	full, imgs, canvas, others  int64 // a multi-image op's image decoded whole, its images, its canvas, its partners (transform.MultiRoom)
	yolo                        int64 // the YOLO kernels' planes
	kern                        int64 // the steps' kernels' buffers (kernels.Scratch)
	res                         int64 // the C resampler's filters and rows (codec.Scratch.ResamplerBytes)
	files, lib                  int64 // the files' read buffers; the C decoders' own memory
	transient                   int64
}

// sum is the parts' bytes.
func (p scratchParts) sum() int64 {
	return p.pix + p.zoom + p.pad + p.maskSrc + p.maskMaps + p.maskRuns + p.full + p.imgs + p.canvas + p.others + p.yolo + p.kern + p.res + p.files + p.lib + p.transient
}

// after is what a Decoder keeping p (transient none) holds at most while
// it makes a sample that needs need: each part the larger of the two, as
// each buffer grows only to what the sample asks of it.
func (p *scratchParts) after(need *scratchParts) int64 {
	return max(p.pix, need.pix) + max(p.zoom, need.zoom) + max(p.pad, need.pad) +
		max(p.maskSrc, need.maskSrc) + max(p.maskMaps, need.maskMaps) + max(p.maskRuns, need.maskRuns) +
		max(p.full, need.full) + max(p.imgs, need.imgs) + max(p.canvas, need.canvas) + max(p.others, need.others) +
		max(p.yolo, need.yolo) + max(p.kern, need.kern) + max(p.res, need.res) + max(p.files, need.files) + max(p.lib, need.lib) + need.transient
}

// scratchBytes is what the Decoder keeps of the counted scratch.
func (d *Decoder) scratchBytes() scratchParts {
	var p scratchParts
	p.pix, p.zoom, p.pad = int64(cap(d.pix)+cap(d.chw)), int64(cap(d.canvas)+cap(d.mid)), int64(cap(d.padded))
	p.maskSrc, p.maskMaps, p.maskRuns = d.targets.ScratchBytes()
	m := &d.multi
	p.full = int64(cap(m.full))
	p.canvas, p.others = m.made.Held()
	for _, b := range m.imgs[:cap(m.imgs)] {
		p.imgs += int64(cap(b))
	}
	for _, b := range d.yoloRoom {
		p.yolo += int64(cap(b))
	}
	p.kern = d.ops.Held()
	p.res = d.fast.resampler()
	p.files = int64(cap(d.scratch.file))
	for _, b := range d.scratch.pfiles {
		p.files += int64(cap(b))
	}
	p.lib = d.scratch.lib
	return p
}

// dropScratch lets the counted scratch go and gives its reservation back.
func (d *Decoder) dropScratch() {
	d.targets.DropScratch()
	d.pix, d.chw, d.canvas, d.mid, d.padded = nil, nil, nil, nil, nil
	m := &d.multi
	m.full = nil
	m.made.Drop()
	clear(m.imgs[:cap(m.imgs)])
	d.yoloRoom = transform.YOLOScratch{}
	d.ops.Drop()
	d.fast.free()
	// The files' buffers dropped, not cleared: a sample that lets its
	// scratch go before it is made still reads its files' bytes.
	d.scratch.file, d.scratch.pfiles, d.scratch.lib = nil, nil, 0
	if d.opts.scratch != nil && d.scratch.held > 0 {
		d.opts.scratch.Release(d.scratch.held)
	}
	d.scratch.held = 0
}

// trimScratch is dropScratch for an idle worker whose scratch is counted
// (a Decoder without a ScratchBudget keeps its scratch).
func (d *Decoder) trimScratch(gen uint64) {
	if d.opts.scratch != nil {
		d.dropScratch()
	}
	d.scratch.trimmed = gen
}

// SampleScratch is the counted scratch a sample of t needs at most for
// images (its own and its partners') of at most w x h, fs the fields its
// targets carry; with w and h 0, what it needs whatever its image's size
// (the output's, a multi-image op's side and the YOLO ops' alone). A job one of
// whose samples the memory budget cannot hold is refused when it opens.
func SampleScratch(t *transform.Transform, fs *dataset.FieldSet, w, h int) int64 {
	px := int64(w) * int64(h)
	_, multi := t.MultiRoom()
	p := scratchBound(t, multi, false, !haveFast, w, h, px, fs)
	n := p.sum() + resBound(t, multi, !haveFast, w, h, w, h)
	if e, _, ok := t.StopEpoch(); ok { // the ops after stop_epoch
		at := t.AtEpoch(e)
		_, multi = at.MultiRoom()
		p = scratchBound(at, multi, false, !haveFast, w, h, px, fs)
		n = max(n, p.sum()+resBound(at, multi, !haveFast, w, h, w, h))
	}
	return n
}

// ResamplerScratch is the part of SampleScratch that the decoder's C
// resampler keeps (resBound) for images of at most w x h.
func ResamplerScratch(t *transform.Transform, w, h int) int64 {
	_, multi := t.MultiRoom()
	return resBound(t, multi, !haveFast, w, h, w, h)
}

// scratchBound bounds the counted scratch a sample of at (its transform
// at the sample's epoch; multi: its multi-image op applies) needs while it is
// made, by part: its image w x h, its partners' largest ppx pixels, fs the
// fields its targets carry; cached: the load_image'd images are a
// partner cache's (counted there); goCanvas: a RandomZoomOut's canvas is
// made whole in Go (the reference path, a build without cgo). Each buffer
// is counted at the size the sample asks of it (an image decoded whole at
// the largest of the sample's and its partners', though one already
// imgsz needs none); the runs of masks, whose number the pixels bound
// only loosely, at 64 KiB (masks of a few regions take less): more is
// taken after (settleScratch).
func scratchBound(t *transform.Transform, multi, cached, goCanvas bool, w, h int, ppx int64, fs *dataset.FieldSet) scratchParts {
	at := t.Needs()
	var p scratchParts
	src := int64(w) * int64(h)
	oh, ow := t.Size()
	out := int64(ow) * int64(oh)
	p.pix, p.zoom, p.pad = decodeBound(t, multi, goCanvas, w, h)
	if mr, ok := t.MultiRoom(); multi && ok {
		// The images load_image'd (the partner cache's, when there is
		// one), one image decoded whole, the canvas, the partners made
		// at the output's size.
		if !cached {
			p.imgs = mr.Images
		}
		if mr.Whole { // a partner loaded whole: in an image's place, or the partner cache's (new memory where over its budget)
			p.imgs += 3 * max(src, ppx)
		}
		p.full, p.canvas, p.others = 3*max(src, ppx), mr.Canvas, mr.Partners
	} else if at.YOLOSide > 0 {
		// The planes: the image unpacked from HWC, loaded (at most imgsz
		// a side), letterboxed and warped (at most the output's, or the
		// loaded size unpadded).
		s := int64(at.YOLOSide)
		if t.Layout() == transform.HWC {
			p.yolo += 3 * src
		}
		p.yolo += 3*s*s + 2*3*max(out, s*s)
	}
	p.kern = kernBound(t, w, h)
	if fs.Masks() {
		// The source mask and its rows; the maps of rows and columns
		// (ys, xs and a spare) and, with a rotation or an affine (after
		// the geometry, on a canvas at most the largest image the ops
		// make), three canvas indexes of 4 bytes a pixel; the runs and
		// a fill block's.
		p.maskSrc = src + int64(h)
		p.maskMaps = 3 * 4 * int64(max(w, ow)+max(h, oh))
		if at.Whole { // the maps of the rotated canvas: its sides at most the image's sum, and 2
			p.maskMaps = 3 * 4 * int64(2*(w+h+2)+ow+oh)
		}
		if at.Turns {
			p.maskMaps += 3 * 4 * int64(t.RoomFor(w, h)/3)
		}
		p.maskRuns = 64 << 10
	}
	if fs.OverlapMask() {
		// PolygonsToMasksOverlap's canvas (4 bytes a pixel) and a
		// polygon mask's: made and dropped within the sample.
		p.transient = 5 * out
	}
	return p
}

// kernBound bounds the steps' kernels' buffers (kernels.Scratch) a
// sample of at keeps for a w x h image: by the kinds of its steps
// (transform's KernelScratch: none for steps that keep nothing), for the
// largest image they work on (each view's room: its output, or a
// RandomRotation(expand=True) first's rotation; the image at its own size
// for the photometric steps before the geometry), and the steps' spare
// buffer after a RandomRotation(expand=True) first (GrowBytes).
func kernBound(t *transform.Transform, w, h int) int64 {
	at := t.Needs()
	var px int64
	oh, ow := t.Size()
	side := int64(w + h + ow + oh) // a rotation's canvas: its sides at most the image's sum
	k := at.Kernel
	if at.MaxPre > 0 {
		px = int64(w) * int64(h)
	}
	for i := range t.Views() { // t itself, of one view
		v := t.View(i)
		vs := v.Needs()
		if vs.MaxSteps > 0 {
			px = max(px, int64(v.RoomFor(w, h)/3))
			vh, vw := v.Size()
			side = max(side, int64(w+h+vw+vh))
		}
		vk := vs.Kernel
		k.PerPx, k.PerSide, k.Fixed = max(k.PerPx, vk.PerPx), max(k.PerSide, vk.PerSide), max(k.Fixed, vk.Fixed)
	}
	if at.MaxSteps > 0 {
		px = max(px, int64(t.PixelBytes()/3))
	}
	grow := int64(t.GrowBytes(w, h)) // the Resize or CenterCrop after a rotation's expand
	if px == 0 {
		return grow
	}
	return k.PerPx*px + k.PerSide*side + k.Fixed + grow
}

// resBound bounds what the decoder's C resampler keeps (res:
// codec.Scratch's ResamplerBytes, each buffer grown a quarter past what
// a decode asks) after the C decodes of a sample of at (multi: its
// multi-image op applies) of a w x h image, its partners' sides at most pw x ph:
// for each view, its rows resampled across (3 bytes a pixel of its
// output's width by the source rows its taps read: the image's height at
// most, a RandomZoomOut canvas's) and its filters (taps and weights:
// about 170 bytes a source column or row, at most 4 taps a pixel of the
// downscale's ratio, and 153 an output one); the decoded rows (at most
// four, with their taps' slack) and the vertical pass's. A view's output
// is its own size, or the image's where it may be decoded at its own size
// (MayPad, Whole, a multi-image op's images, made whole; a crop's before the
// geometry, then resized as a canvas); 0 on the reference path
// (no C decode).
func resBound(t *transform.Transform, multi, goRef bool, w, h, pw, ph int) int64 {
	if goRef || w <= 0 || h <= 0 {
		return 0
	}
	view := func(nw, nh, sw, sh int64) int64 {
		return 5*(3*nw*sh+4)/4 + 170*(sw+sh) + 153*(nw+nh) + 800
	}
	rows := func(sw, sh, nw int64) int64 { return 100*sw + 40*sh + 2*nw + 2048 }
	W, H := int64(w), int64(h)
	if mr, ok := t.MultiRoom(); multi && ok {
		// Each image made whole (at its own size, or loaded at its
		// side), a partner made at the output's.
		sw, sh := max(W, int64(pw)), max(H, int64(ph))
		oh, ow := t.Size()
		nw, nh := max(sw, int64(mr.Side), int64(ow)), max(sh, int64(mr.Side), int64(oh))
		return view(nw, nh, sw, sh) + rows(sw, sh, nw)
	}
	var n, most int64
	for i := range t.Views() { // t itself, of one view
		v := t.View(i)
		vn := v.Needs()
		vh, vw := v.Size()
		nw, nh := int64(max(vw, vn.GeomW)), int64(vh)
		if s := int64(vn.YOLOSide); s > 0 {
			nw, nh = max(nw, s), max(nh, s)
		}
		sw, sh := v.SeenSize(w, h) // a crop's before the geometry: decoded at its size, then resized
		if vn.MayPad || vn.Whole || v.Varies() {
			nw, nh = max(nw, W, int64(sw)), max(nh, H, int64(sh))
		}
		if px := int64(v.PixelBytes() / 3); nw > 0 {
			nh = max(nh, px/nw)
		}
		n += view(nw, nh, W, H)
		most = max(most, nw)
		if cw, ch := v.ZoomCanvas(w, h); cw > 0 { // the canvas resized from its crop, row by row
			n += view(int64(vw), int64(vh), cw, ch)
			W, H = max(W, cw), max(H, ch)
		} else if sw != w || sh != h { // the crop's canvas resized
			n += view(int64(vw), int64(vh), int64(sw), int64(sh))
			W, H = max(W, int64(sw)), max(H, int64(sh))
		}
	}
	return n + rows(W, H, most)
}

// decodeBound bounds the decode's own pixels a sample of at (multi: its
// multi-image op applies) holds for a w x h image (decodeAt, decodeMulti): when a
// view is made apart from the output (Staged), every view's pixels
// (PixelBytes), each view's visible part decoded apart where its geometry
// may pad (MayPad: the image at its own size, a crop's before the
// geometry, or the output's), and the planes packed to HWC before
// Normalize; a multi-image op's canvas when it is not made in the output. zoom is
// a canvas made whole in Go (goCanvas): RGBA at the largest RandomZoomOut
// canvas (side_range's maximum of each side, rounded up), and its
// resize's rows. pad is an AnyResResize's canvas resized before its
// padding (PadsCanvas), at most its view's room.
func decodeBound(t *transform.Transform, multi, goCanvas bool, w, h int) (pix, zoom, pad int64) {
	norm := t.Needs().Norm != nil
	src := 3 * int64(w) * int64(h)
	if multi {
		if t.Layout() != transform.CHW || norm || t.Varies() {
			pix = int64(t.PixelBytes())
			if t.Layout() == transform.HWC && norm {
				pix *= 2
			}
		}
		return pix, 0, 0
	}
	view, nv := t.View, t.Views() // t itself, of one view
	staged := false
	for i := range nv {
		staged = staged || view(i).Needs().Staged
	}
	var chw int64
	for i := range nv {
		vt := view(i)
		vn := vt.Needs()
		pb := int64(vt.RoomFor(w, h))
		sw, sh := vt.SeenSize(w, h) // the image the geometry takes: a crop's before it
		if staged {
			pix += pb
			if vn.MayPad {
				pix += max(src, 3*int64(sw)*int64(sh), pb)
			}
			if vt.Layout() == transform.HWC && vn.Norm != nil {
				chw = max(chw, pb)
			}
			if vn.PadsCanvas { // the Decoder's padded: the canvas resized, before its padding
				pad = max(pad, pb)
			}
		}
		if goCanvas && vn.MayPad && w > 0 && h > 0 {
			cw, ch := vt.ZoomCanvas(w, h)
			if cw == 0 { // the image's own canvas
				cw, ch = int64(sw)+1, int64(sh)+1
			}
			_, vw := vt.Size()
			zoom = max(zoom, 4*cw*ch+3*int64(vw)*ch)
		}
	}
	return pix + chw, zoom, pad
}

// addRoom is n and the room a sample of vt is made in for its image hd
// (the view's RoomFor); an image whose room (a RandomRotation with
// expand=True first: its rotation's bound) is over the pixel budget
// fails, naming it.
func (d *Decoder) addRoom(n int, vt *transform.Transform, hd *header) (int, error) {
	room := vt.RoomFor(hd.w, hd.h)
	if px := int64(room / 3); px > d.opts.pixelBudget {
		return n, fmt.Errorf("%w: the ops' largest image of the %dx%d image is %d pixels, over the budget of %d", errs.TooLarge, hd.w, hd.h, px, d.opts.pixelBudget)
	}
	return n + room, nil
}

// bySize says whether a view of at may decode its visible part apart
// (its Needs' MayPad) or is made in a room of its image's
// (Whole): its bound depends on the image's size.
func bySize(t *transform.Transform) bool {
	for v := range t.Views() { // t itself, of one view
		if n := t.View(v).Needs(); n.MayPad || n.Whole {
			return true
		}
	}
	return false
}

// reserveFiles grows the Decoder's reservation, before sample idx of ds
// and its partners pidx are read, to hold the buffers they will be read
// into, where ds knows their sizes (dataset.FileSizer): a buffer too
// small for its file grows to it and a quarter (the datasets' readCapped).
// Else nothing is reserved here, and reserveScratch counts the buffers
// once read.
func (d *Decoder) reserveFiles(ctx context.Context, ds dataset.Dataset, idx int, pidx []int) error {
	b := d.opts.scratch
	if b == nil {
		return nil
	}
	fz, ok := ds.(dataset.FileSizer)
	if !ok {
		return nil
	}
	grown := func(buf []byte, i int) int64 {
		n, ok := fz.FileSize(i)
		if !ok || n <= int64(cap(buf)) {
			return int64(cap(buf))
		}
		return n + n/4
	}
	var files, sizes int64
	files = grown(d.scratch.file, idx)
	for j, p := range pidx {
		var buf []byte
		if j < len(d.scratch.pfiles) {
			buf = d.scratch.pfiles[j]
		}
		files += grown(buf, p)
	}
	for j := len(pidx); j < len(d.scratch.pfiles); j++ {
		files += int64(cap(d.scratch.pfiles[j]))
	}
	kept := d.scratchBytes()
	bound := scratchParts{files: files}
	need := kept.after(&bound)
	if need <= d.scratch.held {
		return nil
	}
	for _, i := range append([]int{idx}, pidx...) {
		n, _ := fz.FileSize(i)
		sizes += n
	}
	what := fmt.Sprintf("a sample's files (%d bytes: its own", sizes)
	if len(pidx) > 0 {
		what += fmt.Sprintf(" and %d partners'", len(pidx))
	}
	what += ") read into its worker's buffers"
	err := b.Acquire(ctx, need-d.scratch.held, d.opts.scratchWait, what)
	if err != nil && d.scratch.held > 0 {
		// Nothing of the sample is read yet: let the worker's scratch go
		// and take the files' alone if they fit.
		d.dropScratch()
		need = 0
		for _, i := range append([]int{idx}, pidx...) {
			need += grown(nil, i)
		}
		if b.Try(need) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("sample files: %w", err)
	}
	d.scratch.held = need
	return nil
}

// reserveScratch grows the Decoder's reservation to what a sample of t
// at k (data its file, pdata its partners', both read into the
// Decoder's buffers) may hold, before any of it is made, waiting under
// ctx (its Fill's, ended when the job closes); its error (the budget's or
// ctx's, wrapped) fails the sample.
func (d *Decoder) reserveScratch(ctx context.Context, data []byte, t *transform.Transform, k det.Key, pdata [][]byte, fs *dataset.FieldSet) error {
	b := d.opts.scratch
	if b == nil {
		return nil
	}
	// A header that does not parse, or over the pixel budget, fails the
	// decode with its own error: the bound counts no image then.
	size := func(data []byte) (int, int, int64) {
		hd, err := parseHeader(data)
		if err != nil || int64(hd.w)*int64(hd.h) > d.opts.pixelBudget {
			return 0, 0, 0
		}
		return hd.w, hd.h, hd.libBytes()
	}
	t = t.AtEpoch(k.Epoch)
	at := t.Needs()
	multi := t.Multi(k)
	iw, ih, lib := size(data)
	var w, h, pmw, pmh int
	var ppx int64
	for _, p := range pdata {
		pw, ph, pl := size(p)
		ppx, lib = max(ppx, int64(pw)*int64(ph)), max(lib, pl)
		pmw, pmh = max(pmw, pw), max(pmh, ph)
	}
	// Only a multi-image op's, the YOLO kernels', the masks', a padded or
	// canvas geometry's and a whole image's room depend on the images'
	// sizes (the C decoders' and the resampler's memory on every
	// image's).
	if multi || at.YOLOSide > 0 || fs.Masks() || bySize(t) || at.MaxPre > 0 {
		w, h = iw, ih
	} else {
		ppx = 0
	}
	bound := scratchBound(t, multi, d.opts.partners != nil, !haveFast || d.opts.reference, w, h, ppx, fs)
	bound.lib = lib
	bound.res = resBound(t, multi, !haveFast || d.opts.reference, iw, ih, pmw, pmh)
	bound.files = int64(cap(data))
	for _, p := range pdata {
		bound.files += int64(cap(p))
	}
	kept := d.scratchBytes()
	need := kept.after(&bound)
	if need <= d.scratch.held {
		d.scratch.lib = max(d.scratch.lib, lib)
		return nil
	}
	what := fmt.Sprintf("a sample's worker scratch (decoded pixels, masks, mosaic, YOLO and steps' kernels, C resampler, files, C decoder) for its %dx%d image", iw, ih)
	if len(pdata) > 0 {
		what += fmt.Sprintf(" and %d partners of up to %d pixels", len(pdata), ppx)
	}
	err := b.Acquire(ctx, need-d.scratch.held, d.opts.scratchWait, what)
	if err != nil && d.scratch.held > 0 {
		// What this worker keeps from its last samples may be what is
		// missing: let it go and take the whole bound if it fits (the
		// files' buffers of this sample kept).
		d.dropScratch()
		d.scratch.file, d.scratch.pfiles = data, pdata
		if need = bound.sum(); b.Try(need) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("sample scratch: %w", err)
	}
	d.scratch.held = need
	d.scratch.lib = max(d.scratch.lib, lib)
	return nil
}

// settleScratch sets the reservation to what the Decoder keeps after a
// sample: the excess given back; more kept than reserved taken if it
// fits, else the scratch let go and the sample failed (err, when nil).
func (d *Decoder) settleScratch(err error) error {
	b := d.opts.scratch
	if b == nil {
		return err
	}
	kept := d.scratchBytes().sum()
	switch {
	case kept < d.scratch.held:
		b.Release(d.scratch.held - kept)
	case kept > d.scratch.held && !b.Try(kept-d.scratch.held):
		over := kept - d.scratch.held
		d.dropScratch()
		if err == nil {
			err = fmt.Errorf("sample scratch: the sample kept %d bytes of scratch, %d more than reserved, and the memory budget does not have them (--memory-budget)", kept, over)
		}
		return err
	}
	d.scratch.held = kept
	return err
}
