package pipeline

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

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/errs"
)

const (
	OpYOLOLoadImage         OpKind = "YOLOLoadImage"
	OpYOLOLetterBox         OpKind = "YOLOLetterBox"
	OpYOLORandomPerspective OpKind = "YOLORandomPerspective"
	OpYOLORandomHSV         OpKind = "YOLORandomHSV"
	OpYOLORandomFlip        OpKind = "YOLORandomFlip"
)

// yoloKind says whether k is one of the YOLO geometry's ops.
func yoloKind(k OpKind) bool {
	return k == OpYOLOLoadImage || k == OpYOLOLetterBox || k == OpYOLORandomPerspective
}

func init() {
	yolo := func(d opDef) {
		if d.Geometry {
			d.Stays = true
			d.Misplaced = fmt.Sprintf("%s after other ops: the YOLO geometry is YOLOLoadImage, then YOLOLetterBox and/or YOLORandomPerspective, first, fused into the decode", d.Kind)
		}
		d.Named = true
		d.Masks = func(*Op) error {
			return fmt.Errorf("masks do not follow the YOLO family's ops yet")
		}
		defineOp(d)
	}
	yolo(opDef{Kind: OpYOLOLoadImage, Doc: "ultralytics' load_image: the whole image, its long side resized to imgsz (cv2.INTER_LINEAR)",
		Params:   []param{{Name: "imgsz", Typ: pInt, Def: "640", Field: "ImgSz", Lo: 1, Hi: maxSide}},
		Geometry: true, Targets: targetsInstances,
		Format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(imgsz=%d)", op.ImgSz) }})
	yolo(opDef{Kind: OpYOLOLetterBox, Doc: "ultralytics' LetterBox: resized to fit new_shape (h, w), padded with 114",
		Params: []param{{Name: "new_shape", Typ: pSize, Def: "(640, 640)", Field: "Size", Lo: 1, Hi: maxSide},
			{Name: "auto", Typ: pBool, Def: "False", Field: "Auto"}, {Name: "scale_fill", Typ: pBool, Def: "False", Field: "ScaleFill"},
			{Name: "scaleup", Typ: pBool, Def: "True", Field: "ScaleUp"}, {Name: "center", Typ: pBool, Def: "True", Field: "LetterCenter"},
			{Name: "stride", Typ: pInt, Def: "32", Field: "Stride", Lo: 1, Hi: 4096}},
		Geometry: true, Targets: targetsInstances,
		Format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(%dx%d, auto=%v, scale_fill=%v, scaleup=%v, center=%v, stride=%d)", op.Size[0], op.Size[1], op.Auto, op.ScaleFill, op.ScaleUp, op.LetterCenter, op.Stride)
		}})
	yolo(opDef{Kind: OpYOLORandomPerspective, Doc: "ultralytics' RandomPerspective: a random warp into size (w, h; None: the image's), boxes filtered",
		Params: []param{{Name: "degrees", Typ: pFloat, Def: "0.0", Field: "YDegrees", Lo: 0, Hi: 360},
			{Name: "translate", Typ: pFloat, Def: "0.1", Field: "YTranslate", Lo: 0, Hi: 1},
			{Name: "scale", Typ: pFloat, Def: "0.5", Field: "YScale", Lo: 0, Hi: 0.99},
			{Name: "shear", Typ: pFloat, Def: "0.0", Field: "YShear", Lo: 0, Hi: 80},
			{Name: "perspective", Typ: pFloat, Def: "0.0", Field: "YPersp", Lo: 0, Hi: 0.01},
			{Name: "size", Typ: pSize, Def: "None", Field: "YSize", Lo: 1, Hi: maxSide}},
		Geometry: true, Targets: targetsInstances,
		Format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(degrees=%g, translate=%g, scale=%g, shear=%g, perspective=%g, size=%v)", op.YDegrees, op.YTranslate, op.YScale, op.YShear, op.YPersp, op.YSize)
		}})
	yolo(opDef{Kind: OpYOLORandomHSV, Doc: "ultralytics' RandomHSV: hue, saturation and value by gains drawn in -+(hgain, sgain, vgain)",
		Params: []param{{Name: "hgain", Typ: pFloat, Def: "0.5", Field: "HGain", Lo: 0, Hi: 1},
			{Name: "sgain", Typ: pFloat, Def: "0.5", Field: "SGain", Lo: 0, Hi: 1}, {Name: "vgain", Typ: pFloat, Def: "0.5", Field: "VGain", Lo: 0, Hi: 1}},
		Targets: targetsPixels, AnyFormat: true,
		Step: func(*Op) Step { return Step{Fn: FnYOLOHSV} }, // its cost
		Compile: func(_ *compiler, n *node, at compileAt) error {
			for _, g := range []float64{n.Op.HGain, n.Op.SGain, n.Op.VGain} {
				if !(g >= 0 && g <= 1) {
					return opError(at.Where, "gain %v: want 0..1", g)
				}
			}
			return nil
		},
		Draw: func(n *node, r *RNG, d *drawer) {
			op := n.Op
			if op.HGain == 0 && op.SGain == 0 && op.VGain == 0 {
				return // ultralytics draws nothing then
			}
			st := Step{Fn: FnYOLOHSV}
			for i, g := range []float64{op.HGain, op.SGain, op.VGain} {
				st.F[i] = float64(r.Uniform(-1, 1) * g) // np.random.uniform(-1, 1, 3) * gains
			}
			d.Emit(st)
		},
		Format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(hgain=%g, sgain=%g, vgain=%g)", op.HGain, op.SGain, op.VGain)
		}})
	yolo(opDef{Kind: OpYOLORandomFlip, Doc: "ultralytics' RandomFlip: flipped with probability p in direction, keypoints reordered by flip_idx",
		Params: []param{pParam(0.5), {Name: "direction", Typ: pString, Def: "'horizontal'", Field: "Direction"},
			{Name: "flip_idx", Typ: pInts, Def: "None", Field: "FlipIdx", Lo: 0, Hi: 1023}},
		Targets: targetsInstances,
		Compile: func(_ *compiler, n *node, at compileAt) error {
			if err := checkProb(n.Op, at); err != nil {
				return err
			}
			if d := n.Op.Direction; d != "horizontal" && d != "vertical" {
				return opError(at.Where, "direction %q: want 'horizontal' or 'vertical'", errs.Clip(d, 32))
			}
			if len(n.Op.FlipIdx) > 1024 {
				return opError(at.Where, "flip_idx of %d keypoints: the limit is 1024", len(n.Op.FlipIdx))
			}
			for _, j := range n.Op.FlipIdx {
				if j < 0 || j >= len(n.Op.FlipIdx) {
					return opError(at.Where, "flip_idx %v: want indices below its length", n.Op.FlipIdx)
				}
			}
			n.Step = Step{Fn: FnYOLOFlipLR, I: [6]int{1: fn.InternFlipIdx(n.Op.FlipIdx)}}
			if n.Op.Direction == "vertical" {
				n.Step.Fn = FnYOLOFlipUD
			}
			return nil
		},
		Draw: drawApplied, // random.random() < p
		Format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(p=%g, direction=%s, flip_idx=%v)", op.P, op.Direction, op.FlipIdx)
		}})
}
