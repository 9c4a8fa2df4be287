package transform

// The detection recipes' geometry (RandomZoomOut, RandomIoUCrop and the
// flip before their Resize): their draws, and the canvas a zoom or a flip
// before the resize makes, resized in Go. Floating point as in plan.go:
// every product that is added is rounded first.

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// maxPre bounds the ops before the geometry.
const maxPre = 4

// streamPre is the RNG stream of op i before the geometry: stream + i,
// children of the geometry's stream, as streamZoom.
const streamPre = StreamCrop*64 + 3

// leadingPre counts the RandomPhotometricDistorts that ops start with,
// and before a resize of the whole image (a vision-language resize:
// SmartResize, NaFlexResize...; Resize((h, w)); PadToSquare, whose
// Resize follows) the ColorJitters too: the image at its own size
// jittered, as a trainer's torchvision ColorJitter before the processor
// (or before its Resize) jitters it.
func leadingPre(ops []optab.Op) int {
	n := 0
	for n < len(ops) && ops[n].Kind == optab.OpRandomPhotometricDistort {
		n++
	}
	m := n
	for m < len(ops) && (ops[m].Kind == optab.OpColorJitter || ops[m].Kind == optab.OpRandomPhotometricDistort) {
		m++
	}
	if m > n && m < len(ops) && wholeResize(&ops[m]) {
		return m
	}
	return n
}

// wholeResize reports whether op resizes the whole image (or pads it to
// a square first): a ColorJitter before it runs on the image itself.
func wholeResize(op *optab.Op) bool {
	return selfSized(op) || op.Kind == OpResize && op.Size[1] > 0 || op.Kind == OpPadToSquare
}

// compilePre compiles t's ops from up to pre (RandomPhotometricDistort,
// ColorJitter: ops on pixels alone, whose draws do not depend on the
// image's size; from is 1 after a crop before them, cropBefore), which run
// on the image decoded at its own size before the geometry: every sample
// then takes the canvas path, which needs a geometry that ends in
// Resize((h, w)) (after a RandomZoomOut or a RandomIoUCrop, if any).
func (t *Transform) compilePre(from, pre int) error {
	if pre-from > maxPre {
		return transformErr("%d ops before the geometry: the limit is %d", pre-from, maxPre)
	}
	bounded := t.iou != nil && t.resize == nil && t.vary // a RandomIoUCrop's own size, under the job's bound
	vlm := t.resize != nil && selfSized(t.resize)        // the whole image resized to its own size: the canvas resized
	if !bounded && !vlm && (t.resize == nil || t.resize.Size[1] == 0) || t.center != nil || t.rrc != nil || t.rcrop != nil || t.pad != nil || t.padAfter != nil {
		return transformErr("op %d (%s) before the geometry needs a geometry that ends in Resize((h, w)) (after a RandomZoomOut or a RandomIoUCrop, if any), "+
			"or a RandomIoUCrop under a bound on the sizes (max_size=(h, w)); move it after the geometry", from, t.ops[from].Kind)
	}
	c := optab.Compiler{W: t.outW, H: t.outH}
	for i := from; i < pre; i++ {
		nd, err := c.Compile(&t.ops[i], i, streamPre+uint64(i), 0)
		if err != nil {
			return err
		}
		t.pre = append(t.pre, nd)
		t.maxPre += nd.MaxSteps
	}
	return nil
}

// drawPre appends the steps of t's ops before the geometry for key k.
func (t *Transform) drawPre(k det.Key, buf []fn.Step) []fn.Step {
	return t.drawPreInto(new(optab.Drawer), k, buf)
}

// drawPreInto is drawPre with the caller's drawer d, reused.
func (t *Transform) drawPreInto(d *optab.Drawer, k det.Key, buf []fn.Step) []fn.Step {
	*d = optab.Drawer{K: k, Steps: buf}
	for i := range t.pre {
		t.pre[i].Draw(d)
	}
	steps := d.Steps
	d.Steps = nil
	return steps
}

// streamZoom is RandomZoomOut's RNG stream: a child of the geometry's
// stream as a container's children are (stream*64 + 1 + i), which no op
// uses (the geometry is no container), so that the crop after it keeps
// stream 1's numbers.
const streamZoom = StreamCrop*64 + 1

// drawZoomOut is torchvision's RandomZoomOut on a w x h image: with
// probability p (a draw >= p leaves the image), r uniform in side_range
// and the canvas int(side * r) a side, the image at (int((canvas_w - w) *
// u), int((canvas_h - h) * v)). Drawn in float32 from 24-bit uniforms, as
// torch.rand draws float32s and multiplies a Python number with them in
// float32.
func drawZoomOut(op *optab.Op, w, h int, k det.Key) (cw, ch int, pad [4]int, zoomed bool) {
	r := k.Stream(streamZoom)
	u := r.Float32
	if float64(u()) >= op.P {
		return 0, 0, pad, false
	}
	sr := optab.ArgsOf[ZoomOutArgs](op).SideRange
	lo, hi := sr[0], sr[1]
	s := float32(lo) + float32(u()*float32(hi-lo))
	cw, ch = int(float32(w)*s), int(float32(h)*s)
	left, top := int(float32(cw-w)*u()), int(float32(ch-h)*u())
	return cw, ch, [4]int{left, top, cw - (left + w), ch - (top + h)}, true
}

// zoomOutBound is RandomZoomOut's largest canvas of a w x h image:
// side_range's maximum of each side, rounded up and a pixel over (the
// side drawn in float32).
func zoomOutBound(op *optab.Op, w, h int) (cw, ch int64) {
	s := optab.ArgsOf[ZoomOutArgs](op).SideRange[1]
	return int64(math.Ceil(s*float64(w))) + 1, int64(math.Ceil(s*float64(h))) + 1
}

// zoomOutCost is RandomZoomOut's chance, its canvas's mean cost (r
// uniform in side_range: the mean over a grid) and its largest scale.
func zoomOutCost(op *optab.Op, at func(r float64) float64) (pz, mean, hi float64) {
	sr := optab.ArgsOf[ZoomOutArgs](op).SideRange
	lo := sr[0]
	pz, hi = op.P, sr[1]
	const grid = 64
	for i := range grid {
		mean += at(lo + float64((hi-lo)*(float64(i)+0.5)/grid))
	}
	return pz, mean / grid, hi
}

// A canvas is a canvas op's rule (t.zoom: a RandomZoomOut, op_geometry.go;
// a PadToSquare, op_anyres.go), said beside its Def (defineCanvas): draw
// is the canvas (cw x ch, the image's padding on it) of a w x h image for
// key k, zoomed false where there is none; bound is the largest canvas of
// a w x h image; cost is its chance pz, the mean cost of its canvas and
// its largest scale hi, given at(r), the cost of a canvas r times the
// source a side (the mean pixel cost, cost.go).
type canvas struct {
	draw  func(op *optab.Op, w, h int, k det.Key) (cw, ch int, pad [4]int, zoomed bool)
	bound func(op *optab.Op, w, h int) (cw, ch int64)
	cost  func(op *optab.Op, at func(r float64) float64) (pz, mean, hi float64)
}

// canvases are the canvas ops' rules, by kind (defineCanvas).
var canvases = map[optab.OpKind]canvas{}

func defineCanvas(kind optab.OpKind, c canvas) { canvases[kind] = c }

// zoomOut draws t's canvas (t.zoom's) for sample p of key k, of its image
// (ImageSize: a crop before the geometry's, else the source's).
func (t *Transform) zoomOut(p *SamplePlan, k det.Key) {
	w, h := p.ImageSize()
	if cw, ch, pad, ok := canvases[t.zoom.Kind].draw(t.zoom, w, h, k); ok {
		p.Zoomed, p.ZoomW, p.ZoomH, p.ZoomPad = true, cw, ch, pad
	}
}

// prePad is the padding before a RandomCrop or CenterCrop and its fill: a
// Pad's, or a RandomZoomOut's as drawn for p (none when it was not).
func (t *Transform) prePad(p *SamplePlan) ([4]int, [3]float64) {
	switch {
	case t.pad != nil:
		return optab.ArgsOf[PadArgs](t.pad).Padding, optab.FillOf(t.pad).Fill
	case p.Zoomed:
		return p.ZoomPad, optab.FillOf(t.zoom).Fill
	}
	return [4]int{}, [3]float64{}
}

// streamPreFlip is the RNG stream of a RandomHorizontalFlip between a
// RandomIoUCrop and its Resize: a child of the geometry's, as streamZoom.
const streamPreFlip = StreamCrop*64 + 2

// iouPlan plans a RandomIoUCrop (after a RandomZoomOut's canvas, if one
// was drawn) and its Resize: the crop drawn against src's boxes as they
// are on the canvas (iouParams), resized to the output, flipped before
// if the flip between them is drawn. Without a zoom or that flip it is a
// crop and resize of the source (cropResize); else a canvas plan.
func (t *Transform) iouPlan(p *SamplePlan, k det.Key, src *targets.Targets, scratch *[][4]float32) error {
	if src == nil && t.iouOn() {
		return fmt.Errorf("%w: RandomIoUCrop draws its crop against the sample's boxes: a job with targets only (JobSpec.targets)", errs.Unsupported)
	}
	var room [][4]float32
	if scratch != nil {
		room = *scratch
	}
	boxes := room[:0]
	if src != nil {
		boxes = append(boxes, src.Boxes...)
	}
	if scratch != nil {
		*scratch = boxes
	}
	W, H := p.SrcW, p.SrcH
	if p.Zoomed {
		zp := p.ZoomPad
		W, H, _ = MoveBoxes(boxes, W, H, []fn.Step{{Fn: fn.Pad, I: [6]int{zp[0], zp[1], zp[2], zp[3]}}})
		p.RCFill = optab.FillOf(t.zoom).Fill
	}
	var top, left, h, w int
	var ok bool
	if t.iouOn() && iouDrawn(k, t.iou) { // else switched off by a stop_epoch, or not drawn (p): the whole canvas
		r := k.Stream(StreamCrop)
		var err error
		if top, left, h, w, ok, err = iouParams(&r, W, H, boxes, t.iou); err != nil {
			return err
		}
	}
	p.Geom, p.IoU = CropResize, ok
	p.CX, p.CY, p.CW, p.CH = 0, 0, W, H
	if ok {
		p.CX, p.CY, p.CW, p.CH = left, top, w, h
	}
	if t.preFlip > 0 {
		fr := k.Stream(streamPreFlip)
		p.PreFlip = fr.Float64() < t.preFlip
	}
	p.ZoomW, p.ZoomH = W, H
	p.KX, p.KY, p.KW, p.KH = p.CX, p.CY, p.CW, p.CH
	p.Canvas = p.Zoomed || p.PreFlip || len(t.pre) > 0
	return nil
}

// streamIoUApply is the RNG stream of a RandomIoUCrop's p (whether its
// crop is drawn at all): a child of the geometry's, as streamZoom.
const streamIoUApply = StreamCrop*64 + 9

// iouP is op's p: 0, a Go literal's unset (the presets' ssdlite), is 1.
func iouP(op *optab.Op) float64 {
	if op.P == 0 {
		return 1
	}
	return op.P
}

// iouDrawn says whether op's crop is drawn for key k: always at p 1 (no
// number drawn, so a recipe without p draws what it drew before), else
// a uniform of its own stream under p, as the DETR family's
// RandomIoUCrop.__call__ (torch.rand(1) >= p leaves the sample) and
// torchvision's RandomApply.
func iouDrawn(k det.Key, op *optab.Op) bool {
	p := iouP(op)
	if p >= 1 {
		return true
	}
	r := k.Stream(streamIoUApply)
	return r.Float64() < p
}

// iouParams is torchvision's RandomIoUCrop.make_params on a W x H canvas
// with boxes (XYXY): rounds of a uniform option (the minimal IoU; one >=
// 1 is no crop, ok false) and trials of a crop (each side times a scale
// uniform in (min_scale, max_scale), its aspect within range, at a uniform
// place, not empty) until one has a box whose centre is inside it and
// whose IoU with it is at least the option's. In float32 from 24-bit
// uniforms, as torch.rand's and the box ops' float32. A crop of a side
// 0 (torchvision divides by it) fails its trial; maxIoURounds rounds
// without a crop fail the sample (torchvision's loops on).
func iouParams(r *det.RNG, W, H int, boxes [][4]float32, op *optab.Op) (top, left, h, w int, ok bool, err error) {
	u := r.Float32
	ia := optab.ArgsOf[IoUCropArgs](op)
	lo, d := float32(ia.Scale[0]), float32(ia.Scale[1]-ia.Scale[0])
	for range maxIoURounds {
		least := ia.Options[r.Intn(len(ia.Options))]
		if least >= 1 {
			return 0, 0, 0, 0, false, nil
		}
		for range ia.Trials {
			sw := lo + float32(d*u())
			sh := lo + float32(d*u())
			w, h = int(float32(W)*sw), int(float32(H)*sh)
			if h == 0 {
				continue
			}
			if ar := float64(w) / float64(h); !(ia.Ratio[0] <= ar && ar <= ia.Ratio[1]) {
				continue
			}
			left = int(float32(W-w) * u())
			top = int(float32(H-h) * u())
			if w == 0 || h == 0 {
				continue
			}
			if best, any := MaxIoU(boxes, top, left, h, w); any && !(best < float32(least)) {
				return top, left, h, w, true, nil
			}
		}
	}
	return 0, 0, 0, 0, false, fmt.Errorf("%w: RandomIoUCrop found no crop of the %dx%d image meeting its options %v in %d rounds of %d trials (torchvision's would loop on)",
		errs.Unsupported, W, H, ia.Options, maxIoURounds, ia.Trials)
}

// MaxIoU is the largest IoU (torchvision's box_iou, float32) of the crop
// (left, top, left+w, top+h) with the boxes whose centre is inside it, and
// whether there is one.
func MaxIoU(boxes [][4]float32, top, left, h, w int) (float32, bool) {
	c := [4]float32{float32(left), float32(top), float32(left + w), float32(top + h)}
	area2 := float32(float32(c[2]-c[0]) * float32(c[3]-c[1]))
	best, any := float32(0), false
	for k := range boxes {
		b := &boxes[k]
		if !targets.BoxWithin(b, top, left, h, w) {
			continue
		}
		area1 := float32(float32(b[2]-b[0]) * float32(b[3]-b[1]))
		iw := max(min(b[2], c[2])-max(b[0], c[0]), 0)
		ih := max(min(b[3], c[3])-max(b[1], c[1]), 0)
		inter := float32(iw * ih)
		iou := inter / ((area1 + area2) - inter)
		if !any || iou > best || iou != iou {
			best = iou
		}
		any = true
	}
	return best, any
}
