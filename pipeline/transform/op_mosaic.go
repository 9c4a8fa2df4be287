package transform

// Mosaic: ultralytics' (8.4.190) Mosaic of 4 or 9 images, the sample's
// own and partners drawn from the dataset, as a geometry op: each image
// resized as BaseDataset.load_image resizes it (its long side to imgsz,
// cv2.INTER_LINEAR), laid out around a drawn centre on a canvas of 114,
// its labels moved by its tile's padding, concatenated, clipped to the
// canvas and the boxes of no area dropped (Mosaic._cat_labels). Its output
// is ultralytics' mosaic: 2*imgsz a side. The kernels are
// pipeline/kernels/cv's (MosaicLayout, MosaicImage, MosaicInstances); the
// partners' bytes are read by the executor in the sample's lease
// (decode_multi.go).
//
// Partners are read, not consumed: their indices are cv.Partners of the
// sample's key (the seed, epoch, index, view and copy) on a stream of
// their own, uniform over the sample's window of the epoch's global
// shuffle order (cv.PartnerWindow, as ultralytics' buffer; a
// PartnerCache keeps them decoded), so the epoch's plan is untouched
// (every index is still the primary sample exactly once an epoch) and a
// sample's mosaic is the same on any topology and across a resume.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// OpMosaic is ultralytics' Mosaic (imgsz, n, p); OpMixUp its MixUp (p),
// right after the Mosaic: the sample blended with another sample made by
// the same geometry (its own Mosaic, its own partners).
// OpCopyPaste is its CopyPaste in flip mode (p), right after the Mosaic
// (v8_transforms' pre_transform: Mosaic, CopyPaste, RandomPerspective).
const (
	OpMosaic    optab.OpKind = "YOLOMosaic"
	OpMixUp     optab.OpKind = "YOLOMixUp"
	OpCopyPaste optab.OpKind = "YOLOCopyPaste"
	OpCutMix    optab.OpKind = "YOLOCutMix"
)

func init() {
	optab.Define(optab.Def{Kind: OpMosaic, Doc: "ultralytics' Mosaic: the image and n-1 partners drawn from the dataset, each resized to imgsz on its long side, tiled around a random centre on a 2*imgsz canvas of 114",
		Named: true, Geometry: true, Targets: optab.TargetsMove,
		Params: []optab.Param{
			{Name: "imgsz", Typ: optab.PInt, Def: "640", At: func(o *optab.Op) any { return &o.ImgSz }, Lo: 32, Hi: optab.MaxSide / 2},
			{Name: "p", Typ: optab.PFloat, Def: "1.0", At: func(o *optab.Op) any { return &o.P }, Lo: 0, Hi: 1},
			{Name: "n", Typ: optab.PInt, Def: "4", At: func(o *optab.Op) any { return &o.Tiles }, Lo: 4, Hi: 9},
		},
		Misplaced: "YOLOMosaic after other ops is not supported: it is the geometry, first, fused into the decode",
		Masks:     func(*optab.Op) error { return fmt.Errorf("%w: masks do not follow YOLOMosaic yet", errs.Unsupported) },
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(imgsz=%d, p=%g, n=%d)", op.ImgSz, op.P, op.Tiles)
		}})
	optab.Define(optab.Def{Kind: OpMixUp, Doc: "ultralytics' MixUp, right after a YOLOMosaic: with probability p, blended (ratio drawn from Beta(32, 32)) with another sample drawn from the dataset through the same YOLOMosaic, their labels concatenated",
		Named: true, Geometry: true, Targets: optab.TargetsMove,
		Params:    []optab.Param{optab.PParam(0)},
		Misplaced: "YOLOMixUp is supported right after a YOLOMosaic only (ultralytics' pre_transform makes its partner)",
		Masks:     func(*optab.Op) error { return fmt.Errorf("%w: masks do not follow YOLOMixUp yet", errs.Unsupported) },
		Format:    optab.FormatP})
	optab.Define(optab.Def{Kind: OpCopyPaste, Doc: "ultralytics' CopyPaste: in flip mode, right after a YOLOMosaic, the mirrored copies of the mosaic's segments that overlap no instance (IoA below 0.30), the fraction p of them least overlapping, pasted (their pixels from the mirrored mosaic) and added; in mixup mode, after the YOLOMosaic's YOLORandomPerspective, with probability p, the copies taken so from another sample made by the same Mosaic and warp; a segment dataset's",
		Named: true, Geometry: true, Targets: optab.TargetsMove, NeedsTargets: true,
		Params:    []optab.Param{optab.PParam(0.5), {Name: "mode", Typ: optab.PString, Def: "'flip'", At: func(o *optab.Op) any { return &o.Mode }}},
		Misplaced: "YOLOCopyPaste is supported right after a YOLOMosaic (flip mode) or its YOLORandomPerspective (mixup mode) only (ultralytics' pre_transform)",
		Masks: func(*optab.Op) error {
			return fmt.Errorf("%w: masks do not follow YOLOCopyPaste yet", errs.Unsupported)
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(p=%g, mode=%s)", op.P, op.Mode)
		}})
	optab.Define(optab.Def{Kind: OpCutMix, Doc: "ultralytics' CutMix, last of the YOLOMosaic's ops: with probability p, of num_areas boxes drawn (side ratio sqrt(1 - Beta(beta, beta))), one that overlaps no instance takes another sample's pixels (made by the same ops) and its instances there",
		Named: true, Geometry: true, Targets: optab.TargetsMove, NeedsTargets: true,
		Params: []optab.Param{optab.PParam(0), {Name: "beta", Typ: optab.PFloat, Def: "1.0", At: func(o *optab.Op) any { return &o.Beta }, Lo: 0.01, Hi: 100},
			{Name: "num_areas", Typ: optab.PInt, Def: "3", At: func(o *optab.Op) any { return &o.Areas }, Lo: 1, Hi: 16}},
		Misplaced: "YOLOCutMix is supported last of a YOLOMosaic's ops only (ultralytics' v8_transforms)",
		Masks:     func(*optab.Op) error { return fmt.Errorf("%w: masks do not follow YOLOCutMix yet", errs.Unsupported) },
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(p=%g, beta=%g, num_areas=%d)", op.P, op.Beta, op.Areas)
		}})
}

// multiOp takes op n of the multi-image geometry: the Mosaic, its
// CopyPaste, the YOLORandomPerspective after them, the MixUp.
func (t *Transform) multiOp(op *optab.Op, n int) error {
	var err error
	switch op.Kind {
	case OpMosaic:
		if err = checkMosaic(op, n); err == nil {
			t.mosaic = op
		}
	case OpYOLORandomPerspective:
		err = t.mosaicPersp(op, n)
	case OpMixUp:
		if err = t.checkMixUp(op, n); err == nil {
			t.mixup = op
		}
	case OpCopyPaste:
		if op.Mode == "mixup" {
			if err = t.checkCopyPasteMix(op, n); err == nil {
				t.copyPasteMix = op
			}
		} else if err = t.checkCopyPaste(op, n); err == nil {
			t.copyPaste = op
		}
	case OpCutMix:
		if err = t.checkCutMix(op, n); err == nil {
			t.cutmix = op
		}
	}
	return err
}

// checkCutMix checks a CutMix where it stands: last of the multi-image
// geometry (after the MixUp, if any), on a Mosaic of p 1.
func (t *Transform) checkCutMix(op *optab.Op, n int) error {
	last := t.afterMosaic()
	if t.yolo != nil {
		last++
	}
	if t.mixup != nil {
		last++
	}
	if t.copyPasteMix != nil {
		last++
	}
	if t.mosaic == nil || n != last || t.mosaic.P != 1 {
		return fmt.Errorf("%w: transform: YOLOCutMix is supported after a YOLOMosaic of p=1 and what v8_transforms puts before it (YOLOCopyPaste, YOLORandomPerspective, YOLOMixUp) only: its partner is made by the same ops", errs.Unsupported)
	}
	if !(op.P >= 0 && op.P <= 1) || !(op.Beta > 0 && op.Beta <= 100) || op.Areas < 1 || op.Areas > 16 {
		return fmt.Errorf("%w: transform: YOLOCutMix p=%v, beta=%v, num_areas=%d: want p 0..1, beta above 0 up to 100, num_areas 1..16", errs.Unsupported, op.P, op.Beta, op.Areas)
	}
	return nil
}

// cutArea is one of CutMix's areas as drawn: its Beta ratio and centre.
type cutArea struct {
	lam    float64
	cx, cy int
}

// CutMixDraw is CutMix's draw for key k on a w x h sample: whether it
// applies (random.uniform(0, 1) > p skips it), then each area's ratio
// (np.random.beta(beta, beta): X/(X+Y) of two Gamma(beta)) and centre
// (np.random.randint(w), randint(h)), into buf; r goes on to draw the
// choice among the free areas.
func (t sampler) CutMixDraw(k det.Key, w, h int, buf []cutArea) (on bool, areas []cutArea, r det.RNG) {
	if t.cutmix == nil {
		return false, buf[:0], r
	}
	r = k.Stream(cv.CutMixStream + 1)
	if r.Float64() > t.cutmix.P {
		return false, buf[:0], r
	}
	areas = buf[:0]
	for range t.cutmix.Areas {
		x, y := r.Gamma(t.cutmix.Beta), r.Gamma(t.cutmix.Beta)
		a := cutArea{lam: x / (x + y)}
		a.cx = r.Intn(w)
		a.cy = r.Intn(h)
		areas = append(areas, a)
	}
	return true, areas, r
}

// cutView keys a CutMix partner's draws, as mixView a MixUp's.
const cutView = 2 << 40

// checkMixUp checks a MixUp where it stands: right after the Mosaic, or
// after its YOLORandomPerspective (ultralytics' pre_transform).
func (t *Transform) checkMixUp(op *optab.Op, n int) error {
	a := t.afterMosaic()
	if t.yolo != nil {
		a++
	}
	if t.copyPasteMix != nil {
		a++
	}
	if t.mosaic == nil || n != a {
		return fmt.Errorf("%w: transform: YOLOMixUp is supported right after a YOLOMosaic only (its partner is made by the same YOLOMosaic, as ultralytics' pre_transform makes it)", errs.Unsupported)
	}
	if !(op.P >= 0 && op.P <= 1) {
		return fmt.Errorf("%w: transform: YOLOMixUp p=%v: want 0..1", errs.Unsupported, op.P)
	}
	return nil
}

// checkMosaic checks a Mosaic's arguments beyond the schema: n is 4 or 9,
// imgsz within the output bound, p 1 (a mosaic not drawn leaves the image
// at its load_image size, which only a YOLO RandomPerspective after it
// could take: not yet).
func checkMosaic(op *optab.Op, n int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: YOLOMosaic: %s", errs.Unsupported, fmt.Sprintf(format, a...))
	}
	switch {
	case n > 0:
		return bad("it must be the first op (the geometry)")
	case op.Tiles != 4 && op.Tiles != 9:
		return bad("n=%d: want 4 or 9", op.Tiles)
	case op.ImgSz < 32 || 2*op.ImgSz > optab.MaxSide:
		return bad("imgsz=%d: want 32..%d", op.ImgSz, optab.MaxSide/2)
	}
	return nil
}

// mosaicPersp takes a YOLORandomPerspective right after a Mosaic (op n):
// ultralytics' v8_transforms' affine, which crops the mosaic to its size;
// a sample the Mosaic leaves (its p) is load_image'd and warped to the
// same size (the YOLO geometry of YOLOLoadImage(imgsz) then this op), as
// ultralytics does, and so is every sample once a stop_epoch switches the
// Mosaic off (close_mosaic).
func (t *Transform) mosaicPersp(op *optab.Op, n int) error {
	if t.mosaic == nil || n != t.afterMosaic() {
		return fmt.Errorf("%w: transform: YOLORandomPerspective is the YOLO geometry's: after YOLOLoadImage (and YOLOLetterBox), or right after a YOLOMosaic", errs.Unsupported)
	}
	if err := checkYOLOPersp(op); err != nil {
		return err
	}
	if op.YSize == [2]int{} {
		return fmt.Errorf("%w: transform: YOLORandomPerspective after a YOLOMosaic needs its size (w, h): ultralytics' v8_transforms gives (imgsz, imgsz)", errs.Unsupported)
	}
	t.yolo = &yoloGeom{load: &optab.Op{Kind: OpYOLOLoadImage, ImgSz: t.mosaic.ImgSz}, Persp: op}
	t.geom, t.outW, t.outH = CropResize, op.YSize[0], op.YSize[1]
	return nil
}

// checkMulti checks a Mosaic's geometry as a whole: a p below 1 leaves
// samples at their load_image size, which only a YOLORandomPerspective
// after it brings to the batch's size; MixUp makes its partner through
// the Mosaic, so wants every sample mosaicked.
func (t *Transform) checkMulti() error {
	if t.mosaic == nil {
		return nil
	}
	if t.mosaic.P != 1 && t.yolo == nil {
		return fmt.Errorf("%w: transform: YOLOMosaic p=%g: a sample it leaves keeps its load_image size; follow it with YOLORandomPerspective(size=...), which fixes the batch's size, or give p=1", errs.Unsupported, t.mosaic.P)
	}
	if t.copyPaste != nil && t.mosaic.P != 1 {
		return fmt.Errorf("%w: transform: YOLOCopyPaste after a YOLOMosaic of p=%g is not supported (a sample the Mosaic leaves would be pasted at its load_image size): give the YOLOMosaic p=1", errs.Unsupported, t.mosaic.P)
	}
	if t.copyPasteMix != nil && t.mosaic.P != 1 {
		return fmt.Errorf("%w: transform: YOLOCopyPaste mode 'mixup' after a YOLOMosaic of p=%g is not supported: give the YOLOMosaic p=1 (its partner is made by the same Mosaic)", errs.Unsupported, t.mosaic.P)
	}
	if t.mixup != nil && t.mosaic.P != 1 {
		return fmt.Errorf("%w: transform: YOLOMixUp after a YOLOMosaic of p=%g is not supported: give the YOLOMosaic p=1 (ultralytics' default)", errs.Unsupported, t.mosaic.P)
	}
	return nil
}

// MosaicOn is the Mosaic's draw of whether it applies to the sample of
// key k (ultralytics' random.uniform(0, 1) > p leaves it): the first
// number of the geometry's stream.
func (t sampler) MosaicOn(k det.Key) bool {
	r := k.Stream(StreamCrop)
	return !(r.Float64() > t.mosaic.P)
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
}

// CutArea is CutMix's area i (cv.CutMixArea of its draws).
func (m *MultiDraw) CutArea(i int) [4]float32 {
	a := m.CutAreas[i]
	return cv.CutMixArea(m.CutW, m.CutH, a.lam, a.cx, a.cy)
}

// mixView keys a MixUp partner's draws: the partner's index with the
// sample's view plus mixView, a view no transform has, so the partner
// is made with draws of its own (ultralytics' pre_transform draws anew).
const mixView = 1 << 40

// CutKey is the key a CutMix partner j of the sample of key k is made with.
func CutKey(k det.Key, j int) det.Key {
	k.Index, k.View = uint64(j), k.View+cutView
	return k
}

// MixKey is the key a MixUp partner j of the sample of key k is made with.
func MixKey(k det.Key, j int) det.Key {
	k.Index, k.View = uint64(j), k.View+mixView
	return k
}

// MultiPartners appends to buf[:0] the partners the sample of key k reads
// in a dataset of size samples, for t at k's epoch, in the order its
// decode takes them: its pre_transform's (prePartners: its Mosaic's n-1,
// and a CopyPaste in mixup mode's), then, when its MixUp is drawn, the
// MixUp's partner and that one's pre_transform's, then a CutMix's
// likewise. Nil when t has no Mosaic
// then. They are read, not consumed: pure functions of the key (the
// seed, epoch, index, view and copy), drawn from streams of their own,
// so the epoch's plan is untouched (every index is still the primary
// sample exactly once an epoch) and a sample's mosaic is the same on any
// topology and across a resume.
func (t sampler) MultiPartners(k det.Key, size int, buf []int) []int {
	t = t.AtEpoch(k.Epoch).sampler()
	if t.mosaic == nil || size < 1 || !t.MosaicOn(k) {
		return nil
	}
	buf = t.prePartners(k, size, buf[:0])
	if on, _ := t.MixUpDraw(k); on {
		j := mixupPartner(k, size)
		buf = append(buf, j)
		buf = t.prePartners(MixKey(k, j), size, buf)
	}
	if r := k.Stream(cv.CutMixStream + 1); t.cutmix != nil && !(r.Float64() > t.cutmix.P) { // cutmixDraw's first
		var one [1]int
		cv.Partners(k, cv.CutMixStream, size, one[:])
		buf = append(buf, one[0])
		buf = t.prePartners(CutKey(k, one[0]), size, buf)
	}
	return buf
}

// mosaicPartners appends the n-1 partners of k's Mosaic to buf.
func (t *Transform) mosaicPartners(k det.Key, size int, buf []int) []int {
	at := len(buf)
	buf = append(buf, make([]int, t.mosaic.Tiles-1)...)
	cv.Partners(k, cv.MosaicStream, size, buf[at:])
	return buf
}

// MixUpDraw is MixUp's draw for key k: whether it applies (ultralytics'
// random.uniform(0, 1) > p skips it) and its ratio (np.random.beta(32,
// 32): X/(X+Y) of two Gamma(32) draws).
func (t sampler) MixUpDraw(k det.Key) (on bool, r float64) {
	if t.mixup == nil {
		return false, 0
	}
	rs := k.Stream(cv.MixUpStream + 1)
	if rs.Float64() > t.mixup.P {
		return false, 0
	}
	x, y := rs.Gamma(32), rs.Gamma(32)
	return true, x / (x + y)
}

// mixupPartner is the MixUp partner of the sample of key k in a dataset
// of size samples (cv.Partners on the MixUp stream).
func mixupPartner(k det.Key, size int) int {
	var one [1]int
	cv.Partners(k, cv.MixUpStream, size, one[:])
	return one[0]
}

// MosaicCentre is Mosaic.get_params' draw for n = 4: yc, then xc, each
// int(random.uniform(-border, 2*imgsz + border)) with border -imgsz//2
// (Python's floor division), from the geometry's stream after mosaicOn's.
// 9 draws nothing.
func (t sampler) MosaicCentre(k det.Key) (xc, yc int) {
	if t.mosaic.Tiles != 4 {
		return 0, 0
	}
	s := t.mosaic.ImgSz
	border := -((s + 1) / 2) // -s // 2
	r := k.Stream(StreamCrop)
	r.Float64() // mosaicOn's
	lo, hi := float64(-border), float64(2*s+border)
	yc = int(r.Uniform(lo, hi))
	xc = int(r.Uniform(lo, hi))
	return xc, yc
}

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
