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
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// The streams of a sample's key the family draws its partners from
// (cv.Partners): apart from every op's, so that drawing them shifts no
// other number. An op's own draws (whether it applies, its ratio, its
// areas) take the stream after its partners'.
const (
	streamMosaic    = 0x6d6f73616963 // "mosaic": a mosaic's partners
	streamMixUp     = 0x6d69787570   // "mixup": a mixup's partner
	streamCutMix    = 0x6375746d6978 // "cutmix": a cutmix's partner
	streamCopyPaste = 0x6370617374   // "cpast": a CopyPaste's partner (its mixup mode)
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

// The family's places in the geometry (placer): the Mosaic, and after it
// its own ops only: its CopyPaste, the YOLORandomPerspective after them
// (mosaicPersp, which op_yolo.go's placer calls after a Mosaic), the
// MixUp, the CutMix.
func init() {
	definePlacer(OpMosaic, placeAt(func(t *Transform, op *optab.Op, n int) error {
		if err := checkMosaic(op, n); err != nil {
			return err
		}
		t.mosaic = op
		return nil
	}).followedBy(func(_ *Transform, op *optab.Op, n int) error {
		if op.Kind == OpYOLORandomPerspective || slices.Contains(YOLOStopOps, op.Kind) {
			return nil
		}
		return transformErr("op %d (%s) after a YOLOMosaic is not supported: the mosaic's geometry is ultralytics' v8_transforms' (YOLOMosaic, YOLOCopyPaste, YOLORandomPerspective, YOLOMixUp, YOLOCutMix), and its size is theirs", n, op.Kind)
	}))
	definePlacer(OpMixUp, placeAt(func(t *Transform, op *optab.Op, n int) error {
		if err := t.checkMixUp(op, n); err != nil {
			return err
		}
		t.mixup = op
		return nil
	}))
	definePlacer(OpCopyPaste, placeAt(func(t *Transform, op *optab.Op, n int) error {
		if op.Mode == "mixup" {
			if err := t.checkCopyPasteMix(op, n); err != nil {
				return err
			}
			t.copyPasteMix = op
			return nil
		}
		if err := t.checkCopyPaste(op, n); err != nil {
			return err
		}
		t.copyPaste = op
		return nil
	}))
	definePlacer(OpCutMix, placeAt(func(t *Transform, op *optab.Op, n int) error {
		if err := t.checkCutMix(op, n); err != nil {
			return err
		}
		t.cutmix = op
		return nil
	}))
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

// cutMixDraw is CutMix's draw for key k on a w x h sample: whether it
// applies (random.uniform(0, 1) > p skips it), then each area's ratio
// (np.random.beta(beta, beta): X/(X+Y) of two Gamma(beta)) and centre
// (np.random.randint(w), randint(h)), into buf; r goes on to draw the
// choice among the free areas.
func (t *Transform) cutMixDraw(k det.Key, w, h int, buf []cutArea) (on bool, areas []cutArea, r det.RNG) {
	if t.cutmix == nil {
		return false, buf[:0], r
	}
	r = k.Stream(streamCutMix + 1)
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

// mosaicOn is the Mosaic's draw of whether it applies to the sample of
// key k (ultralytics' random.uniform(0, 1) > p leaves it): the first
// number of the geometry's stream.
func (t *Transform) mosaicOn(k det.Key) bool {
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
	// Pres are the sample's pre_transforms as drawn (PreSelf, PreMix,
	// PreCut, each then its CopyPaste partner's), CutSel the CutMix
	// partner's instances its area takes.
	Pres   [nPres]PreDraw
	CutSel []int
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

// multiPartners appends to buf[:0] the partners the sample of key k reads
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
func (t *Transform) multiPartners(k det.Key, size int, buf []int) []int {
	t = t.AtEpoch(k.Epoch)
	if t.mosaic == nil || size < 1 || !t.mosaicOn(k) {
		return nil
	}
	buf = t.prePartners(k, size, buf[:0])
	if on, _ := t.mixUpDraw(k); on {
		j := mixupPartner(k, size)
		buf = append(buf, j)
		buf = t.prePartners(MixKey(k, j), size, buf)
	}
	if r := k.Stream(streamCutMix + 1); t.cutmix != nil && !(r.Float64() > t.cutmix.P) { // cutmixDraw's first
		var one [1]int
		cv.Partners(k, streamCutMix, size, one[:])
		buf = append(buf, one[0])
		buf = t.prePartners(CutKey(k, one[0]), size, buf)
	}
	return buf
}

// mosaicPartners appends the n-1 partners of k's Mosaic to buf.
func (t *Transform) mosaicPartners(k det.Key, size int, buf []int) []int {
	at := len(buf)
	buf = append(buf, make([]int, t.mosaic.Tiles-1)...)
	cv.Partners(k, streamMosaic, size, buf[at:])
	return buf
}

// mixUpDraw is MixUp's draw for key k: whether it applies (ultralytics'
// random.uniform(0, 1) > p skips it) and its ratio (np.random.beta(32,
// 32): X/(X+Y) of two Gamma(32) draws).
func (t *Transform) mixUpDraw(k det.Key) (on bool, r float64) {
	if t.mixup == nil {
		return false, 0
	}
	rs := k.Stream(streamMixUp + 1)
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
	cv.Partners(k, streamMixUp, size, one[:])
	return one[0]
}

// mosaicCentre is Mosaic.get_params' draw for n = 4: yc, then xc, each
// int(random.uniform(-border, 2*imgsz + border)) with border -imgsz//2
// (Python's floor division), from the geometry's stream after mosaicOn's.
// 9 draws nothing.
func (t *Transform) mosaicCentre(k det.Key) (xc, yc int) {
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
	n := t.mosaic.Tiles
	md.Mix, md.Persp = false, t.yolo != nil
	if md.Persp {
		md.Warp, md.W, md.H = t.yolo.Persp.YPersp != 0, w, ht
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
	pi, pd, err := h.take(t.mosaic.Tiles - 1)
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
	n, s := t.mosaic.Tiles, t.mosaic.ImgSz
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
