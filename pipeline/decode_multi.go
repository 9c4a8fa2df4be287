package pipeline

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// The multi-image geometry: a sample made of its own image and partners
// read from the dataset (a Mosaic, op_mosaic.go). The executor reads the
// partners' bytes in the sample's lease (readPartners) and hands them to
// its Decoder (SetPartners). The decode draws the whole sample first, from
// the files' headers and the labels (drawMulti), then makes its pixels
// from that draw: each image whole, at its own size, resized as
// ultralytics' load_image does, the images laid out. What a worker holds
// for it is bounded: at most n-1 partner files, each within the dataset's
// file size cap (as any sample's bytes), one image decoded whole at a time
// within the pixel budget (as any sample's decode), and the n resized
// images (each at most imgsz a side) and the canvas (2*imgsz a side), all
// reused from sample to sample.

// multiState is a Decoder's for the multi-image geometry: the partners the
// executor handed it for the next sample, its scratch and what the last
// sample drew (its trace and targets read it).
type multiState struct {
	// partners and pdata: the next sample's partners' indices and bytes
	// (SetPartners); taken by its decode.
	partners []int
	pdata    [][]byte
	// full is one image decoded whole; imgs the images load_image-sized,
	// the sample's own first; plan and off the whole decode's.
	full []byte
	imgs [][]byte
	pl   []kernels.Planes
	held []cv.PartnerRef // the partner cache's images pl holds (loadImage)
	plan [1]transform.SamplePlan
	off  [1]int
	// canvas is a mosaic's before the YOLORandomPerspective after it, mix
	// a MixUp partner's image; drawn what the last sample drew
	// (its trace and targets read it through its plan's ViewPlan.Multi).
	canvas, mix, cut []byte
	drawn            transform.MultiDraw
	ins              []cv.Instances
	// pres are the sample's pre_transforms as drawn (preSelf, preMix,
	// preCut, each then its CopyPaste partner's); cutSel the CutMix
	// partner's instances its area takes; cl the ContiguousLabels their
	// instances were read with.
	pres   [nPres]preDraw
	cutSel []int
	cl     bool
	// cpMask and cpPts: a CopyPaste's mask and a segment's points; cpImg
	// a CopyPaste's partner in mixup mode.
	cpMask, cpImg []byte
	cpPts         [][2]int32
}

// SetPartners hands the Decoder the partners of the next sample it
// decodes: their indices and bytes (data[i] is partner idx[i]'s file),
// as the transform's multi-image op drew them for the sample's key. The
// Executor does this; a direct Decode of a Mosaic calls it first. The
// slices are read during that decode only.
func (d *Decoder) SetPartners(idx []int, data [][]byte) {
	d.multi.partners, d.multi.pdata = idx, data
}

// readPartners reads the partners idx of a sample of ds (its
// Transform's MultiPartners) into bufs (reused), as the executor does in
// the sample's lease: nil, nil when it draws none. A partner that cannot be read fails the sample,
// naming the partner (its store's fault stays the store's: the error
// wraps it).
func readPartners(ds dataset.Dataset, idx []int, bufs *[][]byte) ([][]byte, error) {
	if idx == nil {
		return nil, nil
	}
	for len(*bufs) < len(idx) {
		*bufs = append(*bufs, nil)
	}
	out := (*bufs)[:len(idx)]
	for j, p := range idx {
		b, err := ds.Read(p, out[j])
		if err != nil {
			return nil, fmt.Errorf("mosaic partner %d of %d (sample %d, %s): %w", j+1, len(idx), p, partnerName(ds, p), err)
		}
		out[j] = b
	}
	return out, nil
}

// partnerHints are the partners the samples indices (of copies, nil:
// none) of epoch will read, in the order they will be read, for a
// Prefetcher: nil when t has no Mosaic then.
func partnerHints(t *transform.Transform, seed, epoch uint64, indices []int64, copies []uint32, size int) []int64 {
	if t.Sampler(sk).AtEpoch(epoch).Sampler(sk).MosaicOp() == nil {
		return nil
	}
	var out []int64
	var buf []int
	for i, idx := range indices {
		k := det.Key{Seed: seed, Epoch: epoch, Index: uint64(idx)}
		if copies != nil {
			k.Copy = uint64(copies[i])
		}
		buf = t.Sampler(sk).MultiPartners(k, size, buf)
		for _, p := range buf {
			out = append(out, int64(p))
		}
	}
	return out
}

// partnerName is sample i's name in ds, for a partner's error.
func partnerName(ds dataset.Dataset, i int) string {
	if n, ok := ds.(interface{ Name(int) string }); ok {
		return n.Name(i)
	}
	return fmt.Sprintf("index %d", i)
}

// wholeHeader is data's header, for a decode of it whole: an error where
// it is over the pixel budget.
func (d *Decoder) wholeHeader(data []byte) (header, error) {
	hd, err := parseHeader(data)
	if err != nil {
		return header{}, err
	}
	if px := int64(hd.w) * int64(hd.h); px > d.opts.pixelBudget {
		return header{}, fmt.Errorf("%w: %dx%d is %d pixels, over the budget of %d", errs.TooLarge, hd.w, hd.h, px, d.opts.pixelBudget)
	}
	return hd, nil
}

// decodeWholeInto decodes data (its header hd) whole into dst, its
// 3*w*h bytes.
func (d *Decoder) decodeWholeInto(data []byte, hd *header, dst []byte) (kernels.Planes, error) {
	m := &d.multi
	m.plan[0] = transform.SamplePlan{Geom: transform.CropResize, SrcW: hd.w, SrcH: hd.h, CW: hd.w, CH: hd.h, OutW: hd.w, OutH: hd.h,
		Interp: transform.InterpBilinear, Antialias: true, Exact: true}
	if err := d.decodeGuarded(data, hd, m.plan[:], transform.CHW, dst, m.off[:]); err != nil {
		return kernels.Planes{}, err
	}
	if d.ops.Stopped() {
		return kernels.Planes{}, ops.ErrAbandoned
	}
	return kernels.Planes{Pix: dst, W: hd.w, H: hd.h}, nil
}

// loadImage is ultralytics' load_image of one image: decoded whole, then
// resized (cv2.INTER_LINEAR) so that its long side is imgsz, into
// image j of the scratch; with a PartnerCache, taken from it when there
// (the same bytes: it is keyed by the file's), else made in memory it
// hands out (Alloc) and stored there, held either way until the
// mosaic's release (m.held). An image already imgsz on its long side
// (load_image's resize a copy) is decoded into its place directly. The
// image is read only.
func (d *Decoder) loadImage(data []byte, j, imgsz int) (kernels.Planes, error) {
	m := &d.multi
	pc := d.opts.partners
	var key cv.PartnerKey
	if pc != nil {
		var ref uint64
		if d.opts.reference {
			ref = 1 << 63
		}
		key = pc.Key(data, imgsz, uint64(d.opts.pixelBudget)|ref)
		if img, r, ok := pc.Get(key); ok {
			m.held = append(m.held, r)
			return img, nil
		}
	}
	hd, err := d.wholeHeader(data)
	if err != nil {
		return kernels.Planes{}, err
	}
	w, h := cv.LoadSize(hd.w, hd.h, imgsz)
	n := 3 * w * h
	var pix []byte
	if pc != nil {
		pix = pc.Alloc(n) // the cache's from its Put on
	} else {
		if cap(m.imgs[j]) < n {
			m.imgs[j] = make([]byte, n)
		}
		pix = m.imgs[j][:n]
	}
	var dst kernels.Planes
	if w == hd.w && h == hd.h {
		if dst, err = d.decodeWholeInto(data, &hd, pix); err != nil {
			return kernels.Planes{}, err
		}
	} else {
		if cap(m.full) < 3*hd.w*hd.h {
			m.full = make([]byte, 3*hd.w*hd.h)
		}
		src, err := d.decodeWholeInto(data, &hd, m.full[:3*hd.w*hd.h])
		if err != nil {
			return kernels.Planes{}, err
		}
		dst = kernels.Planes{Pix: pix, W: w, H: h}
		cv.ResizeLinear(dst, src)
	}
	if pc != nil {
		m.held = append(m.held, pc.Put(key, dst))
	}
	return dst, nil
}

// release ends the Decoder's holds on the partner cache's images
// (loadImage's), once the mosaic that read them is made.
func (d *Decoder) release() {
	m := &d.multi
	for i, r := range m.held {
		d.opts.partners.Release(r)
		m.held[i] = cv.PartnerRef{}
	}
	m.held = m.held[:0]
}

// handed are the partners handed for a sample (SetPartners) not yet
// taken by its draw, in MultiPartners' order.
type handed struct {
	idx  []int
	data [][]byte
}

// take takes the next c partners.
func (h *handed) take(c int) ([]int, [][]byte, error) {
	if len(h.idx) < c {
		return nil, nil, fmt.Errorf("%w: the YOLOMosaic wants more partners than the %d handed (SetPartners before Decode)", errs.Unsupported, len(h.data))
	}
	i, p := h.idx[:c], h.data[:c]
	h.idx, h.data = h.idx[c:], h.data[c:]
	return i, p, nil
}

// preDraw is one pre_transform of a multi-image sample (ultralytics'
// Mosaic of one image and its partners, the CopyPaste in flip mode after
// it, the YOLORandomPerspective after them, a CopyPaste in mixup mode) as
// drawn before a pixel of it is made (drawPre): the files it reads, where
// its draws are kept (the trace's MultiDraw), what its CopyPastes select,
// and its instances once read. makePre makes it from that; its targets
// read the instances (preInstances, preMixInstances), not the labels
// again.
type preDraw struct {
	self  int
	data  []byte
	pidx  []int
	pdata [][]byte
	key   det.Key
	mo    *transform.MosaicDraw
	pp    *cv.PerspectiveParams
	// cp is its CopyPaste in mixup mode's draw, cpPart that CopyPaste's
	// partner (its own pre_transform, without one); nil both for such a
	// partner.
	cp     *transform.CPMixDraw
	cpPart *preDraw
	// flipped and sel: the flip-mode CopyPaste's mirrored instances and
	// those it pastes; two and cpSel: the mixup-mode one's partner's
	// instances and those it pastes.
	flipped, two cv.Instances
	sel, cpSel   []int
	// in is its instances after its mosaic, flip-mode CopyPaste and warp;
	// out after its mixup-mode CopyPaste too; p the keypoints an
	// instance. Read once (haveIn, haveOut), when its draw or its targets
	// need them.
	in, out         cv.Instances
	p               int
	haveIn, haveOut bool
}

// start sets pr to the pre_transform of sample self (its file data,
// partners pidx and pdata) of key k, its draws kept in mo, pp and cp.
func (pr *preDraw) start(self int, data []byte, pidx []int, pdata [][]byte, k det.Key, mo *transform.MosaicDraw, pp *cv.PerspectiveParams, cp *transform.CPMixDraw, cpPart *preDraw) {
	*pr = preDraw{self: self, data: data, pidx: pidx, pdata: pdata, key: k, mo: mo, pp: pp, cp: cp, cpPart: cpPart, sel: pr.sel[:0], cpSel: pr.cpSel[:0]}
}

// The pre_transforms of a multi-image sample, in multiState.pres: the
// sample's, its MixUp partner's, its CutMix partner's, each followed by
// its mixup-mode CopyPaste partner's.
const (
	preSelf = 2 * iota
	preMix
	preCut
	nPres
)

// decodeMosaic is decodeAt for a sample whose Mosaic applies at k's
// epoch: data is the sample's file, the partners' are the Decoder's
// (SetPartners), in multiPartners' order. Everything the sample
// undergoes is drawn first (drawMulti: the images' places from their
// headers, what the CopyPastes and the CutMix select from the labels),
// then its pixels are made from that draw.
func (d *Decoder) decodeMosaic(data []byte, t *transform.Transform, k det.Key, out []byte, offs []int) error {
	m := &d.multi
	h := handed{m.partners, m.pdata}
	m.partners, m.pdata = nil, nil
	at := t.Sampler(sk).AtEpoch(k.Epoch).Sampler(sk)
	if t.Views() != 1 {
		return fmt.Errorf("%w: YOLOMosaic in a transform of several views is not supported", errs.Unsupported)
	}
	if len(h.idx) != len(h.data) {
		return fmt.Errorf("%w: %d partners and %d files (SetPartners before Decode)", errs.Unsupported, len(h.idx), len(h.data))
	}
	w, ht := at.OutW(), at.OutH()
	dr := &m.drawn
	if err := d.drawMulti(data, at.Transform, k, &h, dr, w, ht); err != nil {
		return err
	}
	if len(h.idx) != 0 {
		return fmt.Errorf("%w: %d partners handed beyond what the sample drew (SetPartners before Decode)", errs.Unsupported, len(h.idx))
	}
	np := 3 * w * ht
	// Planes of bytes out as they are made: made in out itself (no copy).
	direct := at.Layout() == transform.CHW && at.NormOp() == nil && !at.Varies()
	var img kernels.Planes
	if direct {
		img = kernels.Planes{Pix: out[offs[0]:][:np], W: w, H: ht}
	} else {
		if cap(d.pix) < np {
			d.pix = make([]byte, np)
		}
		img = kernels.Planes{Pix: d.pix[:np], W: w, H: ht}
	}
	if err := d.makePre(img, at.Transform, &m.pres[preSelf]); err != nil {
		return err
	}
	if dr.Mix {
		mc := partnerPlanes(&m.mix, w, ht)
		if err := d.makePre(mc, at.Transform, &m.pres[preMix]); err != nil {
			return fmt.Errorf("mixup partner (sample %d): %w", m.pres[preMix].self, err)
		}
		cv.MixUp(img, mc, dr.MixR, cv.Instances{}, cv.Instances{})
	}
	if dr.CutOK { // the partner's pixels in the area chosen (CutMix.apply_image)
		cc := partnerPlanes(&m.cut, w, ht)
		if err := d.makePre(cc, at.Transform, &m.pres[preCut]); err != nil {
			return fmt.Errorf("cutmix partner (sample %d): %w", m.pres[preCut].self, err)
		}
		cv.CutMixImage(img, cc, dr.CutArea(dr.CutChoice))
	}
	t.PlanMulti(&d.plan, w, ht, k, dr)
	d.plans = append(d.plans[:0], d.plan.Views[0].Geom)
	_, _, err := d.finishView(at.Transform, &d.plan.Views[0], img.Pix, transform.CHW, direct, out[offs[0]:][:at.ViewBytes()], w, ht)
	return err
}

// partnerPlanes is a w x h partner image in *buf (grown as needed).
func partnerPlanes(buf *[]byte, w, h int) kernels.Planes {
	if cap(*buf) < 3*w*h {
		*buf = make([]byte, 3*w*h)
	}
	return kernels.Planes{Pix: (*buf)[:3*w*h], W: w, H: h}
}

// drawMulti draws into dr (and the Decoder's pre_transforms) everything
// the multi-image sample of key k (its file data, its partners h, the
// output w x h) undergoes, before a pixel of it is made: its
// pre_transform, then its MixUp's and its CutMix's partners', each made
// the same way, and the CutMix's area. It takes the partners in
// MultiPartners' order.
func (d *Decoder) drawMulti(data []byte, t *transform.Transform, k det.Key, h *handed, dr *transform.MultiDraw, w, ht int) error {
	m := &d.multi
	at := t.Sampler(sk)
	n := at.MosaicOp().Tiles
	dr.Mix, dr.Persp = false, at.YOLO() != nil
	if dr.Persp {
		dr.Warp, dr.W, dr.H = at.YOLO().Persp.YPersp != 0, w, ht
	}
	m.cl = d.targets.ContiguousLabels
	next := func(slot int, self int, data []byte, k det.Key, mo *transform.MosaicDraw, pp *cv.PerspectiveParams, cp *transform.CPMixDraw) (*preDraw, error) {
		pi, pd, err := h.take(n - 1)
		if err != nil {
			return nil, err
		}
		pr := &m.pres[slot]
		pr.start(self, data, pi, pd, k, mo, pp, cp, &m.pres[slot+1])
		return pr, d.drawPre(pr, t, h, dr)
	}
	if _, err := next(preSelf, int(k.Index), data, k, &dr.Mo, &dr.PP, &dr.CPM); err != nil {
		return err
	}
	if on, r := at.MixUpDraw(k); on { // its partner is the one handed next (MultiPartners drew it)
		mi, md, err := h.take(1)
		if err != nil {
			return err
		}
		if _, err := next(preMix, mi[0], md[0], transform.MixKey(k, mi[0]), &dr.MixM, &dr.MixPP, &dr.MixCPM); err != nil {
			return fmt.Errorf("mixup partner (sample %d): %w", mi[0], err)
		}
		dr.Mix, dr.MixR = true, r
	}
	dr.Cut, dr.CutOK, dr.CutChoice = false, false, -1
	on, areas, r := at.CutMixDraw(k, w, ht, dr.CutAreas)
	if !on {
		return nil
	}
	dr.CutAreas, dr.CutW, dr.CutH = areas, w, ht
	ci, cd, err := h.take(1)
	if err != nil {
		return err
	}
	if _, err := next(preCut, ci[0], cd[0], transform.CutKey(k, ci[0]), &dr.CutM, &dr.CutPP, &dr.CutCPM); err != nil {
		return fmt.Errorf("cutmix partner (sample %d): %w", ci[0], err)
	}
	dr.Cut = true
	return d.drawCutMix(dr, &r)
}

// drawPre draws pre_transform pr: its mosaic (drawMosaic), then its
// CopyPaste in mixup mode, when t has one and it draws to apply: its
// partner (the next handed, h) drawn the same way, and the partner's
// instances it pastes, chosen against pr's (copyPasteMixSelect).
func (d *Decoder) drawPre(pr *preDraw, t *transform.Transform, h *handed, md *transform.MultiDraw) error {
	if err := d.drawMosaic(pr, t, md); err != nil {
		return err
	}
	at := t.Sampler(sk)
	cp := pr.cp
	*cp = transform.CPMixDraw{Mo: cp.Mo, On: at.CopyPasteMixOn(pr.key)}
	if !cp.On {
		return nil
	}
	cp.P = at.CopyPasteMixOp().P
	ci, cd, err := h.take(1)
	if err != nil {
		return err
	}
	pi, pd, err := h.take(at.MosaicOp().Tiles - 1)
	if err != nil {
		return err
	}
	part := pr.cpPart
	part.start(ci[0], cd[0], pi, pd, transform.CopyPasteKey(pr.key, ci[0]), &cp.Mo, &cp.PP, nil, nil)
	if err := d.drawMosaic(part, t, md); err != nil {
		return fmt.Errorf("copy_paste partner (sample %d): %w", ci[0], err)
	}
	if d.boxSrc == nil {
		return fmt.Errorf("%w: YOLOCopyPaste pastes another sample's segments: it needs the dataset's labels (a job with targets of a YOLO segment dataset)", errs.Unsupported)
	}
	in, _, err := d.preInstances(d.boxSrc, pr, md)
	if err != nil {
		return err
	}
	cp.Applied = len(in.Boxes) > 0
	two, sel, err := d.copyPasteMixSelect(d.boxSrc, in, pr, md)
	if err != nil {
		return err
	}
	pr.two, pr.cpSel, cp.Pasted = two, append(pr.cpSel, sel...), len(sel)
	return nil
}

// drawMosaic draws the Mosaic of pre_transform pr into pr.mo: its images
// (the sample's first), each one's load_image size from its header, the
// centre and the tiles; the YOLORandomPerspective's after it into pr.pp;
// and the CopyPaste in flip mode's after it, when t has one: the
// mosaic's instances (the sample's labels: the Decoder's box source),
// mirrored, and those it pastes (copyPasteSelect).
func (d *Decoder) drawMosaic(pr *preDraw, t *transform.Transform, md *transform.MultiDraw) error {
	at := t.Sampler(sk)
	mo := pr.mo
	n, s := at.MosaicOp().Tiles, at.MosaicOp().ImgSz
	mo.N, mo.Imgsz = n, s
	mo.Idx = append(append(mo.Idx[:0], pr.self), pr.pidx...)
	mo.Sizes = mo.Sizes[:0]
	for j := range n {
		src := pr.data
		if j > 0 {
			src = pr.pdata[j-1]
		}
		hd, err := d.wholeHeader(src)
		if err != nil {
			if j > 0 {
				return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, n-1, pr.pidx[j-1], err)
			}
			return err
		}
		w, h := cv.LoadSize(hd.w, hd.h, s)
		mo.Sizes = append(mo.Sizes, [2]int{w, h})
	}
	mo.XC, mo.YC = at.MosaicCentre(pr.key)
	tiles, err := cv.MosaicLayout(n, s, mo.XC, mo.YC, mo.Sizes)
	if err != nil {
		return fmt.Errorf("%w: %v", errs.Unsupported, err)
	}
	mo.Tiles = tiles
	if y := at.YOLO(); y != nil {
		*pr.pp = transform.DrawYOLOPersp(y.Persp, pr.key)
	}
	mo.CP, mo.Pasted = at.CopyPasteOp() != nil, 0
	if !mo.CP {
		return nil
	}
	mo.CPP = at.CopyPasteOp().P
	if d.boxSrc == nil {
		return fmt.Errorf("%w: YOLOCopyPaste pastes the sample's segments: it needs the dataset's labels (a job with targets of a YOLO segment dataset)", errs.Unsupported)
	}
	in, p, err := d.mosaicInstances(d.boxSrc, mo)
	if err != nil {
		return err
	}
	flipped, sel, err := copyPasteSelect(in, mo, mo.CPP)
	if err != nil {
		return err
	}
	pr.flipped, pr.sel, mo.Pasted = flipped, append(pr.sel, sel...), len(sel)
	// Its instances, as its targets will want them: read once.
	pr.in, pr.p, pr.haveIn = md.PerspInstances(cv.CopyPasteInstances(in, flipped, sel), pr.pp), p, true
	return nil
}

// drawCutMix is CutMix.get_params on the sample (its instances after its
// pre_transform and MixUp) with its partner drawn (md, r the stream to
// draw the area's choice from): of the areas drawn, those that overlap
// no instance; none, nothing; else one chosen (np.random.choice), which
// applies when it takes any of the partner's instances (cv.CutMixPick).
func (d *Decoder) drawCutMix(md *transform.MultiDraw, r *det.RNG) error {
	if d.boxSrc == nil {
		return fmt.Errorf("%w: YOLOCutMix places its area against the sample's labels: it needs them (a job with targets)", errs.Unsupported)
	}
	in, _, err := d.multiInstances(d.boxSrc, md)
	if err != nil {
		return err
	}
	boxes := make([][4]float32, len(md.CutAreas))
	for i := range boxes {
		boxes[i] = md.CutArea(i)
	}
	free := cv.CutMixFree(boxes, in.Boxes)
	if len(free) == 0 {
		return nil
	}
	md.CutChoice = free[r.Intn(len(free))]
	_, sel, err := d.cutmixPick(d.boxSrc, md, in)
	if err != nil {
		return err
	}
	d.multi.cutSel = append(d.multi.cutSel[:0], sel...)
	md.CutOK = len(sel) > 0
	return nil
}

// makePre makes pre_transform pr, drawn, into dst: its mosaic, pasted and
// warped (makeWarped), then what its CopyPaste in mixup mode pastes, if
// any: its partner made the same way, its pixels copied where the pasted
// instances' polygons fill a mask (cv2.copyTo).
func (d *Decoder) makePre(dst kernels.Planes, t *transform.Transform, pr *preDraw) error {
	if err := d.makeWarped(dst, t, pr); err != nil {
		return err
	}
	if pr.cp == nil || len(pr.cpSel) == 0 {
		return nil
	}
	m := &d.multi
	part := partnerPlanes(&m.cpImg, dst.W, dst.H)
	if err := d.makeWarped(part, t, pr.cpPart); err != nil {
		return fmt.Errorf("copy_paste partner (sample %d): %w", pr.cpPart.self, err)
	}
	mask := d.pasteMask(dst.W, dst.H, pr.two, pr.cpSel)
	cv.CopyPasteFrom(dst, part, mask)
	return nil
}

// pasteMask is the mask of the polygons of the instances sel of in, w x
// h (the Decoder's scratch).
func (d *Decoder) pasteMask(w, h int, in cv.Instances, sel []int) []byte {
	m := &d.multi
	if cap(m.cpMask) < w*h {
		m.cpMask = make([]byte, w*h)
	}
	mask := m.cpMask[:w*h]
	m.cpPts = cv.CopyPasteMask(mask, w, h, in, sel, m.cpPts)
	return mask
}

// makeWarped makes pr's mosaic, the copies its CopyPaste in flip mode
// pastes, and the YOLORandomPerspective after them, if any, from the
// mosaic's canvas to dst's size.
func (d *Decoder) makeWarped(dst kernels.Planes, t *transform.Transform, pr *preDraw) error {
	y := t.Sampler(sk).YOLO()
	if y == nil {
		if err := d.makeMosaic(dst, pr, nil); err != nil {
			return err
		}
		d.pasteFlipped(dst, pr)
		return nil
	}
	m := &d.multi
	s := cv.MosaicSize(pr.mo.Imgsz)
	canvas := partnerPlanes(&m.canvas, s, s)
	persp := y.Persp.YPersp != 0
	mat := cv.PerspectiveMatrix(*pr.pp, s, s, dst.W, dst.H)
	// The canvas is made only where the warp reads it (a scale of 1 reads
	// a quarter of it): the rest keeps an earlier sample's bytes, unread.
	var within *cv.Rect
	if r, ok := cv.PerspectiveFootprint(mat, persp, s, s, dst.W, dst.H); ok && !fullCanvas {
		if len(pr.sel) > 0 { // a pasted pixel is its mirror's: made too
			r.X0, r.X1 = min(r.X0, s-r.X1), max(r.X1, s-r.X0)
		}
		within = &r
	}
	if err := d.makeMosaic(canvas, pr, within); err != nil {
		return err
	}
	d.pasteFlipped(canvas, pr)
	if d.ops.Stopped() {
		return ops.ErrAbandoned
	}
	cv.PerspectiveImage(dst, canvas, mat, persp)
	return nil
}

// fullCanvas makes makeWarped build a mosaic's whole canvas, not only
// what its warp reads: the tests' reference for the same bytes.
var fullCanvas bool

// makeMosaic makes the Mosaic pr drew into canvas, within r only when r
// is not nil (the rest of canvas left as it was): each image load_image'd
// (loadImage), laid out in its tile.
func (d *Decoder) makeMosaic(canvas kernels.Planes, pr *preDraw, r *cv.Rect) error {
	m := &d.multi
	mo := pr.mo
	n, s := mo.N, mo.Imgsz
	defer d.release()
	for len(m.imgs) < n {
		m.imgs = append(m.imgs, nil)
	}
	m.pl = m.pl[:0]
	for j := range n {
		src := pr.data
		if j > 0 {
			src = pr.pdata[j-1]
		}
		p, err := d.loadImage(src, j, s)
		if err == nil && (p.W != mo.Sizes[j][0] || p.H != mo.Sizes[j][1]) {
			err = fmt.Errorf("%w: decoded at %dx%d, its header says %dx%d", errs.Corrupt, p.W, p.H, mo.Sizes[j][0], mo.Sizes[j][1])
		}
		if err != nil {
			if j > 0 {
				return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, n-1, pr.pidx[j-1], err)
			}
			return err
		}
		m.pl = append(m.pl, p)
	}
	if r != nil {
		cv.MosaicImageIn(canvas, m.pl, mo.Tiles, *r)
		return nil
	}
	cv.MosaicImage(canvas, m.pl, mo.Tiles)
	return nil
}

// pasteFlipped is ultralytics' CopyPaste in flip mode on the mosaic img
// of pr: the mirrored mosaic's pixels copied where the polygons of the
// copies it pastes are set (cv2.copyTo). Nothing pasted leaves img as it
// is.
func (d *Decoder) pasteFlipped(img kernels.Planes, pr *preDraw) {
	if len(pr.sel) == 0 {
		return
	}
	cv.CopyPasteImage(img, d.pasteMask(img.W, img.H, pr.flipped, pr.sel))
}

// copyPasteSelect is CopyPaste.get_params in flip mode on a mosaic's
// instances in (its 2*imgsz canvas): their mirrored copies and those it
// pastes (cv.CopyPasteSelect). A mosaic of boxes without segments is
// refused: ultralytics' CopyPaste skips it silently, leaving a job that
// asked for it without it.
func copyPasteSelect(in cv.Instances, mo *transform.MosaicDraw, p float64) (cv.Instances, []int, error) {
	if len(in.Boxes) > 0 && len(in.Segments) == 0 && p > 0 {
		return cv.Instances{}, nil, fmt.Errorf("%w: YOLOCopyPaste: the mosaic of samples %v has boxes without polygons: CopyPaste pastes segments, give it a YOLO segment dataset (ultralytics' skips it silently on boxes)", errs.Unsupported, mo.Idx)
	}
	flipped, sel := cv.CopyPasteSelect(in, cv.MosaicSize(mo.Imgsz), p)
	return flipped, sel, nil
}
