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

// A multi-image sample's plan and its making, for the family whose ops
// (ultralytics' Mosaic, MixUp, CopyPaste and CutMix), places, checks,
// draws of a key, partners, cost and room are op_mosaic.go's. Here,
// PlanMulti draws everything such a sample undergoes into its plan
// (MultiDraw: each pre_transform's PreDraw, the CutMix's area, what the
// CopyPastes paste) before a pixel, from the partners' headers and the
// labels, read once; AppendJSON writes it to the trace; and Make makes
// its pixels from it. The executor loads each image (Loader: decoded
// whole and resized as ultralytics' load_image, from its partner cache or
// not) and keeps the buffers (MultiScratch); Make lays the images out,
// pastes, warps and mixes them, with the YOLO family's kernels
// (pipeline/kernels/cv). The targets' moves are op_multi_targets.go's.
// newTransform's loop and the root's executor know partners and images,
// never the ops' names.

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

// MosaicDraw is what one Mosaic drew: its images (the sample itself
// first, then its partners), each one's load_image size (w, h), the
// centre and the tiles; cp whether a CopyPaste followed it, pasted the
// number of copies it pasted.
type MosaicDraw struct {
	N, Imgsz int
	Idx      []int
	Sizes    [][2]int
	XC, YC   int
	Tiles    []cv.Tile
	CP       bool
	CPP      float64
	Pasted   int
}

// MultiDraw is what a sample's multi-image geometry drew: its mosaic,
// and, when its MixUp was drawn, the ratio and the partner's mosaic (mix.idx[0]
// the partner).
type MultiDraw struct {
	Mo   MosaicDraw
	Mix  bool
	MixR float64
	MixM MosaicDraw
	// Persp: the YOLORandomPerspective after the Mosaic, if any (pp and
	// mixPP its draws for the sample and the MixUp partner), warp its
	// cv2.warpPerspective (perspective not 0), w and h its size.
	Persp     bool
	Warp      bool
	W, H      int
	PP, MixPP cv.PerspectiveParams
	// Cut: a CutMix drew to apply (its partner cutM, warped by cutPP),
	// cutAreas its areas on the cutW x cutH sample, cutChoice the one
	// chosen (-1: none free), cutOK whether it took any instance (applied).
	Cut, CutOK bool
	CutAreas   []cutArea
	CutW, CutH int
	CutChoice  int
	CutM       MosaicDraw
	CutPP      cv.PerspectiveParams
	// A CopyPaste in mixup mode's draws: the sample's, the partners'.
	CPM, MixCPM, CutCPM CPMixDraw
	// Pres are the sample's pre_transforms as drawn (PreSelf, PreMix,
	// PreCut, each then its CopyPaste partner's), CutSel the CutMix
	// partner's instances its area takes.
	Pres   [nPres]PreDraw
	CutSel []int
	// X: a YOLOX MixUp drew to apply (its partner XIdx, file xData, its
	// geometry XM), XOK that it applies (the sample has boxes: YOLOX
	// mixes a mosaic with labels alone).
	X, XOK bool
	XIdx   int
	XM     cv.YOLOXMix
	xData  []byte
	// xIn is the partner's boxes, moved, once read (haveX).
	xIn   cv.Instances
	haveX bool
	// src is what draw draws from, while it draws; cl the labels the
	// instances were read with; lab and ins the reads' scratch.
	src MultiSource
	cl  bool
	lab Instances
	ins []cv.Instances
}

// CutArea is CutMix's area i (cv.CutMixArea of its draws).
func (m *MultiDraw) CutArea(i int) [4]float32 {
	a := m.CutAreas[i]
	return cv.CutMixArea(m.CutW, m.CutH, a.lam, a.cx, a.cy)
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

// MultiSource is what a multi-image sample's plan is drawn from: its own
// file (Data) and the partners handed for it (Partners, their Files), in
// multiPartners' order; Size, a file's size from its header (an error
// where it does not parse or is over the decoder's pixel budget); and
// its labels (Labels, nil: none, a job without targets; Contiguous: a
// COCO dataset's labelled by rank), which a CopyPaste and a CutMix draw
// against.
type MultiSource struct {
	Data       []byte
	Partners   []int
	Files      [][]byte
	Size       func(data []byte) (w, h int, err error)
	Labels     Targeted
	Contiguous bool
}

// PreDraw is one pre_transform of a multi-image sample (ultralytics'
// Mosaic of one image and its partners, the CopyPaste in flip mode after
// it, the YOLORandomPerspective after them, a CopyPaste in mixup mode) as
// its plan drew it, before a pixel: the image Self and its file Data,
// the partners Pidx and their files Pdata, its key, where its draws are
// kept (Mo, PP, CP: in the trace's MultiDraw), and what its CopyPastes
// paste (Flipped and Sel: the flip mode's mirrored instances and those
// pasted; Two and CPSel: the mixup mode's partner's, CPPart, likewise).
// The executor makes its pixels from it; its instances are read once,
// for the draw and the targets alike.
type PreDraw struct {
	Self   int
	Data   []byte
	Pidx   []int
	Pdata  [][]byte
	Key    det.Key
	Mo     *MosaicDraw
	PP     *cv.PerspectiveParams
	CP     *CPMixDraw // nil for a CopyPaste's partner, which has none
	CPPart *PreDraw
	// Flipped and Sel, Two and CPSel: see above.
	Flipped, Two cv.Instances
	Sel, CPSel   []int
	// in is its instances after its mosaic, flip-mode CopyPaste and warp;
	// out after its mixup-mode CopyPaste too; p the keypoints an
	// instance. Read once (haveIn, haveOut).
	in, out         cv.Instances
	p               int
	haveIn, haveOut bool
}

// start sets pr to the pre_transform of sample self (its file data,
// partners pidx and pdata) of key k, its draws kept in mo, pp and cp.
func (pr *PreDraw) start(self int, data []byte, pidx []int, pdata [][]byte, k det.Key, mo *MosaicDraw, pp *cv.PerspectiveParams, cp *CPMixDraw, cpPart *PreDraw) {
	*pr = PreDraw{Self: self, Data: data, Pidx: pidx, Pdata: pdata, Key: k, Mo: mo, PP: pp, CP: cp, CPPart: cpPart, Sel: pr.Sel[:0], CPSel: pr.CPSel[:0]}
}

// The pre_transforms of a multi-image sample, in MultiDraw.Pres: the
// sample's, its MixUp partner's, its CutMix partner's, each followed by
// its mixup-mode CopyPaste partner's.
const (
	PreSelf = 2 * iota
	PreMix
	PreCut
	nPres
)

// handed are the partners handed for a sample not yet taken by its
// draw, in multiPartners' order.
type handed struct {
	idx  []int
	data [][]byte
}

// take takes the next c partners.
func (h *handed) take(c int) ([]int, [][]byte, error) {
	if len(h.idx) < c {
		return nil, nil, fmt.Errorf("%w: the multi-image ops want more partners than the %d handed (the Sample's Partners)", errs.Unsupported, len(h.data))
	}
	i, p := h.idx[:c], h.data[:c]
	h.idx, h.data = h.idx[c:], h.data[c:]
	return i, p, nil
}

// PlanMulti draws into p everything the multi-image sample of key k (a
// Mosaic's, at k's epoch) undergoes, before a pixel of it is made: its
// pre_transform, then its MixUp's and its CutMix's partners', each made
// the same way (ViewPlan.Multi's Pres), the CutMix's area, and the steps
// after them at the output's size. The images' places come from their
// headers (src.Size); what the CopyPastes and the CutMix take, from the
// labels, read once and kept for the targets (MultiDraw.Instances).
func (t *Transform) PlanMulti(p *Plan, k det.Key, src MultiSource) error {
	t = t.AtEpoch(k.Epoch)
	p.t = t
	if t.Views() != 1 {
		return fmt.Errorf("%w: YOLOMosaic in a transform of several views is not supported", errs.Unsupported)
	}
	if len(src.Partners) != len(src.Files) {
		return fmt.Errorf("%w: %d partners and %d files (the Sample's Partners)", errs.Unsupported, len(src.Partners), len(src.Files))
	}
	if cap(p.Views) < 1 {
		p.Views = make([]ViewPlan, 1)
	}
	p.Views = p.Views[:1]
	// The canvas is made in planes, in the output itself when that is
	// what it is.
	p.Direct, p.Layout = t.Layout() == CHW && t.norm == nil && !t.vary, CHW
	w, h := t.outW, t.outH
	md := &p.multi
	hd := handed{src.Partners, src.Files}
	if err := md.draw(t, k, src, &hd, w, h); err != nil {
		return err
	}
	if len(hd.idx) != 0 {
		return fmt.Errorf("%w: %d partners handed beyond what the sample drew (the Sample's Partners)", errs.Unsupported, len(hd.idx))
	}
	vp := &p.Views[0]
	vp.Geom = SamplePlan{Geom: CropResize, SrcW: w, SrcH: h, CW: w, CH: h, OutW: w, OutH: h, Exact: true}
	vp.Pre, vp.Geometry, vp.Multi = vp.Pre[:0], vp.Geometry[:0], md
	vp.Steps = t.drawSteps(&p.drawer, k, w, h, vp.Steps)
	return nil
}

// draw draws md for the sample of key k of t (at its epoch), the output
// w x h: its pre_transform, then its MixUp's and CutMix's partners', and
// the CutMix's area. It takes the partners in multiPartners' order.
func (md *MultiDraw) draw(t *Transform, k det.Key, src MultiSource, h *handed, w, ht int) error {
	n := t.mosaicArgs.N
	md.Mix, md.Persp = false, t.yolo != nil
	if md.Persp {
		md.Warp, md.W, md.H = optab.ArgsOf[YOLOPerspectiveArgs](t.yolo.Persp).Perspective != 0, w, ht
	}
	md.src, md.cl = src, src.Contiguous
	defer func() { md.src = MultiSource{} }() // not its files past the draw
	next := func(slot int, self int, data []byte, k det.Key, mo *MosaicDraw, pp *cv.PerspectiveParams, cp *CPMixDraw) error {
		pi, pd, err := h.take(n - 1)
		if err != nil {
			return err
		}
		pr := &md.Pres[slot]
		pr.start(self, data, pi, pd, k, mo, pp, cp, &md.Pres[slot+1])
		return md.drawPre(t, pr, h)
	}
	if err := next(PreSelf, int(k.Index), src.Data, k, &md.Mo, &md.PP, &md.CPM); err != nil {
		return err
	}
	if on, r := t.mixUpDraw(k); on { // its partner is the one handed next (multiPartners drew it)
		mi, mf, err := h.take(1)
		if err != nil {
			return err
		}
		if err := next(PreMix, mi[0], mf[0], MixKey(k, mi[0]), &md.MixM, &md.MixPP, &md.MixCPM); err != nil {
			return fmt.Errorf("mixup partner (sample %d): %w", mi[0], err)
		}
		md.Mix, md.MixR = true, r
	}
	if err := md.drawYOLOX(t, k, h, w, ht); err != nil {
		return err
	}
	md.Cut, md.CutOK, md.CutChoice = false, false, -1
	on, areas, r := t.cutMixDraw(k, w, ht, md.CutAreas)
	if !on {
		return nil
	}
	md.CutAreas, md.CutW, md.CutH = areas, w, ht
	ci, cf, err := h.take(1)
	if err != nil {
		return err
	}
	if err := next(PreCut, ci[0], cf[0], CutKey(k, ci[0]), &md.CutM, &md.CutPP, &md.CutCPM); err != nil {
		return fmt.Errorf("cutmix partner (sample %d): %w", ci[0], err)
	}
	md.Cut = true
	return md.drawCutMix(&r)
}

// drawPre draws pre_transform pr: its mosaic (drawMosaic), then its
// CopyPaste in mixup mode, when t has one and it draws to apply: its
// partner (the next handed, h) drawn the same way, and the partner's
// instances it pastes, chosen against pr's (copyPasteMixSelect).
func (md *MultiDraw) drawPre(t *Transform, pr *PreDraw, h *handed) error {
	if err := md.drawMosaic(t, pr); err != nil {
		return err
	}
	cp := pr.CP
	*cp = CPMixDraw{Mo: cp.Mo, On: t.copyPasteMixOn(pr.Key)}
	if !cp.On {
		return nil
	}
	cp.P = t.copyPasteMix.P
	ci, cd, err := h.take(1)
	if err != nil {
		return err
	}
	pi, pd, err := h.take(t.mosaicArgs.N - 1)
	if err != nil {
		return err
	}
	part := pr.CPPart
	part.start(ci[0], cd[0], pi, pd, CopyPasteKey(pr.Key, ci[0]), &cp.Mo, &cp.PP, nil, nil)
	if err := md.drawMosaic(t, part); err != nil {
		return fmt.Errorf("copy_paste partner (sample %d): %w", ci[0], err)
	}
	ds, err := md.labels("YOLOCopyPaste pastes another sample's segments: it needs the dataset's labels (a job with targets of a YOLO segment dataset)")
	if err != nil {
		return err
	}
	in, _, err := md.preInstances(ds, pr)
	if err != nil {
		return err
	}
	cp.Applied = len(in.Boxes) > 0
	two, sel, err := md.copyPasteMixSelect(ds, in, pr)
	if err != nil {
		return err
	}
	pr.Two, pr.CPSel, cp.Pasted = two, append(pr.CPSel, sel...), len(sel)
	return nil
}

// drawMosaic draws the Mosaic of pre_transform pr into pr.Mo: its images
// (the sample's first), each one's load_image size from its header, the
// centre and the tiles; the YOLORandomPerspective's after it into pr.PP;
// and the CopyPaste in flip mode's after it, when t has one: the
// mosaic's instances (the sample's labels), mirrored, and those it
// pastes (copyPasteSelect).
func (md *MultiDraw) drawMosaic(t *Transform, pr *PreDraw) error {
	mo := pr.Mo
	n, s := t.mosaicArgs.N, t.mosaicArgs.ImgSz
	mo.N, mo.Imgsz = n, s
	mo.Idx = append(append(mo.Idx[:0], pr.Self), pr.Pidx...)
	mo.Sizes = mo.Sizes[:0]
	for j := range n {
		src := pr.Data
		if j > 0 {
			src = pr.Pdata[j-1]
		}
		w, h, err := md.src.Size(src)
		if err != nil {
			if j > 0 {
				return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, n-1, pr.Pidx[j-1], err)
			}
			return err
		}
		w, h = cv.LoadSize(w, h, s)
		mo.Sizes = append(mo.Sizes, [2]int{w, h})
	}
	mo.XC, mo.YC = t.mosaicCentre(pr.Key)
	tiles, err := cv.MosaicLayout(n, s, mo.XC, mo.YC, mo.Sizes)
	if err != nil {
		return fmt.Errorf("%w: %v", errs.Unsupported, err)
	}
	mo.Tiles = tiles
	if t.yolo != nil {
		*pr.PP = DrawYOLOPersp(t.yolo.Persp, pr.Key)
	}
	mo.CP, mo.Pasted = t.copyPaste != nil, 0
	if !mo.CP {
		return nil
	}
	mo.CPP = t.copyPaste.P
	ds, err := md.labels("YOLOCopyPaste pastes the sample's segments: it needs the dataset's labels (a job with targets of a YOLO segment dataset)")
	if err != nil {
		return err
	}
	in, p, err := md.mosaicInstances(ds, mo)
	if err != nil {
		return err
	}
	flipped, sel, err := copyPasteSelect(in, mo, mo.CPP)
	if err != nil {
		return err
	}
	pr.Flipped, pr.Sel, mo.Pasted = flipped, append(pr.Sel, sel...), len(sel)
	// Its instances, as its targets will want them: read once.
	pr.in, pr.p, pr.haveIn = md.PerspInstances(cv.CopyPasteInstances(in, flipped, sel), pr.PP), p, true
	return nil
}

// drawCutMix is CutMix.get_params on the sample (its instances after its
// pre_transform and MixUp) with its partner drawn (r the stream to draw
// the area's choice from): of the areas drawn, those that overlap no
// instance; none, nothing; else one chosen (np.random.choice), which
// applies when it takes any of the partner's instances (cv.CutMixPick).
func (md *MultiDraw) drawCutMix(r *det.RNG) error {
	ds, err := md.labels("YOLOCutMix places its area against the sample's labels: it needs them (a job with targets)")
	if err != nil {
		return err
	}
	in, _, err := md.multiInstances(ds)
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
	_, sel, err := md.cutmixPick(ds, in)
	if err != nil {
		return err
	}
	md.CutSel = append(md.CutSel[:0], sel...)
	md.CutOK = len(sel) > 0
	return nil
}

// labels is the labels the sample's draw reads, where an op draws
// against them: without them (a job without targets), an error saying
// why the op needs them.
func (md *MultiDraw) labels(why string) (Targeted, error) {
	if md.src.Labels == nil {
		return nil, fmt.Errorf("%w: %s", errs.Unsupported, why)
	}
	return md.src.Labels, nil
}

// copyPasteSelect is CopyPaste.get_params in flip mode on a mosaic's
// instances in (its 2*imgsz canvas): their mirrored copies and those it
// pastes (cv.CopyPasteSelect). A mosaic of boxes without segments is
// refused: ultralytics' CopyPaste skips it silently, leaving a job that
// asked for it without it.
func copyPasteSelect(in cv.Instances, mo *MosaicDraw, p float64) (cv.Instances, []int, error) {
	if len(in.Boxes) > 0 && len(in.Segments) == 0 && p > 0 {
		return cv.Instances{}, nil, fmt.Errorf("%w: YOLOCopyPaste: the mosaic of samples %v has boxes without polygons: CopyPaste pastes segments, give it a YOLO segment dataset (ultralytics' skips it silently on boxes)", errs.Unsupported, mo.Idx)
	}
	flipped, sel := cv.CopyPasteSelect(in, cv.MosaicSize(mo.Imgsz), p)
	return flipped, sel, nil
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
	if m.X { // ["yolox_mixup", {"index", "size": the partner's (w, h), "jit", "flip", "x_offset", "y_offset", "applied"}]
		x := &m.XM
		b = strconv.AppendInt(append(b, `,["yolox_mixup",{"index":`...), int64(m.XIdx), 10)
		b = fn.AppendInts(append(b, `,"size":`...), []int{x.W0, x.H0})
		b = fn.AppendFloat(append(b, `,"jit":`...), x.Jit)
		b = strconv.AppendBool(append(b, `,"flip":`...), x.Flip)
		b = strconv.AppendInt(append(b, `,"x_offset":`...), int64(x.XO), 10)
		b = strconv.AppendInt(append(b, `,"y_offset":`...), int64(x.YO), 10)
		b = strconv.AppendBool(append(b, `,"applied":`...), m.XOK)
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
	// xa, xb, xc and xj: a YOLOX MixUp's partner resized, resized
	// again, on its canvas, the canvas jittered.
	xa, xb, xc, xj []byte
	pl             []kernels.Planes
	// FullCanvas makes a warped mosaic's whole canvas, not only what its
	// warp reads: the tests' reference for the same bytes.
	FullCanvas bool
}

// Held is what s keeps: the canvas, and the partners' images, masks and
// points.
func (s *MultiScratch) Held() (canvas, others int64) {
	return int64(cap(s.canvas)), int64(cap(s.mix) + cap(s.cut) + cap(s.cpMask) + cap(s.cpImg) + 8*cap(s.cpPts) +
		cap(s.xa) + cap(s.xb) + cap(s.xc) + cap(s.xj))
}

// Drop lets s's buffers go.
func (s *MultiScratch) Drop() {
	s.canvas, s.mix, s.cut, s.cpMask, s.cpImg, s.cpPts = nil, nil, nil, nil, nil, nil
	s.xa, s.xb, s.xc, s.xj = nil, nil, nil, nil
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
	if md.XOK {
		if err := md.makeYOLOX(img, l, s); err != nil {
			return fmt.Errorf("yolox mixup partner (sample %d): %w", md.XIdx, err)
		}
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
