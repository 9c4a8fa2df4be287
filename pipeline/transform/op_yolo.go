package transform

// The YOLO family: ultralytics' (8.4.190) single-image training ops, with
// its names prefixed by YOLO so that they never clash with
// torchvision's of the same names (RandomPerspective, RandomFlip):
// YOLOLoadImage (BaseDataset.load_image: the long side to imgsz,
// cv2.INTER_LINEAR), YOLOLetterBox, YOLORandomPerspective, YOLORandomHSV
// and YOLORandomFlip. Their kernels are pipeline/kernels/cv's, exact
// against ultralytics and its OpenCV (RandomHSV within 1). The first
// three are the geometry (yolo.go: run on the image at its own size, in
// the decode's canvas path); the last two are steps on the output.
// Labels move as ultralytics' Instances do, in float32 (boxes XYXY).
// Below them, the multi-image geometry's CopyPaste, both modes (the
// Decoder's half in the root's decode_multi.go and decode_targets.go).

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/det"
	"github.com/stoker-dev/stoker/pipeline/internal/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

const (
	OpYOLOLoadImage         optab.OpKind = "YOLOLoadImage"
	OpYOLOLetterBox         optab.OpKind = "YOLOLetterBox"
	OpYOLORandomPerspective optab.OpKind = "YOLORandomPerspective"
	OpYOLORandomHSV         optab.OpKind = "YOLORandomHSV"
	OpYOLORandomFlip        optab.OpKind = "YOLORandomFlip"
)

// yoloKind says whether k is one of the YOLO geometry's ops.
func yoloKind(k optab.OpKind) bool {
	return k == OpYOLOLoadImage || k == OpYOLOLetterBox || k == OpYOLORandomPerspective
}

func init() {
	yolo := func(d optab.Def) {
		if d.Geometry {
			d.Stays = true
			d.Misplaced = fmt.Sprintf("%s after other ops: the YOLO geometry is YOLOLoadImage, then YOLOLetterBox and/or YOLORandomPerspective, first, fused into the decode", d.Kind)
		}
		d.Named = true
		d.Masks = func(*optab.Op) error {
			return fmt.Errorf("masks do not follow the YOLO family's ops yet")
		}
		optab.Define(d)
	}
	yolo(optab.Def{Kind: OpYOLOLoadImage, Doc: "ultralytics' load_image: the whole image, its long side resized to imgsz (cv2.INTER_LINEAR)",
		Params:   []optab.Param{{Name: "imgsz", Typ: optab.PInt, Def: "640", Field: "ImgSz", Lo: 1, Hi: optab.MaxSide}},
		Geometry: true, Targets: optab.TargetsInstances,
		Format: func(b *strings.Builder, op *optab.Op) { fmt.Fprintf(b, "(imgsz=%d)", op.ImgSz) }})
	yolo(optab.Def{Kind: OpYOLOLetterBox, Doc: "ultralytics' LetterBox: resized to fit new_shape (h, w), padded with 114",
		Params: []optab.Param{{Name: "new_shape", Typ: optab.PSize, Def: "(640, 640)", Field: "Size", Lo: 1, Hi: optab.MaxSide},
			{Name: "auto", Typ: optab.PBool, Def: "False", Field: "Auto"}, {Name: "scale_fill", Typ: optab.PBool, Def: "False", Field: "ScaleFill"},
			{Name: "scaleup", Typ: optab.PBool, Def: "True", Field: "ScaleUp"}, {Name: "center", Typ: optab.PBool, Def: "True", Field: "LetterCenter"},
			{Name: "stride", Typ: optab.PInt, Def: "32", Field: "Stride", Lo: 1, Hi: 4096}},
		Geometry: true, Targets: optab.TargetsInstances,
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(%dx%d, auto=%v, scale_fill=%v, scaleup=%v, center=%v, stride=%d)", op.Size[0], op.Size[1], op.Auto, op.ScaleFill, op.ScaleUp, op.LetterCenter, op.Stride)
		}})
	yolo(optab.Def{Kind: OpYOLORandomPerspective, Doc: "ultralytics' RandomPerspective: a random warp into size (w, h; None: the image's), boxes filtered",
		Params: []optab.Param{{Name: "degrees", Typ: optab.PFloat, Def: "0.0", Field: "YDegrees", Lo: 0, Hi: 360},
			{Name: "translate", Typ: optab.PFloat, Def: "0.1", Field: "YTranslate", Lo: 0, Hi: 1},
			{Name: "scale", Typ: optab.PFloat, Def: "0.5", Field: "YScale", Lo: 0, Hi: 0.99},
			{Name: "shear", Typ: optab.PFloat, Def: "0.0", Field: "YShear", Lo: 0, Hi: 80},
			{Name: "perspective", Typ: optab.PFloat, Def: "0.0", Field: "YPersp", Lo: 0, Hi: 0.01},
			{Name: "size", Typ: optab.PSize, Def: "None", Field: "YSize", Lo: 1, Hi: optab.MaxSide}},
		Geometry: true, Targets: optab.TargetsInstances,
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(degrees=%g, translate=%g, scale=%g, shear=%g, perspective=%g, size=%v)", op.YDegrees, op.YTranslate, op.YScale, op.YShear, op.YPersp, op.YSize)
		}})
	yolo(optab.Def{Kind: OpYOLORandomHSV, Doc: "ultralytics' RandomHSV: hue, saturation and value by gains drawn in -+(hgain, sgain, vgain)",
		Params: []optab.Param{{Name: "hgain", Typ: optab.PFloat, Def: "0.5", Field: "HGain", Lo: 0, Hi: 1},
			{Name: "sgain", Typ: optab.PFloat, Def: "0.5", Field: "SGain", Lo: 0, Hi: 1}, {Name: "vgain", Typ: optab.PFloat, Def: "0.5", Field: "VGain", Lo: 0, Hi: 1}},
		Targets: optab.TargetsPixels, AnyFormat: true,
		Step: func(*optab.Op) fn.Step { return fn.Step{Fn: fn.YOLOHSV} }, // its cost
		Compile: func(_ *optab.Compiler, n *optab.Node, at optab.CompileAt) error {
			for _, g := range []float64{n.Op.HGain, n.Op.SGain, n.Op.VGain} {
				if !(g >= 0 && g <= 1) {
					return optab.OpError(at.Where, "gain %v: want 0..1", g)
				}
			}
			return nil
		},
		Draw: func(n *optab.Node, r *det.RNG, d *optab.Drawer) {
			op := n.Op
			if op.HGain == 0 && op.SGain == 0 && op.VGain == 0 {
				return // ultralytics draws nothing then
			}
			st := fn.Step{Fn: fn.YOLOHSV}
			for i, g := range []float64{op.HGain, op.SGain, op.VGain} {
				st.F[i] = float64(r.Uniform(-1, 1) * g) // np.random.uniform(-1, 1, 3) * gains
			}
			d.Emit(st)
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(hgain=%g, sgain=%g, vgain=%g)", op.HGain, op.SGain, op.VGain)
		}})
	yolo(optab.Def{Kind: OpYOLORandomFlip, Doc: "ultralytics' RandomFlip: flipped with probability p in direction, keypoints reordered by flip_idx",
		Params: []optab.Param{optab.PParam(0.5), {Name: "direction", Typ: optab.PString, Def: "'horizontal'", Field: "Direction"},
			{Name: "flip_idx", Typ: optab.PInts, Def: "None", Field: "FlipIdx", Lo: 0, Hi: 1023}},
		Targets: optab.TargetsInstances,
		Compile: func(_ *optab.Compiler, n *optab.Node, at optab.CompileAt) error {
			if err := optab.CheckProb(n.Op, at); err != nil {
				return err
			}
			if d := n.Op.Direction; d != "horizontal" && d != "vertical" {
				return optab.OpError(at.Where, "direction %q: want 'horizontal' or 'vertical'", errs.Clip(d, 32))
			}
			if len(n.Op.FlipIdx) > 1024 {
				return optab.OpError(at.Where, "flip_idx of %d keypoints: the limit is 1024", len(n.Op.FlipIdx))
			}
			for _, j := range n.Op.FlipIdx {
				if j < 0 || j >= len(n.Op.FlipIdx) {
					return optab.OpError(at.Where, "flip_idx %v: want indices below its length", n.Op.FlipIdx)
				}
			}
			n.Step = fn.Step{Fn: fn.YOLOFlipLR, I: [6]int{1: fn.InternFlipIdx(n.Op.FlipIdx)}}
			if n.Op.Direction == "vertical" {
				n.Step.Fn = fn.YOLOFlipUD
			}
			return nil
		},
		Draw: optab.DrawApplied, // random.random() < p
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(p=%g, direction=%s, flip_idx=%v)", op.P, op.Direction, op.FlipIdx)
		}})
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
// of its own (cv.CopyPasteStream), and made with draws of its own (its
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
	if t.CopyPasteMixOn(k) {
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

// CopyPasteMixOp is t's CopyPaste in mixup mode, if any.
func (t *Transform) CopyPasteMixOp() *optab.Op { return t.copyPasteMix }

// CopyPasteMixOn is a CopyPaste in mixup mode's draw for the
// pre_transform of key k: whether it applies (BaseMixTransform's
// random.uniform(0, 1) > p skips it; p 0 never does).
func (t *Transform) CopyPasteMixOn(k det.Key) bool {
	if t.copyPasteMix == nil || t.copyPasteMix.P == 0 {
		return false
	}
	r := k.Stream(cv.CopyPasteStream + 1)
	return !(r.Float64() > t.copyPasteMix.P)
}

// CopyPasteMixPartner is the CopyPaste partner of the pre_transform of
// key k in a dataset of size samples.
func CopyPasteMixPartner(k det.Key, size int) int {
	var one [1]int
	cv.Partners(k, cv.CopyPasteStream, size, one[:])
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
