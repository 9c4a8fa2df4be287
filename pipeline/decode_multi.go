package pipeline

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv" // The multi-image geometry: a sample made of its own image and partners

	// read from the dataset (a Mosaic, op_mosaic.go). The executor reads the
	// partners' bytes in the sample's lease (readPartners) and hands them to
	// its Decoder (SetPartners); the decode makes each image whole, at its
	// own size, resizes it as ultralytics' load_image does, and lays the
	// images out. What a worker holds for it is bounded: at most n-1 partner
	// files, each within the dataset's file size cap (as any sample's bytes),
	// one image decoded whole at a time within the pixel budget (as any
	// sample's decode), and the n resized images (each at most imgsz a side)
	// and the canvas (2*imgsz a side), all reused from sample to sample.
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

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

// decodeMosaic is decodeAt for a sample whose Mosaic applies at k's
// epoch: data is the sample's file, the partners' are the Decoder's
// (SetPartners), in multiPartners' order.
func (d *Decoder) decodeMosaic(data []byte, t *transform.Transform, k det.Key, out []byte, offs []int) error {
	m := &d.multi
	idx, pdata := m.partners, m.pdata
	m.partners, m.pdata = nil, nil
	at := t.Sampler(sk).AtEpoch(k.Epoch).Sampler(sk)
	if t.Views() != 1 {
		return fmt.Errorf("%w: YOLOMosaic in a transform of several views is not supported", errs.Unsupported)
	}
	if len(idx) != len(pdata) {
		return fmt.Errorf("%w: %d partners and %d files (SetPartners before Decode)", errs.Unsupported, len(idx), len(pdata))
	}
	n := at.MosaicOp().Tiles
	dr := &m.drawn
	dr.Mix, dr.Persp = false, at.YOLO() != nil
	if dr.Persp {
		dr.Warp, dr.W, dr.H = at.YOLO().Persp.YPersp != 0, at.OutW(), at.OutH()
	}
	w, h := at.OutW(), at.OutH()
	np := 3 * w * h
	// Planes of bytes out as they are made: made in out itself (no copy).
	direct := at.Layout() == transform.CHW && at.NormOp() == nil && !at.Varies()
	var img kernels.Planes
	if direct {
		img = kernels.Planes{Pix: out[offs[0]:][:np], W: w, H: h}
	} else {
		if cap(d.pix) < np {
			d.pix = make([]byte, np)
		}
		img = kernels.Planes{Pix: d.pix[:np], W: w, H: h}
	}
	take := func(c int) ([]int, [][]byte, error) {
		if len(idx) < c {
			return nil, nil, fmt.Errorf("%w: the YOLOMosaic wants more partners than the %d handed (SetPartners before Decode)", errs.Unsupported, len(pdata))
		}
		i, p := idx[:c], pdata[:c]
		idx, pdata = idx[c:], pdata[c:]
		return i, p, nil
	}
	pi, pd, err := take(n - 1)
	if err != nil {
		return err
	}
	if err := d.preInto(img, data, int(k.Index), pi, pd, at.Transform, k, &dr.Mo, &dr.PP); err != nil {
		return err
	}
	if err := d.copyPasteMix(img, at.Transform, k, take, &dr.CPM, &dr.Mo, &dr.PP, dr); err != nil {
		return err
	}
	if on, r := at.MixUpDraw(k); on { // its partner is the one handed (multiPartners drew it)
		mi, md, err := take(1)
		if err != nil {
			return err
		}
		if cap(m.mix) < np {
			m.mix = make([]byte, np)
		}
		mc := kernels.Planes{Pix: m.mix[:np], W: w, H: h}
		pi, pd, err := take(n - 1)
		if err != nil {
			return err
		}
		if err := d.preInto(mc, md[0], mi[0], pi, pd, at.Transform, transform.MixKey(k, mi[0]), &dr.MixM, &dr.MixPP); err != nil {
			return fmt.Errorf("mixup partner (sample %d): %w", mi[0], err)
		}
		if err := d.copyPasteMix(mc, at.Transform, transform.MixKey(k, mi[0]), take, &dr.MixCPM, &dr.MixM, &dr.MixPP, dr); err != nil {
			return fmt.Errorf("mixup partner (sample %d): %w", mi[0], err)
		}
		dr.Mix, dr.MixR = true, r
		cv.MixUp(img, mc, r, cv.Instances{}, cv.Instances{})
	}
	dr.Cut, dr.CutOK, dr.CutChoice = false, false, -1
	if on, areas, r := at.CutMixDraw(k, w, h, dr.CutAreas); on { // its partner the one handed next
		dr.CutAreas, dr.CutW, dr.CutH = areas, w, h
		ci, cd, err := take(1)
		if err != nil {
			return err
		}
		if cap(m.cut) < np {
			m.cut = make([]byte, np)
		}
		cc := kernels.Planes{Pix: m.cut[:np], W: w, H: h}
		pi, pd, err := take(n - 1)
		if err != nil {
			return err
		}
		if err := d.preInto(cc, cd[0], ci[0], pi, pd, at.Transform, transform.CutKey(k, ci[0]), &dr.CutM, &dr.CutPP); err != nil {
			return fmt.Errorf("cutmix partner (sample %d): %w", ci[0], err)
		}
		if err := d.copyPasteMix(cc, at.Transform, transform.CutKey(k, ci[0]), take, &dr.CutCPM, &dr.CutM, &dr.CutPP, dr); err != nil {
			return fmt.Errorf("cutmix partner (sample %d): %w", ci[0], err)
		}
		dr.Cut = true
		if err := d.cutmix(img, cc, dr, &r); err != nil {
			return err
		}
	}
	if len(idx) != 0 {
		return fmt.Errorf("%w: %d partners handed beyond what the sample drew (SetPartners before Decode)", errs.Unsupported, len(idx))
	}
	t.PlanMulti(&d.plan, w, h, k, dr)
	d.plans = append(d.plans[:0], d.plan.Views[0].Geom)
	_, _, err = d.finishView(at.Transform, &d.plan.Views[0], img.Pix, transform.CHW, direct, out[offs[0]:][:at.ViewBytes()], w, h)
	return err
}

// preInto is ultralytics' pre_transform of one sample (key k) into dst:
// its Mosaic with its partners, then the YOLORandomPerspective after it,
// if any (its draw into pp), from the mosaic's canvas to dst's size.
func (d *Decoder) preInto(dst kernels.Planes, data []byte, self int, pidx []int, pdata [][]byte, t *transform.Transform, k det.Key, mo *transform.MosaicDraw, pp *cv.PerspectiveParams) error {
	if t.Sampler(sk).YOLO() == nil {
		if err := d.mosaicInto(dst, data, self, pidx, pdata, t, k, mo, nil); err != nil {
			return err
		}
		return d.copyPaste(dst, t, mo)
	}
	m := &d.multi
	s := cv.MosaicSize(t.Sampler(sk).MosaicOp().ImgSz)
	if cap(m.canvas) < 3*s*s {
		m.canvas = make([]byte, 3*s*s)
	}
	canvas := kernels.Planes{Pix: m.canvas[:3*s*s], W: s, H: s}
	op := t.Sampler(sk).YOLO().Persp
	*pp = transform.DrawYOLOPersp(op, k)
	persp := op.YPersp != 0
	mat := cv.PerspectiveMatrix(*pp, s, s, dst.W, dst.H)
	// The canvas is made only where the warp reads it (a scale of 1 reads
	// a quarter of it): the rest keeps an earlier sample's bytes, unread.
	var within *cv.Rect
	if r, ok := cv.PerspectiveFootprint(mat, persp, s, s, dst.W, dst.H); ok && !fullCanvas {
		if t.Sampler(sk).CopyPasteOp() != nil { // a pasted pixel is its mirror's: made too
			r.X0, r.X1 = min(r.X0, s-r.X1), max(r.X1, s-r.X0)
		}
		within = &r
	}
	if err := d.mosaicInto(canvas, data, self, pidx, pdata, t, k, mo, within); err != nil {
		return err
	}
	if err := d.copyPaste(canvas, t, mo); err != nil {
		return err
	}
	if d.ops.Stopped() {
		return ops.ErrAbandoned
	}
	cv.PerspectiveImage(dst, canvas, mat, persp)
	return nil
}

// fullCanvas makes preInto build a mosaic's whole canvas, not only what its
// warp reads: the tests' reference for the same bytes.
var fullCanvas bool

// mosaicInto makes the Mosaic of sample self (its file data) and its
// partners (pidx, pdata) for key k into canvas, recording its draw in dr:
// within r only when r is not nil (the rest of canvas left as it was).
func (d *Decoder) mosaicInto(canvas kernels.Planes, data []byte, self int, pidx []int, pdata [][]byte, t *transform.Transform, k det.Key, dr *transform.MosaicDraw, r *cv.Rect) error {
	m := &d.multi
	n, s := t.Sampler(sk).MosaicOp().Tiles, t.Sampler(sk).MosaicOp().ImgSz
	defer d.release()
	for len(m.imgs) < n {
		m.imgs = append(m.imgs, nil)
	}
	m.pl = m.pl[:0]
	dr.N, dr.Imgsz = n, s
	dr.Idx = append(append(dr.Idx[:0], self), pidx...)
	dr.Sizes = dr.Sizes[:0]
	for j := range n {
		src := data
		if j > 0 {
			src = pdata[j-1]
		}
		p, err := d.loadImage(src, j, s)
		if err != nil {
			if j > 0 {
				return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, n-1, pidx[j-1], err)
			}
			return err
		}
		m.pl = append(m.pl, p)
		dr.Sizes = append(dr.Sizes, [2]int{p.W, p.H})
	}
	dr.XC, dr.YC = t.Sampler(sk).MosaicCentre(k)
	tiles, err := cv.MosaicLayout(n, s, dr.XC, dr.YC, dr.Sizes)
	if err != nil {
		return fmt.Errorf("%w: %v", errs.Unsupported, err)
	}
	dr.Tiles = tiles
	if r != nil {
		cv.MosaicImageIn(canvas, m.pl, tiles, *r)
		return nil
	}
	cv.MosaicImage(canvas, m.pl, tiles)
	return nil
}

// copyPaste is ultralytics' CopyPaste in flip mode on the mosaic img
// (its draw mo), when t has one: the mosaic's instances (the sample's
// labels: the Decoder's box source), the copies it pastes (copyPasteSelect),
// their segments filled into a mask (cv.CopyPasteMask), and the mirrored
// mosaic's pixels copied where it is set (cv2.copyTo). Nothing pasted
// leaves img as it is.
func (d *Decoder) copyPaste(img kernels.Planes, t *transform.Transform, mo *transform.MosaicDraw) error {
	mo.CP, mo.Pasted = t.Sampler(sk).CopyPasteOp() != nil, 0
	if !mo.CP {
		return nil
	}
	mo.CPP = t.Sampler(sk).CopyPasteOp().P
	if d.boxSrc == nil {
		return fmt.Errorf("%w: YOLOCopyPaste pastes the sample's segments: it needs the dataset's labels (a job with targets of a YOLO segment dataset)", errs.Unsupported)
	}
	in, _, err := d.mosaicInstances(d.boxSrc, mo)
	if err != nil {
		return err
	}
	flipped, sel, err := copyPasteSelect(in, mo, t.Sampler(sk).CopyPasteOp().P)
	if err != nil || len(sel) == 0 {
		return err
	}
	m := &d.multi
	n := img.W * img.H
	if cap(m.cpMask) < n {
		m.cpMask = make([]byte, n)
	}
	mask := m.cpMask[:n]
	m.cpPts = cv.CopyPasteMask(mask, img.W, img.H, flipped, sel, m.cpPts)
	cv.CopyPasteImage(img, mask)
	mo.Pasted = len(sel)
	return nil
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

// cutmix is CutMix.get_params and apply_image on the sample img (its
// instances after its pre_transform and MixUp) with the partner part (its
// draw md, r the stream to draw the area's choice from): of the areas
// drawn, those that overlap no instance; none, nothing; else one chosen
// (np.random.choice), and when it takes any of the partner's instances
// (cv.CutMixPick) the partner's pixels there (cv.CutMixImage).
func (d *Decoder) cutmix(img, part kernels.Planes, md *transform.MultiDraw, r *det.RNG) error {
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
	if err != nil || len(sel) == 0 {
		return err
	}
	md.CutOK = true
	cv.CutMixImage(img, part, boxes[md.CutChoice])
	return nil
}
