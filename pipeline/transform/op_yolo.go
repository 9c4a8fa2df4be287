package transform

// The YOLO family: ultralytics' (8.4.190) single-image training ops, with
// its names prefixed by YOLO so that they never clash with
// torchvision's of the same names (RandomPerspective, RandomFlip):
// YOLOLoadImage (BaseDataset.load_image: the long side to imgsz,
// cv2.INTER_LINEAR), YOLOLetterBox, YOLORandomPerspective, YOLORandomHSV
// and YOLORandomFlip. Their kernels are pipeline/kernels/cv's, exact
// against ultralytics and its OpenCV (RandomHSV within 1). The first
// three are the geometry (below: run on the image at its own size, in
// the decode's canvas path); the last two are steps on the output.
// Labels move as ultralytics' Instances do, in float32 (boxes XYXY).
// The multi-image ops (ultralytics' mosaic and the mixes) are a family of
// their own (op_mosaic.go, op_multi.go, op_multi_targets.go).

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
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

// The family's arguments, each op's own type (optab.Op.Args), with
// ultralytics' names; YOLORandomFlip's p is optab.Op.P, every random
// op's.
type (
	// YOLOLoadImageArgs are YOLOLoadImage's: imgsz.
	YOLOLoadImageArgs struct{ ImgSz int }
	// YOLOLetterBoxArgs are YOLOLetterBox's: new_shape (h, w), auto,
	// scale_fill, scaleup, center and stride.
	YOLOLetterBoxArgs struct {
		NewShape                         [2]int
		Auto, ScaleFill, ScaleUp, Center bool
		Stride                           int
	}
	// YOLOPerspectiveArgs are YOLORandomPerspective's: degrees,
	// translate, scale, shear, perspective and size (w, h; zero: None).
	YOLOPerspectiveArgs struct {
		Degrees, Translate, Scale, Shear, Perspective float64
		Size                                          [2]int
	}
	// YOLOHSVArgs are YOLORandomHSV's gains.
	YOLOHSVArgs struct{ HGain, SGain, VGain float64 }
	// YOLOFlipArgs are YOLORandomFlip's direction and flip_idx.
	YOLOFlipArgs struct {
		Direction string
		FlipIdx   []int
	}
)

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
		Params:   []optab.Param{{Name: "imgsz", Typ: optab.PInt, Def: "640", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOLoadImageArgs](o).ImgSz }, Lo: 1, Hi: optab.MaxSide}},
		Geometry: true, Targets: optab.TargetsInstances,
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(imgsz=%d)", optab.ArgsOf[YOLOLoadImageArgs](op).ImgSz)
		}})
	yolo(optab.Def{Kind: OpYOLOLetterBox, Doc: "ultralytics' LetterBox: resized to fit new_shape (h, w), padded with 114",
		Params: []optab.Param{{Name: "new_shape", Typ: optab.PSize, Def: "(640, 640)", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOLetterBoxArgs](o).NewShape }, Lo: 1, Hi: optab.MaxSide},
			{Name: "auto", Typ: optab.PBool, Def: "False", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOLetterBoxArgs](o).Auto }}, {Name: "scale_fill", Typ: optab.PBool, Def: "False", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOLetterBoxArgs](o).ScaleFill }},
			{Name: "scaleup", Typ: optab.PBool, Def: "True", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOLetterBoxArgs](o).ScaleUp }}, {Name: "center", Typ: optab.PBool, Def: "True", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOLetterBoxArgs](o).Center }},
			{Name: "stride", Typ: optab.PInt, Def: "32", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOLetterBoxArgs](o).Stride }, Lo: 1, Hi: 4096}},
		Geometry: true, Targets: optab.TargetsInstances,
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[YOLOLetterBoxArgs](op)
			fmt.Fprintf(b, "(%dx%d, auto=%v, scale_fill=%v, scaleup=%v, center=%v, stride=%d)", a.NewShape[0], a.NewShape[1], a.Auto, a.ScaleFill, a.ScaleUp, a.Center, a.Stride)
		}})
	yolo(optab.Def{Kind: OpYOLORandomPerspective, Doc: "ultralytics' RandomPerspective: a random warp into size (w, h; None: the image's), boxes filtered",
		Params: []optab.Param{{Name: "degrees", Typ: optab.PFloat, Def: "0.0", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOPerspectiveArgs](o).Degrees }, Lo: 0, Hi: 360},
			{Name: "translate", Typ: optab.PFloat, Def: "0.1", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOPerspectiveArgs](o).Translate }, Lo: 0, Hi: 1},
			{Name: "scale", Typ: optab.PFloat, Def: "0.5", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOPerspectiveArgs](o).Scale }, Lo: 0, Hi: 0.99},
			{Name: "shear", Typ: optab.PFloat, Def: "0.0", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOPerspectiveArgs](o).Shear }, Lo: 0, Hi: 80},
			{Name: "perspective", Typ: optab.PFloat, Def: "0.0", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOPerspectiveArgs](o).Perspective }, Lo: 0, Hi: 0.01},
			{Name: "size", Typ: optab.PSize, Def: "None", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOPerspectiveArgs](o).Size }, Lo: 1, Hi: optab.MaxSide}},
		Geometry: true, Targets: optab.TargetsInstances,
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[YOLOPerspectiveArgs](op)
			fmt.Fprintf(b, "(degrees=%g, translate=%g, scale=%g, shear=%g, perspective=%g, size=%v)", a.Degrees, a.Translate, a.Scale, a.Shear, a.Perspective, a.Size)
		}})
	yolo(optab.Def{Kind: OpYOLORandomHSV, Doc: "ultralytics' RandomHSV: hue, saturation and value by gains drawn in -+(hgain, sgain, vgain)",
		Params: []optab.Param{{Name: "hgain", Typ: optab.PFloat, Def: "0.5", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOHSVArgs](o).HGain }, Lo: 0, Hi: 1},
			{Name: "sgain", Typ: optab.PFloat, Def: "0.5", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOHSVArgs](o).SGain }, Lo: 0, Hi: 1}, {Name: "vgain", Typ: optab.PFloat, Def: "0.5", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOHSVArgs](o).VGain }, Lo: 0, Hi: 1}},
		Targets: optab.TargetsPixels, AnyFormat: true,
		Step: func(*optab.Op) fn.Step { return fn.Step{Fn: fn.YOLOHSV} }, // its cost
		Compile: func(_ *optab.Compiler, n *optab.Node, at optab.CompileAt) error {
			a := optab.ArgsOf[YOLOHSVArgs](n.Op)
			for _, g := range []float64{a.HGain, a.SGain, a.VGain} {
				if !(g >= 0 && g <= 1) {
					return optab.OpError(at.Where, "gain %v: want 0..1", g)
				}
			}
			return nil
		},
		Draw: func(n *optab.Node, r *det.RNG, d *optab.Drawer) {
			a := optab.ArgsOf[YOLOHSVArgs](n.Op)
			if a.HGain == 0 && a.SGain == 0 && a.VGain == 0 {
				return // ultralytics draws nothing then
			}
			st := fn.Step{Fn: fn.YOLOHSV}
			for i, g := range []float64{a.HGain, a.SGain, a.VGain} {
				st.F[i] = float64(r.Uniform(-1, 1) * g) // np.random.uniform(-1, 1, 3) * gains
			}
			d.Emit(st)
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[YOLOHSVArgs](op)
			fmt.Fprintf(b, "(hgain=%g, sgain=%g, vgain=%g)", a.HGain, a.SGain, a.VGain)
		}})
	yolo(optab.Def{Kind: OpYOLORandomFlip, Doc: "ultralytics' RandomFlip: flipped with probability p in direction, keypoints reordered by flip_idx",
		Params: []optab.Param{optab.PParam(0.5), {Name: "direction", Typ: optab.PString, Def: "'horizontal'", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOFlipArgs](o).Direction }},
			{Name: "flip_idx", Typ: optab.PInts, Def: "None", At: func(o *optab.Op) any { return &optab.ArgsAt[YOLOFlipArgs](o).FlipIdx }, Lo: 0, Hi: 1023}},
		Targets: optab.TargetsInstances,
		Compile: func(_ *optab.Compiler, n *optab.Node, at optab.CompileAt) error {
			if err := optab.CheckProb(n.Op, at); err != nil {
				return err
			}
			a := optab.ArgsOf[YOLOFlipArgs](n.Op)
			if d := a.Direction; d != "horizontal" && d != "vertical" {
				return optab.OpError(at.Where, "direction %q: want 'horizontal' or 'vertical'", errs.Clip(d, 32))
			}
			if len(a.FlipIdx) > 1024 {
				return optab.OpError(at.Where, "flip_idx of %d keypoints: the limit is 1024", len(a.FlipIdx))
			}
			for _, j := range a.FlipIdx {
				if j < 0 || j >= len(a.FlipIdx) {
					return optab.OpError(at.Where, "flip_idx %v: want indices below its length", a.FlipIdx)
				}
			}
			n.Step = fn.Step{Fn: fn.YOLOFlipLR, I: [6]int{1: fn.InternFlipIdx(a.FlipIdx)}}
			if a.Direction == "vertical" {
				n.Step.Fn = fn.YOLOFlipUD
			}
			return nil
		},
		Draw: optab.DrawApplied, // random.random() < p
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[YOLOFlipArgs](op)
			fmt.Fprintf(b, "(p=%g, direction=%s, flip_idx=%v)", op.P, a.Direction, a.FlipIdx)
		}})
}

// The YOLO geometry (the first three ops above): YOLOLoadImage, then a
// YOLOLetterBox and/or a YOLORandomPerspective, run in the decode's canvas
// path on the whole image decoded at full scale (as cv2.imread gives it):
// load_image's resize (cv.LoadSize, cv.ResizeLinear), LetterBox
// (cv.LetterBoxImage), RandomPerspective (cv.PerspectiveImage), each
// OpenCV's bytes. Their draws come from the sample's key, a stream each,
// so a sample is the same bytes on any topology.

// yoloGeom is a transform's YOLO geometry: its ops (lb and persp nil
// when absent).
type yoloGeom struct {
	load, lb, Persp *optab.Op
}

// streamYOLOPersp is YOLORandomPerspective's RNG stream: a child of the
// geometry's, as streamZoom, apart from the ops before the geometry's.
const streamYOLOPersp = StreamCrop*64 + 8

// The YOLO geometry's places (placer): YOLOLoadImage first, then a
// YOLOLetterBox and/or a YOLORandomPerspective, each at most once, in that
// order, and no other geometry op after them. Its output size is the
// YOLORandomPerspective's size when given, else the YOLOLetterBox's
// new_shape (auto=False: a fixed size); YOLOLoadImage alone, or with only
// a YOLORandomPerspective without a size, gives each image its own size,
// which is refused. A YOLORandomPerspective right after a mosaic is the
// multi-image family's (mosaicPersp, op_mosaic.go).
func init() {
	definePlacer(OpYOLOLoadImage, placeAt(placeYOLOLoad).followedBy(afterYOLOLoad).needing(yoloNeeds))
	definePlacer(OpYOLOLetterBox, placeAt(placeYOLOLetterBox))
	definePlacer(OpYOLORandomPerspective, placeAt(placeYOLOPersp))
}

// placeYOLOLoad checks a YOLOLoadImage, the geometry's op n: first.
func placeYOLOLoad(t *Transform, op *optab.Op, n int) error {
	if n > 0 {
		return misplaced(op, n)
	}
	if s := optab.ArgsOf[YOLOLoadImageArgs](op).ImgSz; s < 1 || s > optab.MaxSide {
		return transformErr("YOLOLoadImage imgsz %d: want 1..%d", s, optab.MaxSide)
	}
	t.yolo, t.geom = &yoloGeom{load: op}, CropResize
	return nil
}

// yoloOrder is the message for a YOLO geometry op out of its order.
func yoloOrder(op *optab.Op, n int) error {
	return transformErr("op %d (%s): the YOLO geometry is YOLOLoadImage, then YOLOLetterBox, then YOLORandomPerspective, each at most once, in that order", n, op.Kind)
}

// yoloFirst refuses a YOLO geometry op placed with no YOLOLoadImage
// before it.
func yoloFirst(op *optab.Op, n int) error {
	if n > 0 {
		return misplaced(op, n)
	}
	return transformErr("%s first: the YOLO geometry starts with YOLOLoadImage(imgsz) (ultralytics' load_image), then YOLOLetterBox and/or YOLORandomPerspective", op.Kind)
}

// afterYOLOLoad is YOLOLoadImage's rule for the geometry's ops after it:
// the YOLO geometry's own (each placer checks its order).
func afterYOLOLoad(_ *Transform, op *optab.Op, n int) error {
	if op.Kind == OpYOLOLetterBox || op.Kind == OpYOLORandomPerspective {
		return nil
	}
	return transformErr("op %d (%s) after the YOLO geometry is not supported: the YOLO geometry is YOLOLoadImage, then YOLOLetterBox and/or YOLORandomPerspective, and its size is theirs", n, op.Kind)
}

// placeYOLOLetterBox checks a YOLOLetterBox, the geometry's op n: after
// the YOLOLoadImage; its new_shape is the output size.
func placeYOLOLetterBox(t *Transform, op *optab.Op, n int) error {
	g, a := t.yolo, optab.ArgsOf[YOLOLetterBoxArgs](op)
	switch {
	case g == nil:
		return yoloFirst(op, n)
	case g.lb != nil || g.Persp != nil:
		return yoloOrder(op, n)
	case a.Auto:
		return transformErr("YOLOLetterBox auto=True pads to a multiple of stride only, a size of each image's own: use auto=False, which fixes the batch's size")
	case a.NewShape[0] < 1 || a.NewShape[1] < 1 || a.NewShape[0] > optab.MaxSide || a.NewShape[1] > optab.MaxSide || a.Stride < 1:
		return transformErr("YOLOLetterBox new_shape %v, stride %d: want sides in 1..%d and a stride of at least 1", a.NewShape, a.Stride, optab.MaxSide)
	}
	g.lb = op
	t.outH, t.outW = a.NewShape[0], a.NewShape[1]
	return nil
}

// placeYOLOPersp checks a YOLORandomPerspective, the geometry's op n:
// last of the YOLO geometry, or right after a mosaic (mosaicPersp); its
// size, if given, is the output size.
func placeYOLOPersp(t *Transform, op *optab.Op, n int) error {
	g := t.yolo
	switch {
	case t.mosaic != nil:
		return t.mosaicPersp(op, n)
	case g == nil:
		return yoloFirst(op, n)
	case g.Persp != nil:
		return yoloOrder(op, n)
	}
	if err := checkYOLOPersp(op); err != nil {
		return err
	}
	g.Persp = op
	if sz := optab.ArgsOf[YOLOPerspectiveArgs](op).Size; sz != [2]int{} {
		t.outW, t.outH = sz[0], sz[1]
	}
	return nil
}

// yoloNeeds refuses a YOLO geometry that leaves each image its own size.
func yoloNeeds(t *Transform) error {
	if g := t.yolo; g.lb == nil && (g.Persp == nil || optab.ArgsOf[YOLOPerspectiveArgs](g.Persp).Size == [2]int{}) {
		return transformErr("YOLOLoadImage gives each image a size of its own: follow it with YOLOLetterBox (auto=False) or YOLORandomPerspective(size=...), which fix the batch's size")
	}
	return nil
}

// checkYOLOPersp checks a YOLORandomPerspective's arguments.
func checkYOLOPersp(op *optab.Op) error {
	in := func(v, lo, hi float64) bool { return v >= lo && v <= hi }
	a := optab.ArgsOf[YOLOPerspectiveArgs](op)
	if !in(a.Degrees, 0, 360) || !in(a.Translate, 0, 1) || !in(a.Scale, 0, 0.99) || !in(a.Shear, 0, 80) || !in(a.Perspective, 0, 0.01) {
		return fmt.Errorf("%w: transform: YOLORandomPerspective degrees=%v translate=%v scale=%v shear=%v perspective=%v: want degrees 0..360, translate 0..1, scale 0..0.99, shear 0..80, perspective 0..0.01",
			errs.Unsupported, a.Degrees, a.Translate, a.Scale, a.Shear, a.Perspective)
	}
	if s := a.Size; s != [2]int{} && (s[0] < 1 || s[1] < 1 || s[0] > optab.MaxSide || s[1] > optab.MaxSide) {
		return fmt.Errorf("%w: transform: YOLORandomPerspective size %v: want sides in 1..%d", errs.Unsupported, s, optab.MaxSide)
	}
	return nil
}

// yoloPlan plans a YOLO geometry for p's image and key k: the loaded
// size, the letterbox, RandomPerspective's draws in ultralytics' order
// (the perspective terms, the angle, the scale, the two shears, the two
// translations; Python's random.uniform, lo + (hi - lo) * u). A canvas
// plan: the image decoded at its own size, then MakeYOLO.
func (t *Transform) yoloPlan(p *SamplePlan, k det.Key) {
	g := t.yolo
	p.YOLO, p.Canvas = true, true
	p.ZoomW, p.ZoomH = p.SrcW, p.SrcH
	p.CW, p.CH = p.SrcW, p.SrcH
	p.YLW, p.YLH = cv.LoadSize(p.SrcW, p.SrcH, g.ImgSz())
	if g.lb != nil {
		lb := optab.ArgsOf[YOLOLetterBoxArgs](g.lb)
		p.YLBOn = true
		p.YLB = cv.LetterBoxParams(cv.LetterBoxArgs{H: lb.NewShape[0], W: lb.NewShape[1], Auto: lb.Auto, ScaleFill: lb.ScaleFill,
			ScaleUp: lb.ScaleUp, Center: lb.Center, Stride: lb.Stride}, p.YLW, p.YLH)
	}
	if op := g.Persp; op != nil {
		p.YP = DrawYOLOPersp(op, k)
		p.YPOn, p.YPWarp = true, optab.ArgsOf[YOLOPerspectiveArgs](op).Perspective != 0 // ultralytics warps in perspective when its perspective is not 0
	}
}

// DrawYOLOPersp is a YOLORandomPerspective's draw for key k (a mosaic's
// sample draws it too: decode_multi.go).
func DrawYOLOPersp(op *optab.Op, k det.Key) (pp cv.PerspectiveParams) {
	a := optab.ArgsOf[YOLOPerspectiveArgs](op)
	r := k.Stream(streamYOLOPersp)
	u := r.Uniform
	pp.PX, pp.PY = u(-a.Perspective, a.Perspective), u(-a.Perspective, a.Perspective)
	pp.Angle = u(-a.Degrees, a.Degrees)
	pp.Scale = u(1-a.Scale, 1+a.Scale)
	pp.ShearX, pp.ShearY = u(-a.Shear, a.Shear), u(-a.Shear, a.Shear)
	pp.TX, pp.TY = u(0.5-a.Translate, 0.5+a.Translate), u(0.5-a.Translate, 0.5+a.Translate)
	return pp
}

// yoloSteps are the plan's YOLO geometry as functional ops (the trace's,
// and the targets').
func (t *Transform) yoloSteps(p *SamplePlan, buf []fn.Step) []fn.Step {
	buf = append(buf, fn.Step{Fn: fn.YOLOLoad, I: [6]int{4: p.YLH, 5: p.YLW}})
	if p.YLBOn {
		g := p.YLB
		w, h := g.Size()
		buf = append(buf, fn.Step{Fn: fn.YOLOLetterBox, I: [6]int{g.Top, g.Left, g.UnpadH, g.UnpadW, h, w}, F: [6]float64{g.RatioW, g.RatioH}})
	}
	if p.YPOn {
		pp := p.YP
		st := fn.Step{Fn: fn.YOLOPerspective, I: [6]int{4: p.OutH, 5: p.OutW}, F: [6]float64{pp.Angle, pp.Scale, pp.ShearX, pp.ShearY, pp.TX, pp.TY},
			Center: [2]float64{pp.PX, pp.PY}}
		if p.YPWarp {
			st.I[0] = 1
		}
		buf = append(buf, st)
	}
	return buf
}

// The YOLO geometry's kernels' cost, ns an output pixel: pipeline/kernels/cv's
// C (cgo builds; bench/yolo_kernels.py on one core of the 2-core build
// machine, 2026-11-25: 0.77 ms for a 640x427 resize, 1.8-2.0 ms for a
// 640x640 warp), or its scalar Go (3-6 ms and 35-48 ms, loaded); and
// RandomHSV's (FnYOLOHSV's ns, the Go's in its definition): the C's 0.86
// ms a 640x640 image with AVX-512 VBMI, 1.2 ms with AVX2 (3 ns a pixel),
// 3.7 ms in scalar C.
var YOLOResizeNs, YOLOWarpNs float64 = 15, 100

// The C's prices where cgo links it (cv.HaveC).
func init() {
	if cv.HaveC {
		YOLOResizeNs, YOLOWarpNs = 3, 5
	}
}

// ns is the YOLO geometry's cost on a source of srcPx pixels and an
// output of px: the load's resize (of about the output's size), the
// letterbox's copy, the warp's.
func (g *yoloGeom) ns(srcPx, px float64) float64 {
	x := float64(YOLOResizeNs*px) + float64(CanvasNs*srcPx)
	if g.lb != nil {
		x += float64(CanvasNs * px)
	}
	if g.Persp != nil {
		x += float64(YOLOWarpNs * px)
	}
	return x
}

// ImgSz is YOLOLoadImage's imgsz: the long side it loads an image to.
func (g *yoloGeom) ImgSz() int { return optab.ArgsOf[YOLOLoadImageArgs](g.load).ImgSz }

// YOLOScratch is an executor's room for the YOLO geometry's images
// (MakeYOLO), reused from sample to sample.
type YOLOScratch [4][]byte

// planes is slot i as a w x h image.
func (s *YOLOScratch) planes(i, w, h int) kernels.Planes { return scratchPlanes(&s[i], w, h) }

// MakeYOLO makes a YOLO plan's output into dst (p.OutW x p.OutH, in
// layout) from src, the whole image at its own size in layout: loaded
// (cv.ResizeLinear to the loaded size), letterboxed, warped, as the plan
// says, on planes in s. It stops early when stopped says the sample was
// abandoned (the executor's steps then end it).
func (p *SamplePlan) MakeYOLO(dst, src []byte, layout Layout, s *YOLOScratch, stopped func() bool) {
	w, h := p.SrcW, p.SrcH
	cur := kernels.Planes{Pix: src[:3*w*h], W: w, H: h}
	if layout == HWC {
		c := s.planes(0, w, h)
		kernels.HWCToCHW(cur.Pix, c.Pix)
		cur = c
	}
	if p.YLW != w || p.YLH != h {
		c := s.planes(1, p.YLW, p.YLH)
		cv.ResizeLinear(c, cur)
		cur = c
	}
	if stopped() {
		return
	}
	if p.YLBOn {
		gw, gh := p.YLB.Size()
		c := s.planes(2, gw, gh)
		room := s.planes(3, p.YLB.UnpadW, p.YLB.UnpadH)
		cv.LetterBoxImage(c, cur, p.YLB, room.Pix)
		cur = c
	}
	if p.YPOn && !stopped() {
		c := s.planes(3, p.OutW, p.OutH)
		m := cv.PerspectiveMatrix(p.YP, cur.W, cur.H, p.OutW, p.OutH)
		cv.PerspectiveImage(c, cur, m, p.YPWarp)
		cur = c
	}
	out := dst[:3*p.OutW*p.OutH]
	if layout == HWC {
		kernels.CHWToHWC(cur.Pix, out)
		return
	}
	copy(out, cur.Pix)
}
