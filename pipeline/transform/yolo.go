package transform

// The YOLO geometry (op_yolo.go's ops): YOLOLoadImage, then a
// YOLOLetterBox and/or a YOLORandomPerspective, run in the decode's canvas
// path on the whole image decoded at full scale (as cv2.imread gives it):
// load_image's resize (cv.LoadSize, cv.ResizeLinear), LetterBox
// (cv.LetterBoxImage), RandomPerspective (cv.PerspectiveImage), each
// OpenCV's bytes. Their draws come from the sample's key, a stream each,
// so a sample is the same bytes on any topology. Also a Mosaic's targets
// (its labels and keypoints as ultralytics' Instances moves them), at
// the end.

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/det"
	"github.com/stoker-dev/stoker/pipeline/internal/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// yoloGeom is a transform's YOLO geometry: its ops (lb and persp nil
// when absent).
type yoloGeom struct {
	load, lb, Persp *optab.Op
}

// streamYOLOPersp is YOLORandomPerspective's RNG stream: a child of the
// geometry's, as streamZoom, apart from the ops before the geometry's.
const streamYOLOPersp = StreamCrop*64 + 8

// yoloGeometry parses t's geometry when it is the YOLO family's and
// returns how many ops it has (0: another geometry). Its output size is
// YOLORandomPerspective's size when given, else YOLOLetterBox's
// new_shape (auto=False: a fixed size); YOLOLoadImage alone, or with
// only a YOLORandomPerspective without a size, gives each image its own
// size, which is refused.
func (t *Transform) yoloGeometry() (int, error) {
	bad := func(format string, a ...any) (int, error) {
		return 0, fmt.Errorf("%w: transform: %s", errs.Unsupported, fmt.Sprintf(format, a...))
	}
	if len(t.ops) == 0 || !yoloKind(t.ops[0].Kind) {
		return 0, nil
	}
	if t.ops[0].Kind != OpYOLOLoadImage {
		return bad("%s first: the YOLO geometry starts with YOLOLoadImage(imgsz) (ultralytics' load_image), then YOLOLetterBox and/or YOLORandomPerspective", t.ops[0].Kind)
	}
	g := &yoloGeom{load: &t.ops[0]}
	if s := g.load.ImgSz; s < 1 || s > optab.MaxSide {
		return bad("YOLOLoadImage imgsz %d: want 1..%d", s, optab.MaxSide)
	}
	n := 1
	if n < len(t.ops) && t.ops[n].Kind == OpYOLOLetterBox {
		op := &t.ops[n]
		if op.Auto {
			return bad("YOLOLetterBox auto=True pads to a multiple of stride only, a size of each image's own: use auto=False, which fixes the batch's size")
		}
		if op.Size[0] < 1 || op.Size[1] < 1 || op.Size[0] > optab.MaxSide || op.Size[1] > optab.MaxSide || op.Stride < 1 {
			return bad("YOLOLetterBox new_shape %v, stride %d: want sides in 1..%d and a stride of at least 1", op.Size, op.Stride, optab.MaxSide)
		}
		g.lb, n = op, n+1
		t.outH, t.outW = op.Size[0], op.Size[1]
	}
	if n < len(t.ops) && t.ops[n].Kind == OpYOLORandomPerspective {
		op := &t.ops[n]
		if err := checkYOLOPersp(op); err != nil {
			return 0, err
		}
		g.Persp, n = op, n+1
		if op.YSize != [2]int{} {
			t.outW, t.outH = op.YSize[0], op.YSize[1]
		}
	}
	if n < len(t.ops) && yoloKind(t.ops[n].Kind) {
		return bad("op %d (%s): the YOLO geometry is YOLOLoadImage, then YOLOLetterBox, then YOLORandomPerspective, each at most once, in that order", n, t.ops[n].Kind)
	}
	if g.lb == nil && (g.Persp == nil || g.Persp.YSize == [2]int{}) {
		return bad("YOLOLoadImage gives each image a size of its own: follow it with YOLOLetterBox (auto=False) or YOLORandomPerspective(size=...), which fix the batch's size")
	}
	t.yolo, t.geom = g, CropResize
	return n, nil
}

// checkYOLOPersp checks a YOLORandomPerspective's arguments.
func checkYOLOPersp(op *optab.Op) error {
	in := func(v, lo, hi float64) bool { return v >= lo && v <= hi }
	if !in(op.YDegrees, 0, 360) || !in(op.YTranslate, 0, 1) || !in(op.YScale, 0, 0.99) || !in(op.YShear, 0, 80) || !in(op.YPersp, 0, 0.01) {
		return fmt.Errorf("%w: transform: YOLORandomPerspective degrees=%v translate=%v scale=%v shear=%v perspective=%v: want degrees 0..360, translate 0..1, scale 0..0.99, shear 0..80, perspective 0..0.01",
			errs.Unsupported, op.YDegrees, op.YTranslate, op.YScale, op.YShear, op.YPersp)
	}
	if s := op.YSize; s != [2]int{} && (s[0] < 1 || s[1] < 1 || s[0] > optab.MaxSide || s[1] > optab.MaxSide) {
		return fmt.Errorf("%w: transform: YOLORandomPerspective size %v: want sides in 1..%d", errs.Unsupported, s, optab.MaxSide)
	}
	return nil
}

// yoloPlan plans a YOLO geometry for p's image and key k: the loaded
// size, the letterbox, RandomPerspective's draws in ultralytics' order
// (the perspective terms, the angle, the scale, the two shears, the two
// translations; Python's random.uniform, lo + (hi - lo) * u). A canvas
// plan: the image decoded at its own size, then yoloCanvas.
func (t *Transform) yoloPlan(p *SamplePlan, k det.Key) {
	g := t.yolo
	p.YOLO, p.Canvas = true, true
	p.ZoomW, p.ZoomH = p.SrcW, p.SrcH
	p.CW, p.CH = p.SrcW, p.SrcH
	p.YLW, p.YLH = cv.LoadSize(p.SrcW, p.SrcH, g.load.ImgSz)
	if lb := g.lb; lb != nil {
		p.YLBOn = true
		p.YLB = cv.LetterBoxParams(cv.LetterBoxArgs{H: lb.Size[0], W: lb.Size[1], Auto: lb.Auto, ScaleFill: lb.ScaleFill,
			ScaleUp: lb.ScaleUp, Center: lb.LetterCenter, Stride: lb.Stride}, p.YLW, p.YLH)
	}
	if op := g.Persp; op != nil {
		p.YP = DrawYOLOPersp(op, k)
		p.YPOn, p.YPWarp = true, op.YPersp != 0 // ultralytics warps in perspective when its perspective is not 0
	}
}

// DrawYOLOPersp is a YOLORandomPerspective's draw for key k (a Mosaic's
// sample draws it too: decode_multi.go).
func DrawYOLOPersp(op *optab.Op, k det.Key) (pp cv.PerspectiveParams) {
	r := k.Stream(streamYOLOPersp)
	u := r.Uniform
	pp.PX, pp.PY = u(-op.YPersp, op.YPersp), u(-op.YPersp, op.YPersp)
	pp.Angle = u(-op.YDegrees, op.YDegrees)
	pp.Scale = u(1-op.YScale, 1+op.YScale)
	pp.ShearX, pp.ShearY = u(-op.YShear, op.YShear), u(-op.YShear, op.YShear)
	pp.TX, pp.TY = u(0.5-op.YTranslate, 0.5+op.YTranslate), u(0.5-op.YTranslate, 0.5+op.YTranslate)
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

// PerspInstances is a mosaic's instances through the
// YOLORandomPerspective after it, if any (its draw pp):
// RandomPerspective.apply_instances.
func (md *MultiDraw) PerspInstances(in cv.Instances, pp *cv.PerspectiveParams) cv.Instances {
	if !md.Persp {
		return in
	}
	s := cv.MosaicSize(md.Mo.Imgsz)
	return cv.PerspectiveInstances(in, cv.PerspectiveMatrix(*pp, s, s, md.W, md.H), pp.Scale, md.Warp, md.W, md.H)
}

// PartnersOf is the partner indices of the sample of key k in a dataset
// of size samples for t (nil when t has no multi-image op at k's epoch),
// in the order its decode takes them (multiPartners): what a caller of
// Decode reads and hands to SetPartners.
func (t *Transform) PartnersOf(k det.Key, size int) []int {
	return t.MultiPartners(k, size, nil)
}

// ImgSz is YOLOLoadImage's imgsz: the long side it loads an image to.
func (g *yoloGeom) ImgSz() int { return g.load.ImgSz }
