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
		if d.geometry {
			d.stays = true
			d.misplaced = fmt.Sprintf("%s after other ops: the YOLO geometry is YOLOLoadImage, then YOLOLetterBox and/or YOLORandomPerspective, first, fused into the decode", d.kind)
		}
		d.named = true
		d.masks = func(*Op) error {
			return fmt.Errorf("masks do not follow the YOLO family's ops yet")
		}
		defineOp(d)
	}
	yolo(opDef{kind: OpYOLOLoadImage, doc: "ultralytics' load_image: the whole image, its long side resized to imgsz (cv2.INTER_LINEAR)",
		params:   []param{{name: "imgsz", typ: pInt, def: "640", field: "ImgSz", lo: 1, hi: maxSide}},
		geometry: true, targets: targetsInstances,
		format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(imgsz=%d)", op.ImgSz) }})
	yolo(opDef{kind: OpYOLOLetterBox, doc: "ultralytics' LetterBox: resized to fit new_shape (h, w), padded with 114",
		params: []param{{name: "new_shape", typ: pSize, def: "(640, 640)", field: "Size", lo: 1, hi: maxSide},
			{name: "auto", typ: pBool, def: "False", field: "Auto"}, {name: "scale_fill", typ: pBool, def: "False", field: "ScaleFill"},
			{name: "scaleup", typ: pBool, def: "True", field: "ScaleUp"}, {name: "center", typ: pBool, def: "True", field: "LetterCenter"},
			{name: "stride", typ: pInt, def: "32", field: "Stride", lo: 1, hi: 4096}},
		geometry: true, targets: targetsInstances,
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(%dx%d, auto=%v, scale_fill=%v, scaleup=%v, center=%v, stride=%d)", op.Size[0], op.Size[1], op.Auto, op.ScaleFill, op.ScaleUp, op.LetterCenter, op.Stride)
		}})
	yolo(opDef{kind: OpYOLORandomPerspective, doc: "ultralytics' RandomPerspective: a random warp into size (w, h; None: the image's), boxes filtered",
		params: []param{{name: "degrees", typ: pFloat, def: "0.0", field: "YDegrees", lo: 0, hi: 360},
			{name: "translate", typ: pFloat, def: "0.1", field: "YTranslate", lo: 0, hi: 1},
			{name: "scale", typ: pFloat, def: "0.5", field: "YScale", lo: 0, hi: 0.99},
			{name: "shear", typ: pFloat, def: "0.0", field: "YShear", lo: 0, hi: 80},
			{name: "perspective", typ: pFloat, def: "0.0", field: "YPersp", lo: 0, hi: 0.01},
			{name: "size", typ: pSize, def: "None", field: "YSize", lo: 1, hi: maxSide}},
		geometry: true, targets: targetsInstances,
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(degrees=%g, translate=%g, scale=%g, shear=%g, perspective=%g, size=%v)", op.YDegrees, op.YTranslate, op.YScale, op.YShear, op.YPersp, op.YSize)
		}})
	yolo(opDef{kind: OpYOLORandomHSV, doc: "ultralytics' RandomHSV: hue, saturation and value by gains drawn in -+(hgain, sgain, vgain)",
		params: []param{{name: "hgain", typ: pFloat, def: "0.5", field: "HGain", lo: 0, hi: 1},
			{name: "sgain", typ: pFloat, def: "0.5", field: "SGain", lo: 0, hi: 1}, {name: "vgain", typ: pFloat, def: "0.5", field: "VGain", lo: 0, hi: 1}},
		targets: targetsPixels, anyFormat: true,
		step: func(*Op) Step { return Step{Fn: FnYOLOHSV} }, // its cost
		compile: func(_ *compiler, n *node, at compileAt) error {
			for _, g := range []float64{n.op.HGain, n.op.SGain, n.op.VGain} {
				if !(g >= 0 && g <= 1) {
					return opError(at.where, "gain %v: want 0..1", g)
				}
			}
			return nil
		},
		draw: func(n *node, r *RNG, d *drawer) {
			op := n.op
			if op.HGain == 0 && op.SGain == 0 && op.VGain == 0 {
				return // ultralytics draws nothing then
			}
			st := Step{Fn: FnYOLOHSV}
			for i, g := range []float64{op.HGain, op.SGain, op.VGain} {
				st.F[i] = float64(r.Uniform(-1, 1) * g) // np.random.uniform(-1, 1, 3) * gains
			}
			d.emit(st)
		},
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(hgain=%g, sgain=%g, vgain=%g)", op.HGain, op.SGain, op.VGain)
		}})
	yolo(opDef{kind: OpYOLORandomFlip, doc: "ultralytics' RandomFlip: flipped with probability p in direction, keypoints reordered by flip_idx",
		params: []param{pParam(0.5), {name: "direction", typ: pString, def: "'horizontal'", field: "Direction"},
			{name: "flip_idx", typ: pInts, def: "None", field: "FlipIdx", lo: 0, hi: 1023}},
		targets: targetsInstances,
		compile: func(_ *compiler, n *node, at compileAt) error {
			if err := checkProb(n.op, at); err != nil {
				return err
			}
			if d := n.op.Direction; d != "horizontal" && d != "vertical" {
				return opError(at.where, "direction %q: want 'horizontal' or 'vertical'", errs.Clip(d, 32))
			}
			if len(n.op.FlipIdx) > 1024 {
				return opError(at.where, "flip_idx of %d keypoints: the limit is 1024", len(n.op.FlipIdx))
			}
			for _, j := range n.op.FlipIdx {
				if j < 0 || j >= len(n.op.FlipIdx) {
					return opError(at.where, "flip_idx %v: want indices below its length", n.op.FlipIdx)
				}
			}
			n.step = Step{Fn: FnYOLOFlipLR, I: [6]int{1: fn.InternFlipIdx(n.op.FlipIdx)}}
			if n.op.Direction == "vertical" {
				n.step.Fn = FnYOLOFlipUD
			}
			return nil
		},
		draw: drawApplied, // random.random() < p
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(p=%g, direction=%s, flip_idx=%v)", op.P, op.Direction, op.FlipIdx)
		}})
}
