package transform

// The multi-image family's ops (ultralytics' Mosaic, MixUp, CopyPaste and
// CutMix; YOLOX's MixUp is op_yoloxmix.go's): their kinds, Defs and
// placers, each one's checks where it stands, its stop_epoch, the draws
// it makes from a sample's key, its partners and their keys, its cost and
// its room. A sample's plan and its making are op_multi.go's, its
// targets' moves op_multi_targets.go's.
//
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
	streamYOLOXMix  = 0x796f6c6f78   // "yolox": a YOLOX MixUp's partner
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

// The family's arguments, each op's own type (optab.Op.Args), with
// ultralytics' names; p, whether the op applies, is every random op's
// (optab.Op.P). YOLOMixUp has p alone.
type (
	// MosaicArgs are YOLOMosaic's: imgsz, each image's long side, and
	// n, its images (4 or 9).
	MosaicArgs struct{ ImgSz, N int }
	// CopyPasteArgs are YOLOCopyPaste's: mode, "flip" or "mixup".
	CopyPasteArgs struct{ Mode string }
	// CutMixArgs are YOLOCutMix's: beta, of the Beta its areas' sides are
	// drawn from, and num_areas.
	CutMixArgs struct {
		Beta  float64
		Areas int
	}
)

func init() {
	optab.Define(optab.Def{Kind: OpMosaic, Doc: "ultralytics' Mosaic: the image and n-1 partners drawn from the dataset, each resized to imgsz on its long side, tiled around a random centre on a 2*imgsz canvas of 114",
		Named: true, Geometry: true, Targets: optab.TargetsMove,
		Params: []optab.Param{
			{Name: "imgsz", Typ: optab.PInt, Def: "640", At: func(o *optab.Op) any { return &optab.ArgsAt[MosaicArgs](o).ImgSz }, Lo: 32, Hi: optab.MaxSide / 2},
			{Name: "p", Typ: optab.PFloat, Def: "1.0", At: func(o *optab.Op) any { return &o.P }, Lo: 0, Hi: 1},
			{Name: "n", Typ: optab.PInt, Def: "4", At: func(o *optab.Op) any { return &optab.ArgsAt[MosaicArgs](o).N }, Lo: 4, Hi: 9},
		},
		Misplaced: "YOLOMosaic after other ops is not supported: it is the geometry, first, fused into the decode",
		Masks:     func(*optab.Op) error { return fmt.Errorf("%w: masks do not follow YOLOMosaic yet", errs.Unsupported) },
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[MosaicArgs](op)
			fmt.Fprintf(b, "(imgsz=%d, p=%g, n=%d)", a.ImgSz, op.P, a.N)
		}})
	optab.Define(optab.Def{Kind: OpMixUp, Doc: "ultralytics' MixUp, right after a YOLOMosaic: with probability p, blended (ratio drawn from Beta(32, 32)) with another sample drawn from the dataset through the same YOLOMosaic, their labels concatenated",
		Named: true, Geometry: true, Targets: optab.TargetsMove,
		Params:    []optab.Param{optab.PParam(0)},
		Misplaced: "YOLOMixUp is supported right after a YOLOMosaic only (ultralytics' pre_transform makes its partner)",
		Masks:     func(*optab.Op) error { return fmt.Errorf("%w: masks do not follow YOLOMixUp yet", errs.Unsupported) },
		Format:    optab.FormatP})
	optab.Define(optab.Def{Kind: OpCopyPaste, Doc: "ultralytics' CopyPaste: in flip mode, right after a YOLOMosaic, the mirrored copies of the mosaic's segments that overlap no instance (IoA below 0.30), the fraction p of them least overlapping, pasted (their pixels from the mirrored mosaic) and added; in mixup mode, after the YOLOMosaic's YOLORandomPerspective, with probability p, the copies taken so from another sample made by the same Mosaic and warp; a segment dataset's",
		Named: true, Geometry: true, Targets: optab.TargetsMove, NeedsTargets: true,
		Params:    []optab.Param{optab.PParam(0.5), {Name: "mode", Typ: optab.PString, Def: "'flip'", At: func(o *optab.Op) any { return &optab.ArgsAt[CopyPasteArgs](o).Mode }}},
		Misplaced: "YOLOCopyPaste is supported right after a YOLOMosaic (flip mode) or its YOLORandomPerspective (mixup mode) only (ultralytics' pre_transform)",
		Masks: func(*optab.Op) error {
			return fmt.Errorf("%w: masks do not follow YOLOCopyPaste yet", errs.Unsupported)
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(p=%g, mode=%s)", op.P, optab.ArgsOf[CopyPasteArgs](op).Mode)
		}})
	optab.Define(optab.Def{Kind: OpCutMix, Doc: "ultralytics' CutMix, last of the YOLOMosaic's ops: with probability p, of num_areas boxes drawn (side ratio sqrt(1 - Beta(beta, beta))), one that overlaps no instance takes another sample's pixels (made by the same ops) and its instances there",
		Named: true, Geometry: true, Targets: optab.TargetsMove, NeedsTargets: true,
		Params: []optab.Param{optab.PParam(0), {Name: "beta", Typ: optab.PFloat, Def: "1.0", At: func(o *optab.Op) any { return &optab.ArgsAt[CutMixArgs](o).Beta }, Lo: 0.01, Hi: 100},
			{Name: "num_areas", Typ: optab.PInt, Def: "3", At: func(o *optab.Op) any { return &optab.ArgsAt[CutMixArgs](o).Areas }, Lo: 1, Hi: 16}},
		Misplaced: "YOLOCutMix is supported last of a YOLOMosaic's ops only (ultralytics' v8_transforms)",
		Masks:     func(*optab.Op) error { return fmt.Errorf("%w: masks do not follow YOLOCutMix yet", errs.Unsupported) },
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[CutMixArgs](op)
			fmt.Fprintf(b, "(p=%g, beta=%g, num_areas=%d)", op.P, a.Beta, a.Areas)
		}})
}

// The preset "yolo": ultralytics' (8.4.190) v8_transforms with its
// default hyp: Mosaic (mosaic 1.0, imgsz 640), RandomPerspective (degrees
// 0, translate 0.1, scale 0.5, shear 0, perspective 0) into (640, 640),
// RandomHSV (0.015, 0.7, 0.4), RandomFlip horizontal 0.5; mixup,
// copy_paste and flipud are 0 there, so their ops, which would never
// apply, are left out. close_mosaic=10 of a run of E epochs is the job's
// stop_epoch E-10 (its default stop_ops, YOLOStopOps, switch the Mosaic
// off: each image load_image'd, then warped to 640x640).
func init() {
	addPreset("yolo", []optab.Op{
		{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 640, N: 4}},
		{Kind: OpYOLORandomPerspective, Args: &YOLOPerspectiveArgs{Translate: 0.1, Scale: 0.5, Size: [2]int{640, 640}}},
		{Kind: OpYOLORandomHSV, Args: &YOLOHSVArgs{HGain: 0.015, SGain: 0.7, VGain: 0.4}},
		{Kind: OpYOLORandomFlip, P: 0.5, Args: &YOLOFlipArgs{Direction: "horizontal"}},
	})
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
		t.mosaic, t.mosaicArgs = op, optab.ArgsOf[MosaicArgs](op)
		return nil
	}).followedBy(func(_ *Transform, op *optab.Op, n int) error {
		if op.Kind == OpYOLORandomPerspective || op.Kind == OpYOLOXMixUp || slices.Contains(YOLOStopOps, op.Kind) {
			return nil
		}
		return transformErr("op %d (%s) after a YOLOMosaic is not supported: the mosaic's geometry is ultralytics' v8_transforms' (YOLOMosaic, YOLOCopyPaste, YOLORandomPerspective, YOLOMixUp, YOLOCutMix) or YOLOX's (YOLOXMixUp after the perspective), and its size is theirs", n, op.Kind)
	}))
	definePlacer(OpMixUp, placeAt(func(t *Transform, op *optab.Op, n int) error {
		if err := t.checkMixUp(op, n); err != nil {
			return err
		}
		t.mixup = op
		return nil
	}))
	definePlacer(OpCopyPaste, placeAt(func(t *Transform, op *optab.Op, n int) error {
		if optab.ArgsOf[CopyPasteArgs](op).Mode == "mixup" {
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
		t.cutmix, t.cutArgs = op, optab.ArgsOf[CutMixArgs](op)
		return nil
	}))
}

// multiOps are a transform's multi-image ops, nil where absent: each
// checked where it stands (their placers, below), drawn and made
// (op_multi.go) and its targets moved (op_multi_targets.go) by the
// family alone.
type multiOps struct {
	// mosaic is ultralytics' Mosaic, if any: the geometry, its partners
	// read with the sample (op_multi.go, the root's decode_multi.go).
	mosaic *optab.Op
	mixup  *optab.Op // ultralytics' MixUp, right after the mosaic
	// copyPaste and copyPasteMix: ultralytics' CopyPaste in flip mode,
	// right after the mosaic, and in mixup mode, after its warp.
	copyPaste, copyPasteMix *optab.Op
	cutmix                  *optab.Op // ultralytics' CutMix, last of the multi-image geometry
	yoloxMix                *optab.Op // YOLOX's MixUp, after the mosaic's warp (no MixUp, no CutMix)
	// mosaicArgs, cutArgs and yoloxArgs are the mosaic's, the CutMix's
	// and YOLOX's MixUp's arguments (their ops' Args).
	mosaicArgs MosaicArgs
	cutArgs    CutMixArgs
	yoloxArgs  YOLOXMixUpArgs
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
	if i := index(t.yoloxMix); i >= 0 { // and YOLOX's MixUp (YOLOX's close_mosaic ends it with the mosaic)
		used[i] = true
		if off[i] || a.mosaic == nil {
			a.yoloxMix = nil
		}
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
	a := optab.ArgsOf[MosaicArgs](op)
	switch {
	case n > 0:
		return bad("it must be the first op (the geometry)")
	case a.N != 4 && a.N != 9:
		return bad("n=%d: want 4 or 9", a.N)
	case a.ImgSz < 32 || 2*a.ImgSz > optab.MaxSide:
		return bad("imgsz=%d: want 32..%d", a.ImgSz, optab.MaxSide/2)
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
	size := optab.ArgsOf[YOLOPerspectiveArgs](op).Size
	if size == [2]int{} {
		return fmt.Errorf("%w: transform: YOLORandomPerspective after a YOLOMosaic needs its size (w, h): ultralytics' v8_transforms gives (imgsz, imgsz)", errs.Unsupported)
	}
	t.yolo = &yoloGeom{load: &optab.Op{Kind: OpYOLOLoadImage, Args: &YOLOLoadImageArgs{ImgSz: t.mosaicArgs.ImgSz}}, Persp: op}
	t.geom, t.outW, t.outH = CropResize, size[0], size[1]
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

// afterMosaic is the position of the first op after the Mosaic's
// pre_transform ops that come before its warp (its CopyPaste, if any).
func (t *Transform) afterMosaic() int {
	if t.copyPaste != nil {
		return 2
	}
	return 1
}

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
	if t.mosaic == nil || n != last || t.mosaic.P != 1 || t.yoloxMix != nil {
		return fmt.Errorf("%w: transform: YOLOCutMix is supported after a YOLOMosaic of p=1 and what v8_transforms puts before it (YOLOCopyPaste, YOLORandomPerspective, YOLOMixUp) only: its partner is made by the same ops", errs.Unsupported)
	}
	if a := optab.ArgsOf[CutMixArgs](op); !(op.P >= 0 && op.P <= 1) || !(a.Beta > 0 && a.Beta <= 100) || a.Areas < 1 || a.Areas > 16 {
		return fmt.Errorf("%w: transform: YOLOCutMix p=%v, beta=%v, num_areas=%d: want p 0..1, beta above 0 up to 100, num_areas 1..16", errs.Unsupported, op.P, a.Beta, a.Areas)
	}
	return nil
}

// CopyPaste: in flip mode right after the Mosaic (v8_transforms' default
// pre_transform: Mosaic, CopyPaste, RandomPerspective), the mosaic's own
// mirrored copies pasted; in mixup mode: ultralytics' (8.4.190)
// v8_transforms with copy_paste_mode="mixup" appends to its pre_transform (Mosaic,
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
	if mode := optab.ArgsOf[CopyPasteArgs](op).Mode; mode != "flip" {
		return fmt.Errorf("%w: transform: YOLOCopyPaste mode %q: want 'flip' (right after the YOLOMosaic) or 'mixup' (after its YOLORandomPerspective)", errs.Unsupported, errs.Clip(mode, 32))
	}
	if !(op.P >= 0 && op.P <= 1) {
		return fmt.Errorf("%w: transform: YOLOCopyPaste p=%v: want 0..1", errs.Unsupported, op.P)
	}
	return nil
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

// mosaicOn is the Mosaic's draw of whether it applies to the sample of
// key k (ultralytics' random.uniform(0, 1) > p leaves it): the first
// number of the geometry's stream.
func (t *Transform) mosaicOn(k det.Key) bool {
	r := k.Stream(StreamCrop)
	return !(r.Float64() > t.mosaic.P)
}

// mosaicCentre is Mosaic.get_params' draw for n = 4: yc, then xc, each
// int(random.uniform(-border, 2*imgsz + border)) with border -imgsz//2
// (Python's floor division), from the geometry's stream after mosaicOn's.
// 9 draws nothing.
func (t *Transform) mosaicCentre(k det.Key) (xc, yc int) {
	if t.mosaicArgs.N != 4 {
		return 0, 0
	}
	s := t.mosaicArgs.ImgSz
	border := -((s + 1) / 2) // -s // 2
	r := k.Stream(StreamCrop)
	r.Float64() // mosaicOn's
	lo, hi := float64(-border), float64(2*s+border)
	yc = int(r.Uniform(lo, hi))
	xc = int(r.Uniform(lo, hi))
	return xc, yc
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
	for range t.cutArgs.Areas {
		x, y := r.Gamma(t.cutArgs.Beta), r.Gamma(t.cutArgs.Beta)
		a := cutArea{lam: x / (x + y)}
		a.cx = r.Intn(w)
		a.cy = r.Intn(h)
		areas = append(areas, a)
	}
	return true, areas, r
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

// mixView keys a MixUp partner's draws: the partner's index with the
// sample's view plus mixView, a view no transform has, so the partner
// is made with draws of its own (ultralytics' pre_transform draws anew).
const mixView = 1 << 40

// cutView keys a CutMix partner's draws, as mixView a MixUp's.
const cutView = 2 << 40

// copyPasteView keys a CopyPaste partner's draws, as mixView a MixUp's.
const copyPasteView = 3 << 40

// MixKey is the key a MixUp partner j of the sample of key k is made with.
func MixKey(k det.Key, j int) det.Key {
	k.Index, k.View = uint64(j), k.View+mixView
	return k
}

// CutKey is the key a CutMix partner j of the sample of key k is made with.
func CutKey(k det.Key, j int) det.Key {
	k.Index, k.View = uint64(j), k.View+cutView
	return k
}

// CopyPasteKey is the key a CopyPaste partner j of the pre_transform of
// key k is made with.
func CopyPasteKey(k det.Key, j int) det.Key {
	k.Index, k.View = uint64(j), k.View+copyPasteView
	return k
}

// multiPartners appends to buf[:0] the partners the sample of key k reads
// in a dataset of size samples, for t at k's epoch, in the order its
// decode takes them: its pre_transform's (prePartners: its Mosaic's n-1,
// and a CopyPaste in mixup mode's), then, when its MixUp is drawn, the
// MixUp's partner and that one's pre_transform's, then a YOLOX MixUp's
// one image, then a CutMix's partner and its pre_transform's. Nil when t
// has no Mosaic then. They are read, not consumed: pure functions of the
// key (the seed, epoch, index, view and copy), drawn from streams of
// their own, so the epoch's plan is untouched (every index is still the
// primary sample exactly once an epoch) and a sample's mosaic is the same
// on any topology and across a resume.
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
	if on, _ := t.yoloxMixOn(k); on { // one image, loaded alone
		var one [1]int
		cv.Partners(k, streamYOLOXMix, size, one[:])
		buf = append(buf, one[0])
	}
	if r := k.Stream(streamCutMix + 1); t.cutmix != nil && !(r.Float64() > t.cutmix.P) { // cutmixDraw's first
		var one [1]int
		cv.Partners(k, streamCutMix, size, one[:])
		buf = append(buf, one[0])
		buf = t.prePartners(CutKey(k, one[0]), size, buf)
	}
	return buf
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

// mosaicPartners appends the n-1 partners of k's Mosaic to buf.
func (t *Transform) mosaicPartners(k det.Key, size int, buf []int) []int {
	at := len(buf)
	buf = append(buf, make([]int, t.mosaicArgs.N-1)...)
	cv.Partners(k, streamMosaic, size, buf[at:])
	return buf
}

// mixupPartner is the MixUp partner of the sample of key k in a dataset
// of size samples (cv.Partners on the MixUp stream).
func mixupPartner(k det.Key, size int) int {
	var one [1]int
	cv.Partners(k, streamMixUp, size, one[:])
	return one[0]
}

// CopyPasteMixPartner is the CopyPaste partner of the pre_transform of
// key k in a dataset of size samples.
func CopyPasteMixPartner(k det.Key, size int) int {
	var one [1]int
	cv.Partners(k, streamCopyPaste, size, one[:])
	return one[0]
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
	// Whole: a partner is loaded whole, at its own size (YOLOX's MixUp
	// resizes it itself): one more image decoded whole, beside Images,
	// where there is no partner cache.
	Whole bool
	// The ops after the Mosaic in force (a stop_epoch's transform has
	// none of those it switched off), each with its partner.
	MixUp, CopyPaste, CutMix bool
}

// MultiRoom is the room of t's multi-image op (ok false: t has none at
// this epoch; AtEpoch's transform has the ops a stop_epoch leaves).
func (t *Transform) MultiRoom() (r MultiRoom, ok bool) {
	if t.mosaic == nil {
		return r, false
	}
	mo := t.mosaicArgs
	s := int64(mo.ImgSz)
	side := 2 * s // the canvas: 2 x 2 tiles, or 3 x 3
	if mo.N == 9 {
		side = 3 * s
	}
	out := int64(t.outW) * int64(t.outH)
	r = MultiRoom{Images: 3 * int64(mo.N) * s * s, Canvas: 3 * side * side, Side: mo.ImgSz,
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
	if t.yoloxMix != nil { // its partner resized twice (each at most the output's), the canvas, the canvas jittered
		hi := t.yoloxArgs.Scale[1]
		jw, jh := int64(float64(t.outW)*hi)+1, int64(float64(t.outH)*hi)+1
		r.Partners += 3*3*out + 3*jw*jh
		r.Whole = true
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
	s := float64(t.mosaicArgs.ImgSz)
	n := float64(t.mosaicArgs.N)
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
	if op := t.yoloxMix; op != nil { // YOLOX's MixUp: its partner read and decoded whole (a hit in the mean), resized twice, the jit's resize of up to hi^2 the output, the canvas and the mix
		hi := t.yoloxArgs.Scale[1]
		made := float64(YOLOResizeNs*float64(px*float64(2+float64(hi*hi)))) + float64(CanvasOutNs*float64(3*px))
		mean += float64(op.P * float64(SampleNs+made))
		worst += load + made
	}
	return mean, worst
}
