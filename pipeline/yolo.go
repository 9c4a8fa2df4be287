package pipeline

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

	"github.com/stoker-dev/stoker/pipeline/dataset"

	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// yoloGeom is a transform's YOLO geometry: its ops (lb and persp nil
// when absent).
type yoloGeom struct {
	load, lb, persp *Op
}

// streamYOLOPersp is YOLORandomPerspective's RNG stream: a child of the
// geometry's, as streamZoom, apart from the ops before the geometry's.
const streamYOLOPersp = streamCrop*64 + 8

// yoloGeometry parses t's geometry when it is the YOLO family's and
// returns how many ops it has (0: another geometry). Its output size is
// YOLORandomPerspective's size when given, else YOLOLetterBox's
// new_shape (auto=False: a fixed size); YOLOLoadImage alone, or with
// only a YOLORandomPerspective without a size, gives each image its own
// size, which is refused.
func (t *Transform) yoloGeometry() (int, error) {
	bad := func(format string, a ...any) (int, error) {
		return 0, fmt.Errorf("%w: transform: %s", ErrUnsupported, fmt.Sprintf(format, a...))
	}
	if len(t.ops) == 0 || !yoloKind(t.ops[0].Kind) {
		return 0, nil
	}
	if t.ops[0].Kind != OpYOLOLoadImage {
		return bad("%s first: the YOLO geometry starts with YOLOLoadImage(imgsz) (ultralytics' load_image), then YOLOLetterBox and/or YOLORandomPerspective", t.ops[0].Kind)
	}
	g := &yoloGeom{load: &t.ops[0]}
	if s := g.load.ImgSz; s < 1 || s > maxSide {
		return bad("YOLOLoadImage imgsz %d: want 1..%d", s, maxSide)
	}
	n := 1
	if n < len(t.ops) && t.ops[n].Kind == OpYOLOLetterBox {
		op := &t.ops[n]
		if op.Auto {
			return bad("YOLOLetterBox auto=True pads to a multiple of stride only, a size of each image's own: use auto=False, which fixes the batch's size")
		}
		if op.Size[0] < 1 || op.Size[1] < 1 || op.Size[0] > maxSide || op.Size[1] > maxSide || op.Stride < 1 {
			return bad("YOLOLetterBox new_shape %v, stride %d: want sides in 1..%d and a stride of at least 1", op.Size, op.Stride, maxSide)
		}
		g.lb, n = op, n+1
		t.outH, t.outW = op.Size[0], op.Size[1]
	}
	if n < len(t.ops) && t.ops[n].Kind == OpYOLORandomPerspective {
		op := &t.ops[n]
		if err := checkYOLOPersp(op); err != nil {
			return 0, err
		}
		g.persp, n = op, n+1
		if op.YSize != [2]int{} {
			t.outW, t.outH = op.YSize[0], op.YSize[1]
		}
	}
	if n < len(t.ops) && yoloKind(t.ops[n].Kind) {
		return bad("op %d (%s): the YOLO geometry is YOLOLoadImage, then YOLOLetterBox, then YOLORandomPerspective, each at most once, in that order", n, t.ops[n].Kind)
	}
	if g.lb == nil && (g.persp == nil || g.persp.YSize == [2]int{}) {
		return bad("YOLOLoadImage gives each image a size of its own: follow it with YOLOLetterBox (auto=False) or YOLORandomPerspective(size=...), which fix the batch's size")
	}
	t.yolo, t.geom = g, cropResize
	return n, nil
}

// checkYOLOPersp checks a YOLORandomPerspective's arguments.
func checkYOLOPersp(op *Op) error {
	in := func(v, lo, hi float64) bool { return v >= lo && v <= hi }
	if !in(op.YDegrees, 0, 360) || !in(op.YTranslate, 0, 1) || !in(op.YScale, 0, 0.99) || !in(op.YShear, 0, 80) || !in(op.YPersp, 0, 0.01) {
		return fmt.Errorf("%w: transform: YOLORandomPerspective degrees=%v translate=%v scale=%v shear=%v perspective=%v: want degrees 0..360, translate 0..1, scale 0..0.99, shear 0..80, perspective 0..0.01",
			ErrUnsupported, op.YDegrees, op.YTranslate, op.YScale, op.YShear, op.YPersp)
	}
	if s := op.YSize; s != [2]int{} && (s[0] < 1 || s[1] < 1 || s[0] > maxSide || s[1] > maxSide) {
		return fmt.Errorf("%w: transform: YOLORandomPerspective size %v: want sides in 1..%d", ErrUnsupported, s, maxSide)
	}
	return nil
}

// yoloPlan plans a YOLO geometry for p's image and key k: the loaded
// size, the letterbox, RandomPerspective's draws in ultralytics' order
// (the perspective terms, the angle, the scale, the two shears, the two
// translations; Python's random.uniform, lo + (hi - lo) * u). A canvas
// plan: the image decoded at its own size, then yoloCanvas.
func (t *Transform) yoloPlan(p *samplePlan, k Key) {
	g := t.yolo
	p.yolo, p.canvas = true, true
	p.zoomW, p.zoomH = p.srcW, p.srcH
	p.cw, p.ch = p.srcW, p.srcH
	p.ylw, p.ylh = cv.LoadSize(p.srcW, p.srcH, g.load.ImgSz)
	if lb := g.lb; lb != nil {
		p.ylbOn = true
		p.ylb = cv.LetterBoxParams(cv.LetterBoxArgs{H: lb.Size[0], W: lb.Size[1], Auto: lb.Auto, ScaleFill: lb.ScaleFill,
			ScaleUp: lb.ScaleUp, Center: lb.LetterCenter, Stride: lb.Stride}, p.ylw, p.ylh)
	}
	if op := g.persp; op != nil {
		p.yp = drawYOLOPersp(op, k)
		p.ypOn, p.ypWarp = true, op.YPersp != 0 // ultralytics warps in perspective when its perspective is not 0
	}
}

// drawYOLOPersp is a YOLORandomPerspective's draw for key k (a Mosaic's
// sample draws it too: decode_multi.go).
func drawYOLOPersp(op *Op, k Key) (pp cv.PerspectiveParams) {
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
func (t *Transform) yoloSteps(p *samplePlan, buf []Step) []Step {
	buf = append(buf, Step{Fn: FnYOLOLoad, I: [6]int{4: p.ylh, 5: p.ylw}})
	if p.ylbOn {
		g := p.ylb
		w, h := g.Size()
		buf = append(buf, Step{Fn: FnYOLOLetterBox, I: [6]int{g.Top, g.Left, g.UnpadH, g.UnpadW, h, w}, F: [6]float64{g.RatioW, g.RatioH}})
	}
	if p.ypOn {
		pp := p.yp
		st := Step{Fn: FnYOLOPerspective, I: [6]int{4: p.outH, 5: p.outW}, F: [6]float64{pp.Angle, pp.Scale, pp.ShearX, pp.ShearY, pp.TX, pp.TY},
			Center: [2]float64{pp.PX, pp.PY}}
		if p.ypWarp {
			st.I[0] = 1
		}
		buf = append(buf, st)
	}
	return buf
}

// sourceTargets sets t to ds's sample i as the plan p starts from, and
// returns the canvas they are on: the source image's, but for a YOLO
// geometry on a dataset of ultralytics' labels, the loaded image's, with
// its arithmetic (the load's step then leaves them, a ratio of 1).
func sourceTargets(ds Targeted, i int, p *samplePlan, t *Instances) (int, int, error) {
	if u, ok := ds.(dataset.UltralyticsTargeted); ok && p.yolo && !t.WantMasks {
		return p.ylw, p.ylh, u.UltralyticsTargets(i, p.ylw, p.ylh, t)
	}
	return p.srcW, p.srcH, ds.SourceTargets(i, p.srcW, p.srcH, t)
}

// yoloScratch is a Decoder's room for the YOLO geometry's images.
type yoloScratch [4][]byte

// planes is slot i as a w x h image.
func (s *yoloScratch) planes(i, w, h int) kernels.Planes {
	if cap(s[i]) < 3*w*h {
		s[i] = make([]byte, 3*w*h)
	}
	return kernels.Planes{Pix: s[i][:3*w*h], W: w, H: h}
}

// yoloCanvas makes a YOLO plan's output into dst (p.outW x p.outH, in
// layout) from src, the whole image at its own size in layout: loaded
// (cv.ResizeLinear to the loaded size), letterboxed, warped, as the plan
// says, on planes.
func (d *Decoder) yoloCanvas(dst []byte, p *samplePlan, src []byte, layout Layout) {
	s := &d.yoloRoom
	w, h := p.srcW, p.srcH
	cur := kernels.Planes{Pix: src[:3*w*h], W: w, H: h}
	if layout == HWC {
		c := s.planes(0, w, h)
		hwcToCHW(cur.Pix, c.Pix)
		cur = c
	}
	if p.ylw != w || p.ylh != h {
		c := s.planes(1, p.ylw, p.ylh)
		cv.ResizeLinear(c, cur)
		cur = c
	}
	if d.ops.Stopped() {
		return // abandoned: the steps' loop ends the sample
	}
	if p.ylbOn {
		gw, gh := p.ylb.Size()
		c := s.planes(2, gw, gh)
		room := s.planes(3, p.ylb.UnpadW, p.ylb.UnpadH)
		cv.LetterBoxImage(c, cur, p.ylb, room.Pix)
		cur = c
	}
	if p.ypOn && !d.ops.Stopped() {
		c := s.planes(3, p.outW, p.outH)
		m := cv.PerspectiveMatrix(p.yp, cur.W, cur.H, p.outW, p.outH)
		cv.PerspectiveImage(c, cur, m, p.ypWarp)
		cur = c
	}
	out := dst[:3*p.outW*p.outH]
	if layout == HWC {
		chwToHWC(cur.Pix, out)
		return
	}
	copy(out, cur.Pix)
}

// hwcToCHW unpacks interleaved pixels into three planes.
func hwcToCHW(hwc, chw []byte) {
	n := len(chw) / 3
	for i := range n {
		chw[i], chw[n+i], chw[2*n+i] = hwc[3*i], hwc[3*i+1], hwc[3*i+2]
	}
}

// The YOLO geometry's kernels' cost, ns an output pixel: pipeline/kernels/cv's
// C (cgo builds; bench/yolo_kernels.py on one core of the 2-core build
// machine, 2026-11-25: 0.77 ms for a 640x427 resize, 1.8-2.0 ms for a
// 640x640 warp), or its scalar Go (3-6 ms and 35-48 ms, loaded); and
// RandomHSV's (FnYOLOHSV's ns, the Go's in its definition): the C's 0.86
// ms a 640x640 image with AVX-512 VBMI, 1.2 ms with AVX2 (3 ns a pixel),
// 3.7 ms in scalar C.
var yoloResizeNs, yoloWarpNs float64 = 15, 100

func init() {
	if haveFast {
		yoloResizeNs, yoloWarpNs = 3, 5
		FnYOLOHSV.Def().Ns = 3
	}
}

// ns is the YOLO geometry's cost on a source of srcPx pixels and an
// output of px: the load's resize (of about the output's size), the
// letterbox's copy, the warp's.
func (g *yoloGeom) ns(srcPx, px float64) float64 {
	x := float64(yoloResizeNs*px) + float64(canvasNs*srcPx)
	if g.lb != nil {
		x += float64(canvasNs * px)
	}
	if g.persp != nil {
		x += float64(yoloWarpNs * px)
	}
	return x
}

// A mosaic's targets (YOLOMosaic, then its YOLORandomPerspective and
// YOLOMixUp, decode_multi.go): the labels of each of its images as
// ultralytics' Instances holds them (boxes XYXY in pixels of the image's
// load_image size, a segment dataset's polygons resampled to 1000 points
// and keypoints (x, y, visibility) likewise), moved as ultralytics 8.4.190
// moves them: Mosaic._update_labels (add_padding of the tile's padw, padh
// to boxes, segments and keypoints alike), _cat_labels (concatenated,
// segments of unequal lengths resampled to the longest, Instances.clip to
// the 2*imgsz canvas: a keypoint outside it gets visibility 0, then is
// clipped; remove_zero_area_boxes drops an instance with its segment and
// keypoints), RandomPerspective.apply_instances (segments through M, each
// box their segment2box and the segment clipped to it; the keypoints
// through M, those leaving the output made invisible, clipped;
// box_candidates, of area ratio 0.01 with segments, drops the instance
// whole), MixUp.apply_instances (the partner's after the sample's), then
// the steps after the geometry (RandomFlip with its flip_idx, ...). Masks
// are refused.

// appendMosaicTargets is appendTargets for a sample the last decode made
// as a mosaic (md): its mosaic's instances (mosaicInstances), then its
// MixUp partner's after them (MixUp.apply_instances), then moved by the
// steps after the geometry.
func (d *Decoder) appendMosaicTargets(b []byte, t *Transform, ds Targeted, fs *FieldSet, md *multiDraw) ([]byte, error) {
	if fs.Masks() {
		return b, fmt.Errorf("%w: masks do not follow YOLOMosaic yet", ErrUnsupported)
	}
	all, p, err := d.multiInstances(ds, md)
	if err == nil && md.cutOK {
		all, err = d.cutmixTargets(ds, md, all, p)
	}
	if err != nil {
		return b, err
	}
	tg := &d.targets
	tg.Reset()
	tg.ImageID = int64(md.mo.idx[0])
	tg.P = p
	if err := setMosaicTargets(&tg.Instances, &all); err != nil {
		return b, err
	}
	w, h, err := MoveTargets(tg, t.outW, t.outH, d.vd[0].steps)
	if err != nil {
		return b, err
	}
	tg.W, tg.H = w, h
	if tg.WantOverlap = fs.OverlapMask(); tg.WantOverlap {
		return tg.AppendOverlap(b, fs.MaskRatio(), fs.MaskOverlap(), fs.TargetsMax())
	}
	return AppendTargets(b, tg), nil
}

// multiInstances is a mosaic's instances after the ops of its
// pre_transform (its CopyPaste, its warp) and its MixUp (the partner's,
// made the same way, after them), and the keypoints an instance.
func (d *Decoder) multiInstances(ds Targeted, md *multiDraw) (cv.Instances, int, error) {
	all, p, err := d.preMixInstances(ds, &md.mo, &md.pp, &md.cpm, md)
	if err != nil || !md.mix {
		return all, p, err
	}
	two, p2, err := d.preMixInstances(ds, &md.mixM, &md.mixPP, &md.mixCPM, md)
	if err != nil {
		return all, p, fmt.Errorf("mixup partner (sample %d): %w", md.mixM.idx[0], err)
	}
	if p2 != p {
		return all, p, fmt.Errorf("%w: mixup partner (sample %d) has %d keypoints an instance, the sample %d", ErrUnsupported, md.mixM.idx[0], p2, p)
	}
	if cv.MixedSegments(all, two) {
		return all, p, errMixedSegments(append(append([]int{}, md.mo.idx...), md.mixM.idx...))
	}
	return cv.Concat(all, two), p, nil
}

// preInstances is one pre_transform's instances: its mosaic's (mo),
// pasted, warped (pp).
func (d *Decoder) preInstances(ds Targeted, mo *mosaicDraw, pp *cv.PerspectiveParams, md *multiDraw) (cv.Instances, int, error) {
	in, p, err := d.mosaicInstances(ds, mo)
	if err == nil {
		in, err = copyPasteInstances(in, mo)
	}
	if err != nil {
		return in, p, err
	}
	return md.perspInstances(in, pp), p, nil
}

// copyPasteInstances is a mosaic's instances after the CopyPaste that
// followed it, if any (CopyPaste.apply_instances: the pasted copies
// after them; the same selection its decode made, of the same labels).
func copyPasteInstances(in cv.Instances, mo *mosaicDraw) (cv.Instances, error) {
	if !mo.cp {
		return in, nil
	}
	flipped, sel, err := copyPasteSelect(in, mo, mo.cpP)
	if err != nil {
		return in, err
	}
	if len(sel) != mo.pasted {
		return in, fmt.Errorf("targets: YOLOCopyPaste pasted %d copies, its labels select %d", mo.pasted, len(sel))
	}
	return cv.CopyPasteInstances(in, flipped, sel), nil
}

// setMosaicTargets appends in's instances to t (reset, its P set): boxes
// and classes, segments where it has them, and with P, each instance's P
// keypoints and their visibilities (ultralytics' float visibility, 0, 1
// or 2, as COCO's v).
func setMosaicTargets(t *dataset.Instances, in *cv.Instances) error {
	if t.P > 0 && len(in.Keypoints) != len(in.Boxes) {
		return fmt.Errorf("targets: a mosaic of %d instances with %d keypoint sets", len(in.Boxes), len(in.Keypoints))
	}
	if len(in.Segments) > 0 {
		if len(in.Segments) != len(in.Boxes) {
			return fmt.Errorf("targets: a mosaic of %d instances with %d segments", len(in.Boxes), len(in.Segments))
		}
		t.Segments = append(t.Segments, in.Segments...)
	}
	for q := range in.Boxes {
		t.Add(in.Boxes[q], in.Cls[q], false)
		if t.P == 0 {
			continue
		}
		kp := in.Keypoints[q]
		if len(kp) != t.P {
			return fmt.Errorf("targets: a mosaic instance of %d keypoints, the dataset's have %d", len(kp), t.P)
		}
		for _, k := range kp {
			t.Points = append(t.Points, [2]float32{k[0], k[1]})
			t.Vis = append(t.Vis, uint8(k[2]))
		}
	}
	return nil
}

// perspInstances is a mosaic's instances through the
// YOLORandomPerspective after it, if any (its draw pp):
// RandomPerspective.apply_instances.
func (md *multiDraw) perspInstances(in cv.Instances, pp *cv.PerspectiveParams) cv.Instances {
	if !md.persp {
		return in
	}
	s := cv.MosaicSize(md.mo.imgsz)
	return cv.PerspectiveInstances(in, cv.PerspectiveMatrix(*pp, s, s, md.w, md.h), pp.Scale, md.warp, md.w, md.h)
}

// mosaicInstances is one mosaic's instances and the keypoints an
// instance (0: none): each image's in pixels of its load_image size (a
// YOLO dataset's from its normalized labels with ultralytics' arithmetic,
// UltralyticsTargets, another's its SourceTargets at that size), moved by
// its tile, concatenated, clipped and the empty dropped
// (cv.MosaicInstances).
func (d *Decoder) mosaicInstances(ds Targeted, m *mosaicDraw) (cv.Instances, int, error) {
	ms := &d.multi
	ms.ins = ms.ins[:0]
	tg := &d.targets
	p := -1
	for j, i := range m.idx {
		w, h := m.sizes[j][0], m.sizes[j][1]
		tg.Reset()
		tg.WantMasks = false
		var err error
		if u, ok := ds.(dataset.UltralyticsTargeted); ok {
			err = u.UltralyticsTargets(i, w, h, &tg.Instances)
		} else {
			err = ds.SourceTargets(i, w, h, &tg.Instances)
		}
		if err != nil {
			return cv.Instances{}, 0, partnerErr(j, m, err)
		}
		if p >= 0 && tg.P != p {
			return cv.Instances{}, 0, partnerErr(j, m, fmt.Errorf("%w: %d keypoints an instance, the mosaic's first image %d", ErrUnsupported, tg.P, p))
		}
		p = tg.P
		ms.ins = append(ms.ins, cvMosaicInstances(&tg.Instances))
	}
	if cv.MixedSegments(ms.ins...) {
		return cv.Instances{}, 0, errMixedSegments(m.idx)
	}
	return cv.MosaicInstances(ms.ins, m.tiles, m.imgsz), max(p, 0), nil
}

// cvMosaicInstances is t as ultralytics' Instances (cv.Instances): its
// boxes, labels, segments and, with keypoints, each instance's (x, y,
// visibility);
// a copy, t being the Decoder's scratch.
func cvMosaicInstances(t *dataset.Instances) cv.Instances {
	in := cv.Instances{Boxes: append([][4]float32{}, t.Boxes...), Cls: append([]int64{}, t.Labels...)}
	if len(t.Segments) > 0 {
		// The segments are the dataset's fresh ones (UltralyticsTargets
		// makes them for each call): no copy.
		in.Segments = append([][][2]float32{}, t.Segments...)
	}
	if t.P == 0 {
		return in
	}
	in.Keypoints = make([][][3]float32, len(t.Boxes))
	for k := range in.Keypoints {
		kp := make([][3]float32, t.P)
		for j := range kp {
			q := k*t.P + j
			kp[j] = [3]float32{t.Points[q][0], t.Points[q][1], float32(t.Vis[q])}
		}
		in.Keypoints[k] = kp
	}
	return in
}

// errMixedSegments refuses a mosaic (of the images idx) of segment lines
// and box lines: ultralytics' Instances.concatenate pairs the segments it
// has with the wrong boxes then (and its segment task refuses such a
// dataset).
func errMixedSegments(idx []int) error {
	return fmt.Errorf("%w: a mosaic of samples %v mixes label files of polygons with label files of boxes alone: give every image of a segment dataset polygons", ErrUnsupported, idx)
}

// partnerErr names the mosaic's image j in err (0: the sample's own).
func partnerErr(j int, m *mosaicDraw, err error) error {
	if j == 0 {
		return err
	}
	return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, m.n-1, m.idx[j], err)
}
