package transform

import (
	"fmt"
	"strconv"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// The multi-image family (ultralytics' Mosaic, MixUp, CopyPaste and
// CutMix), in three files: its ops, their places, checks and draws
// (op_mosaic.go); here, its ops in a transform (multiOps), their
// stop_epoch, cost, room and partners, the making of a sample's pixels
// from its plan (PlanMulti's MultiDraw) and its trace, and, at the end,
// the CopyPaste's checks, partners and draw; its targets' moves
// (op_multi_targets.go). newTransform's loop and the executor know
// partners and images, never the ops' names.
//
// The executor loads each image (Loader: decoded whole and resized as
// ultralytics' load_image, from its partner cache or not) and keeps the
// buffers (MultiScratch); Make lays the images out, pastes, warps and
// mixes them, with the YOLO family's kernels (pipeline/kernels/cv).

// multiOps are a transform's multi-image ops, nil where absent: each
// checked where it stands (their placers, op_mosaic.go; the CopyPaste's
// below), drawn (op_mosaic.go), made (below) and its targets moved
// (op_multi_targets.go) by the family alone.
type multiOps struct {
	// mosaic is ultralytics' Mosaic, if any: the geometry, its partners
	// read with the sample (op_mosaic.go, the root's decode_multi.go).
	mosaic *optab.Op
	mixup  *optab.Op // ultralytics' MixUp, right after the mosaic
	// copyPaste and copyPasteMix: ultralytics' CopyPaste in flip mode,
	// right after the mosaic, and in mixup mode, after its warp.
	copyPaste, copyPasteMix *optab.Op
	cutmix                  *optab.Op // ultralytics' CutMix, last of the multi-image geometry
}

// YOLOStopOps are the ops ultralytics' close_mosaic switches off
// (YOLODataset.close_mosaic: mosaic, mixup, copy_paste and cutmix to 0;
// stoker has them all): the stop's default for a transform with a
// Mosaic. close_mosaic=N of a run of E epochs is stop_epoch E-N.
var YOLOStopOps = []optab.OpKind{OpMosaic, OpMixUp, OpCopyPaste, OpCutMix}

// stopMulti switches off in a (t's variant after its stop_epoch) the
// family's ops that off marks (index: an op's position in t's ops, -1
// where absent), marking each of t's used, as ultralytics' close_mosaic
// does: the MixUp, the mosaic (its YOLORandomPerspective then takes the
// image at its load_image size), and the CopyPastes and CutMix with it.
func (t *Transform) stopMulti(a *Transform, index func(*optab.Op) int, off, used []bool) error {
	if i := index(t.mixup); i >= 0 { // ultralytics' close_mosaic closes MixUp
		used[i] = true
		if off[i] {
			a.mixup = nil
		}
	}
	if i := index(t.mosaic); i >= 0 { // and the Mosaic: load_image then the warp
		used[i] = true
		if off[i] {
			if t.yolo == nil || a.mixup != nil {
				return fmt.Errorf("%w: stop_epoch: the YOLOMosaic can be switched off only with a YOLORandomPerspective(size=...) after it, which then takes the image at its load_image size (ultralytics' close_mosaic), and with the YOLOMixUp after it, if any", errs.Unsupported)
			}
			a.mosaic = nil
		}
	}
	if i := index(t.copyPaste); i >= 0 { // and CopyPaste (its copy_paste 0), with the Mosaic or alone
		used[i] = true
		if off[i] || a.mosaic == nil {
			a.copyPaste = nil
		}
	}
	if i := index(t.copyPasteMix); i >= 0 { // CopyPaste in mixup mode, likewise
		used[i] = true
		if off[i] || a.mosaic == nil {
			a.copyPasteMix = nil
		}
	}
	if i := index(t.cutmix); i >= 0 { // and CutMix, likewise
		used[i] = true
		if off[i] || a.mosaic == nil {
			a.cutmix = nil
		}
	}
	return nil
}

// Multi says whether the sample of key k is made of several images (a
// multi-image op applies at its epoch and draws to): PlanMulti plans it, from
// its partners' files.
func (t *Transform) Multi(k det.Key) bool {
	at := t.AtEpoch(k.Epoch)
	return at.mosaic != nil && at.mosaicOn(k)
}

// PartnersOf is the partner indices of the sample of key k in a dataset
// of size samples for t (nil when t has no multi-image op at k's epoch),
// in the order its decode takes them (multiPartners): what a caller of
// Decode reads and hands over with the sample (pipeline.Sample's
// Partners).
func (t *Transform) PartnersOf(k det.Key, size int) []int {
	return t.multiPartners(k, size, nil)
}

// AppendPartners is PartnersOf appended to buf[:0] (reused): what the
// executor reads in a sample's lease.
func (t *Transform) AppendPartners(buf []int, k det.Key, size int) []int {
	return t.multiPartners(k, size, buf)
}

// MultiRoom is the room, in bytes, that making a sample whose
// multi-image op applies takes beside its own image's decode: what the
// root's scratch bound (pipeline/scratch.go) counts for the op, from the
// op's own arguments and the ops that take partners after it.
type MultiRoom struct {
	Images   int64 // the images load_image'd at Side (a partner cache's, where there is one)
	Canvas   int64 // the canvas they are laid out on
	Partners int64 // the partners made at the output's size: a MixUp's, a CutMix's, a CopyPaste's image, mask and points
	Side     int   // the long side the images are loaded at: what each is resampled to at least
	// The ops after the Mosaic in force (a stop_epoch's transform has
	// none of those it switched off), each with its partner.
	MixUp, CopyPaste, CutMix bool
}

// MultiRoom is the room of t's multi-image op (ok false: t has none at
// this epoch; AtEpoch's transform has the ops a stop_epoch leaves).
func (t *Transform) MultiRoom() (r MultiRoom, ok bool) {
	mo := t.mosaic
	if mo == nil {
		return r, false
	}
	s := int64(mo.ImgSz)
	side := 2 * s // the canvas: 2 x 2 tiles, or 3 x 3
	if mo.Tiles == 9 {
		side = 3 * s
	}
	out := int64(t.outW) * int64(t.outH)
	r = MultiRoom{Images: 3 * int64(mo.Tiles) * s * s, Canvas: 3 * side * side, Side: mo.ImgSz,
		MixUp: t.mixup != nil, CopyPaste: t.copyPaste != nil || t.copyPasteMix != nil, CutMix: t.cutmix != nil}
	if r.MixUp {
		r.Partners += 3 * out
	}
	if r.CutMix {
		r.Partners += 3 * out
	}
	if r.CopyPaste {
		r.Partners += 3*out + out + 8*out // the image, its mask, its points
	}
	return r, true
}

// multiNs is what a multi-image op (and a MixUp after it) adds to a sample's
// cost beyond the sample's own decode and YOLO geometry (canvasNs), mean
// and worst. At worst (no partner cache, or every image a miss): its n-1
// partners' reads and decodes at the source size and every image's
// load_image resize (yoloResizeNs an output pixel, at most imgsz a side),
// besides the canvas of 114 (2*imgsz a side). In the mean, the partner
// cache's hits: a server has one by default (--partner-budget), and one
// that holds a window decodes each photo about once an epoch, so about
// one image a sample is decoded and resized, which the sample's own
// decode and geometry price; the partners add their reads and the
// canvas. A MixUp's (and a CutMix's) partner is one more such sample, its warp and the
// blend (its own image a hit too in the mean).
func (t *Transform) multiNs(srcPx, px float64) (mean, worst float64) {
	if t.mosaic == nil {
		return 0, 0
	}
	s := float64(t.mosaic.ImgSz)
	n := float64(t.mosaic.Tiles)
	side := float64(s * s)
	canvas := float64(CanvasNs * float64(4*side))
	load := float64(SampleNs + float64(DecodeNs*srcPx)) // a partner's read and decode
	one := float64((n-1)*load) + float64(n*float64(YOLOResizeNs*side)) + canvas
	hit := float64((n-1)*SampleNs) + canvas
	if t.copyPaste != nil { // its mask and paste, about a canvas again
		one, hit = one+canvas, hit+canvas
	}
	mean, worst = float64(t.mosaic.P*hit), one
	mix := float64(one+load) + float64(CanvasOutNs*px)
	mixHit := float64(hit+SampleNs) + float64(CanvasOutNs*px)
	if t.yolo != nil {
		mix += t.yolo.ns(srcPx, px)
		mixHit += float64(YOLOWarpNs * px)
	}
	// pres and presWorst: the pre_transforms made, the sample's and its
	// partners', in the mean and at worst.
	pres, presWorst := 1.0, 1.0
	for _, op := range []*optab.Op{t.mixup, t.cutmix} { // a CutMix's partner is one more such sample
		if op != nil {
			mean += float64(op.P * mixHit)
			worst += mix
			pres, presWorst = pres+op.P, presWorst+1
		}
	}
	if cp := t.copyPasteMix; cp != nil { // CopyPaste in mixup mode: each pre_transform's partner, and its mask and paste
		mean += float64(pres * cp.P * float64(mixHit+float64(CanvasOutNs*px)))
		worst += float64(presWorst * float64(mix+float64(CanvasOutNs*px)))
	}
	return mean, worst
}

// The family's entries in a sample's trace (its plan's ViewPlan.Multi).

// appendJSON appends the mosaic's arguments: {n, imgsz, indexes (the
// sample's first, then its partners), sizes ((w, h) each, as load_image
// resized it), xc, yc, and after a YOLOCopyPaste copy_paste: the copies
// it pasted}.
func (m *MosaicDraw) appendJSON(b []byte) []byte {
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, int64(m.N), 10)
	b = append(b, `,"imgsz":`...)
	b = strconv.AppendInt(b, int64(m.Imgsz), 10)
	b = append(b, `,"indexes":`...)
	b = fn.AppendInts(b, m.Idx)
	b = append(b, `,"sizes":[`...)
	for i, s := range m.Sizes {
		if i > 0 {
			b = append(b, ',')
		}
		b = fn.AppendInts(b, s[:])
	}
	b = append(b, `],"xc":`...)
	b = strconv.AppendInt(b, int64(m.XC), 10)
	b = append(b, `,"yc":`...)
	b = strconv.AppendInt(b, int64(m.YC), 10)
	if m.CP {
		b = append(b, `,"copy_paste":`...)
		b = strconv.AppendInt(b, int64(m.Pasted), 10)
	}
	return append(b, '}')
}

// AppendJSON appends the sample's multi-image entries to its trace:
// ["mosaic", {its arguments}], then, when its MixUp applied, ["mixup",
// {"r": the ratio, "mosaic": the partner's mosaic}].
func (m *MultiDraw) AppendJSON(b []byte) []byte {
	b = append(b, `["yolo_mosaic",`...)
	b = m.Mo.appendJSON(b)
	b = append(b, ']')
	if m.Persp {
		b = append(b, ',')
		st := m.perspStep(&m.PP)
		b = st.AppendJSON(b)
	}
	b = m.CPM.appendJSON(b, `,["yolo_copy_paste",`, "]", m)
	if m.Mix {
		b = append(b, `,["yolo_mixup",{"r":`...)
		b = fn.AppendFloat(b, m.MixR)
		b = append(b, `,"mosaic":`...)
		b = m.MixM.appendJSON(b)
		if m.Persp {
			b = append(b, `,"perspective":`...)
			st := m.perspStep(&m.MixPP)
			b = st.AppendJSON(b)
		}
		b = m.MixCPM.appendJSON(b, `,"copy_paste":`, "", m)
		b = append(b, "}]"...)
	}
	if m.Cut { // ["yolo_cutmix", {"areas": [[lam, cx, cy], ...], "choice", "applied", "mosaic", "perspective"}]
		b = append(b, `,["yolo_cutmix",{"areas":[`...)
		for i, a := range m.CutAreas {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(fn.AppendFloat(append(b, '['), a.lam), ',')
			b = append(strconv.AppendInt(append(strconv.AppendInt(b, int64(a.cx), 10), ','), int64(a.cy), 10), ']')
		}
		b = strconv.AppendInt(append(b, `],"choice":`...), int64(m.CutChoice), 10)
		b = strconv.AppendBool(append(b, `,"applied":`...), m.CutOK)
		b = m.CutM.appendJSON(append(b, `,"mosaic":`...))
		if m.Persp {
			st := m.perspStep(&m.CutPP)
			b = st.AppendJSON(append(b, `,"perspective":`...))
		}
		b = m.CutCPM.appendJSON(b, `,"copy_paste":`, "", m)
		b = append(b, "}]"...)
	}
	return b
}

// perspStep is the YOLORandomPerspective's step of draw pp, as yoloSteps
// writes it.
func (m *MultiDraw) perspStep(pp *cv.PerspectiveParams) fn.Step {
	st := fn.Step{Fn: fn.YOLOPerspective, I: [6]int{4: m.H, 5: m.W}, F: [6]float64{pp.Angle, pp.Scale, pp.ShearX, pp.ShearY, pp.TX, pp.TY},
		Center: [2]float64{pp.PX, pp.PY}}
	if m.Warp {
		st.I[0] = 1
	}
	return st
}

// Loader is what making a multi-image sample asks of its executor.
type Loader interface {
	// LoadImage is ultralytics' load_image of the image in data: decoded
	// whole, then resized (cv2.INTER_LINEAR) so that its long side is
	// side, into the executor's image j (or its partner cache's), read
	// only and held until Release.
	LoadImage(data []byte, j, side int) (kernels.Planes, error)
	// Release ends the holds of the images loaded since the last.
	Release()
	// Stopped says whether the sample was abandoned (its lease ended):
	// making stops with optab.ErrAbandoned.
	Stopped() bool
}

// MultiScratch is the buffers making a multi-image sample reuses from
// sample to sample (an executor keeps one for each of its decoders).
type MultiScratch struct {
	// canvas is a mosaic's before the YOLORandomPerspective after it, mix
	// and cut a MixUp's and a CutMix's partner's image.
	canvas, mix, cut []byte
	// cpMask and cpPts: a CopyPaste's mask and a segment's points; cpImg
	// a CopyPaste's partner in mixup mode.
	cpMask, cpImg []byte
	cpPts         [][2]int32
	pl            []kernels.Planes
	// FullCanvas makes a warped mosaic's whole canvas, not only what its
	// warp reads: the tests' reference for the same bytes.
	FullCanvas bool
}

// Held is what s keeps: the canvas, and the partners' images, masks and
// points.
func (s *MultiScratch) Held() (canvas, others int64) {
	return int64(cap(s.canvas)), int64(cap(s.mix) + cap(s.cut) + cap(s.cpMask) + cap(s.cpImg) + 8*cap(s.cpPts))
}

// Drop lets s's buffers go.
func (s *MultiScratch) Drop() {
	s.canvas, s.mix, s.cut, s.cpMask, s.cpImg, s.cpPts = nil, nil, nil, nil, nil, nil
}

// Make makes the pixels md drew into img (the sample's size, CHW): its
// pre_transform, then its MixUp partner's mixed in and its CutMix
// partner's area pasted, when they were drawn.
func (md *MultiDraw) Make(img kernels.Planes, l Loader, s *MultiScratch) error {
	if err := md.makePre(img, &md.Pres[PreSelf], l, s); err != nil {
		return err
	}
	if md.Mix {
		mc := scratchPlanes(&s.mix, img.W, img.H)
		if err := md.makePre(mc, &md.Pres[PreMix], l, s); err != nil {
			return fmt.Errorf("mixup partner (sample %d): %w", md.Pres[PreMix].Self, err)
		}
		cv.MixUp(img, mc, md.MixR, cv.Instances{}, cv.Instances{})
	}
	if md.CutOK { // the partner's pixels in the area chosen (CutMix.apply_image)
		cc := scratchPlanes(&s.cut, img.W, img.H)
		if err := md.makePre(cc, &md.Pres[PreCut], l, s); err != nil {
			return fmt.Errorf("cutmix partner (sample %d): %w", md.Pres[PreCut].Self, err)
		}
		cv.CutMixImage(img, cc, md.CutArea(md.CutChoice))
	}
	return nil
}

// scratchPlanes is a w x h image in *buf (grown as needed).
func scratchPlanes(buf *[]byte, w, h int) kernels.Planes {
	if cap(*buf) < 3*w*h {
		*buf = make([]byte, 3*w*h)
	}
	return kernels.Planes{Pix: (*buf)[:3*w*h], W: w, H: h}
}

// makePre makes pre_transform pr, drawn, into dst: its mosaic, pasted and
// warped (makeWarped), then what its CopyPaste in mixup mode pastes, if
// any: its partner made the same way, its pixels copied where the pasted
// instances' polygons fill a mask (cv2.copyTo).
func (md *MultiDraw) makePre(dst kernels.Planes, pr *PreDraw, l Loader, s *MultiScratch) error {
	if err := md.makeWarped(dst, pr, l, s); err != nil {
		return err
	}
	if pr.CP == nil || len(pr.CPSel) == 0 {
		return nil
	}
	part := scratchPlanes(&s.cpImg, dst.W, dst.H)
	if err := md.makeWarped(part, pr.CPPart, l, s); err != nil {
		return fmt.Errorf("copy_paste partner (sample %d): %w", pr.CPPart.Self, err)
	}
	cv.CopyPasteFrom(dst, part, s.pasteMask(dst.W, dst.H, pr.Two, pr.CPSel))
	return nil
}

// pasteMask is the mask of the polygons of the instances sel of in, w x
// h (s's).
func (s *MultiScratch) pasteMask(w, h int, in cv.Instances, sel []int) []byte {
	if cap(s.cpMask) < w*h {
		s.cpMask = make([]byte, w*h)
	}
	mask := s.cpMask[:w*h]
	s.cpPts = cv.CopyPasteMask(mask, w, h, in, sel, s.cpPts)
	return mask
}

// makeWarped makes pr's mosaic, the copies its CopyPaste in flip mode
// pastes, and the YOLORandomPerspective after them, if md drew one, from
// the mosaic's canvas to dst's size.
func (md *MultiDraw) makeWarped(dst kernels.Planes, pr *PreDraw, l Loader, s *MultiScratch) error {
	if !md.Persp {
		if err := makeMosaic(dst, pr, nil, l, s); err != nil {
			return err
		}
		pasteFlipped(dst, pr, s)
		return nil
	}
	side := cv.MosaicSize(pr.Mo.Imgsz)
	canvas := scratchPlanes(&s.canvas, side, side)
	mat := cv.PerspectiveMatrix(*pr.PP, side, side, dst.W, dst.H)
	// The canvas is made only where the warp reads it (a scale of 1 reads
	// a quarter of it): the rest keeps an earlier sample's bytes, unread.
	var within *cv.Rect
	if r, ok := cv.PerspectiveFootprint(mat, md.Warp, side, side, dst.W, dst.H); ok && !s.FullCanvas {
		if len(pr.Sel) > 0 { // a pasted pixel is its mirror's: made too
			r.X0, r.X1 = min(r.X0, side-r.X1), max(r.X1, side-r.X0)
		}
		within = &r
	}
	if err := makeMosaic(canvas, pr, within, l, s); err != nil {
		return err
	}
	pasteFlipped(canvas, pr, s)
	if l.Stopped() {
		return optab.ErrAbandoned
	}
	cv.PerspectiveImage(dst, canvas, mat, md.Warp)
	return nil
}

// makeMosaic makes the mosaic pr drew into canvas, within r only when r
// is not nil (the rest of canvas left as it was): each image loaded
// (Loader.LoadImage), laid out in its tile.
func makeMosaic(canvas kernels.Planes, pr *PreDraw, r *cv.Rect, l Loader, s *MultiScratch) error {
	mo := pr.Mo
	n := mo.N
	defer l.Release()
	s.pl = s.pl[:0]
	for j := range n {
		src := pr.Data
		if j > 0 {
			src = pr.Pdata[j-1]
		}
		p, err := l.LoadImage(src, j, mo.Imgsz)
		if err == nil && (p.W != mo.Sizes[j][0] || p.H != mo.Sizes[j][1]) {
			err = fmt.Errorf("%w: decoded at %dx%d, its header says %dx%d", errs.Corrupt, p.W, p.H, mo.Sizes[j][0], mo.Sizes[j][1])
		}
		if err != nil {
			if j > 0 {
				return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, n-1, pr.Pidx[j-1], err)
			}
			return err
		}
		s.pl = append(s.pl, p)
	}
	if r != nil {
		cv.MosaicImageIn(canvas, s.pl, mo.Tiles, *r)
		return nil
	}
	cv.MosaicImage(canvas, s.pl, mo.Tiles)
	return nil
}

// pasteFlipped is ultralytics' CopyPaste in flip mode on the mosaic img
// of pr: the mirrored mosaic's pixels copied where the polygons of the
// copies it pastes are set (cv2.copyTo). Nothing pasted leaves img as it
// is.
func pasteFlipped(img kernels.Planes, pr *PreDraw, s *MultiScratch) {
	if len(pr.Sel) == 0 {
		return
	}
	cv.CopyPasteImage(img, s.pasteMask(img.W, img.H, pr.Flipped, pr.Sel))
}

// CopyPaste (op_mosaic.go defines it with the multi-image ops): in flip
// mode right after the Mosaic (v8_transforms' default pre_transform:
// Mosaic, CopyPaste, RandomPerspective), the mosaic's own mirrored
// copies pasted; in mixup mode: ultralytics' (8.4.190) v8_transforms with
// copy_paste_mode="mixup" appends to its pre_transform (Mosaic,
// RandomPerspective) a CopyPaste whose copies come from another sample
// made by Mosaic and RandomPerspective: with probability p, of that
// sample's instances those whose IoA with every instance of this one is
// below 0.30, the fraction p least overlapping, are pasted (their
// polygons filled into a mask, the other sample's pixels copied there)
// and added after this one's. The MixUp's and the CutMix's partners are
// made by the same pre_transform, so draw their own. The partner is read,
// not consumed, as a MixUp's: cv.Partners of the sample's key on a stream
// of its own (streamCopyPaste), and made with draws of its own (its
// key's view plus copyPasteView).

// checkCopyPaste checks a CopyPaste where it stands: right after the
// Mosaic, in flip mode.
func (t *Transform) checkCopyPaste(op *optab.Op, n int) error {
	if t.mosaic == nil || n != 1 {
		return fmt.Errorf("%w: transform: YOLOCopyPaste is supported right after a YOLOMosaic only (ultralytics' v8_transforms puts it there in flip mode: Mosaic, CopyPaste, RandomPerspective)", errs.Unsupported)
	}
	if op.Mode != "flip" {
		return fmt.Errorf("%w: transform: YOLOCopyPaste mode %q: want 'flip' (right after the YOLOMosaic) or 'mixup' (after its YOLORandomPerspective)", errs.Unsupported, errs.Clip(op.Mode, 32))
	}
	if !(op.P >= 0 && op.P <= 1) {
		return fmt.Errorf("%w: transform: YOLOCopyPaste p=%v: want 0..1", errs.Unsupported, op.P)
	}
	return nil
}

// prePartners appends the partners of k's pre_transform to buf: its
// Mosaic's n-1, then, when a CopyPaste in mixup mode draws to apply, its
// partner and that one's Mosaic's n-1.
func (t *Transform) prePartners(k det.Key, size int, buf []int) []int {
	buf = t.mosaicPartners(k, size, buf)
	if t.copyPasteMixOn(k) {
		j := CopyPasteMixPartner(k, size)
		buf = append(buf, j)
		buf = t.mosaicPartners(CopyPasteKey(k, j), size, buf)
	}
	return buf
}

// copyPasteView keys a CopyPaste partner's draws, as mixView a MixUp's.
const copyPasteView = 3 << 40

// CopyPasteKey is the key a CopyPaste partner j of the pre_transform of
// key k is made with.
func CopyPasteKey(k det.Key, j int) det.Key {
	k.Index, k.View = uint64(j), k.View+copyPasteView
	return k
}

// afterMosaic is the position of the first op after the Mosaic's
// pre_transform ops that come before its warp (its CopyPaste, if any).
func (t *Transform) afterMosaic() int {
	if t.copyPaste != nil {
		return 2
	}
	return 1
}

// checkCopyPasteMix checks a CopyPaste in mixup mode where it stands:
// right after the Mosaic's YOLORandomPerspective (v8_transforms appends
// it to the pre_transform), without a CopyPaste in flip mode.
func (t *Transform) checkCopyPasteMix(op *optab.Op, n int) error {
	if t.mosaic == nil || t.yolo == nil || t.copyPaste != nil || n != t.afterMosaic()+1 {
		return fmt.Errorf("%w: transform: YOLOCopyPaste mode 'mixup' is supported right after a YOLOMosaic's YOLORandomPerspective only (ultralytics' v8_transforms appends it to the pre_transform: Mosaic, RandomPerspective, CopyPaste), and not with a YOLOCopyPaste in flip mode", errs.Unsupported)
	}
	if !(op.P >= 0 && op.P <= 1) {
		return fmt.Errorf("%w: transform: YOLOCopyPaste p=%v: want 0..1", errs.Unsupported, op.P)
	}
	return nil
}

// copyPasteMixOn is a CopyPaste in mixup mode's draw for the
// pre_transform of key k: whether it applies (BaseMixTransform's
// random.uniform(0, 1) > p skips it; p 0 never does).
func (t *Transform) copyPasteMixOn(k det.Key) bool {
	if t.copyPasteMix == nil || t.copyPasteMix.P == 0 {
		return false
	}
	r := k.Stream(streamCopyPaste + 1)
	return !(r.Float64() > t.copyPasteMix.P)
}

// CopyPasteMixPartner is the CopyPaste partner of the pre_transform of
// key k in a dataset of size samples.
func CopyPasteMixPartner(k det.Key, size int) int {
	var one [1]int
	cv.Partners(k, streamCopyPaste, size, one[:])
	return one[0]
}

// CPMixDraw is what a CopyPaste in mixup mode drew for one pre_transform:
// On, that it drew to apply (its partner read and made: Mo, warped by
// PP); Applied, that the sample had instances (ultralytics' returns a
// sample without any untouched, before its draw); Pasted, the partner's
// instances it pasted.
type CPMixDraw struct {
	On, Applied bool
	P           float64
	Mo          MosaicDraw
	PP          cv.PerspectiveParams
	Pasted      int
}

// appendJSON appends a CopyPaste in mixup mode's draw, when it drew to
// apply, between pre and post: {"mode": "mixup", "applied", "pasted",
// "mosaic": the partner's, "perspective": its warp}.
func (cp *CPMixDraw) appendJSON(b []byte, pre, post string, md *MultiDraw) []byte {
	if !cp.On {
		return b
	}
	b = append(b, pre...)
	b = append(b, `{"mode":"mixup","applied":`...)
	b = strconv.AppendBool(b, cp.Applied)
	b = append(b, `,"pasted":`...)
	b = strconv.AppendInt(b, int64(cp.Pasted), 10)
	b = cp.Mo.appendJSON(append(b, `,"mosaic":`...))
	st := md.perspStep(&cp.PP)
	b = st.AppendJSON(append(b, `,"perspective":`...))
	return append(append(b, '}'), post...)
}
