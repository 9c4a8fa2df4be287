package pipeline

// Floating point in this file: every product that is added or subtracted is
// wrapped in float64(...), which rounds it and so stops the compiler from
// fusing it into a multiply-add (the Go spec allows that, and arm64, ppc64,
// s390x, riscv64 and amd64 with GOAMD64=v3 do it): a plan must be the same
// on every machine.

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// samplePlan is everything size-dependent or random about one sample: where
// its pixels come from, whether it is flipped, how its colors are jittered.
// It is a pure function of (transform, image size, key); both decode paths
// execute the same plan.
type samplePlan struct {
	geom geomKind
	// Source image size.
	srcW, srcH int
	// resizeCrop: the whole source is resized to rw x rh first.
	rw, rh int
	// The crop: of the source (cropResize) or of the resized image
	// (resizeCrop).
	cx, cy, cw, ch int
	outW, outH     int
	flip           bool
	// The geometry op's filter, and whether it widens when downscaling.
	// A plan made by hand (tests) sets antialias for the default filter,
	// antialiased bilinear: false is torch's non-antialiased kernel.
	interp    Interpolation
	antialias bool
	// exact: the transform decodes in DecodeExact (its default), so the
	// fast path decodes at full scale (dctScalable). A plan made by hand
	// (tests) leaves it false: the Decoder's DCT scaling applies.
	exact bool
	// padded: a CenterCrop larger than the image (or the resized image)
	// on a side, which torchvision pads with zeros (F.center_crop: left
	// and top (crop - size) // 2, the rest right and bottom). cx, cy, cw,
	// ch stay the crop as asked (the trace's center_crop); visible() is
	// what is decoded, and padL, padT where its top-left pixel goes in
	// the unflipped output.
	padded     bool
	padL, padT int
	// RandomCrop: its padding (left, top, right, bottom, pad_if_needed's
	// included; a Pad before it is not in it), fill (a Pad's fill when
	// only the Pad pads), and whether it crops (the trace's pad and crop);
	// the part of the source that shows (vx, vy, vw, vh: vis, empty when
	// the crop is all padding) and where (padL, padT). A Pad then
	// CenterCrop is planned the same way (padCrop).
	rcPad          [4]int
	rcFill         [3]float64
	rcCrop         bool
	rcTop, rcLeft  int
	vis            bool
	vx, vy, vw, vh int
	// RandomZoomOut: zoomed when it was drawn (its p), zoomPad its padding
	// (left, top, right, bottom), the image on a canvas of zoomW x zoomH.
	// Before a RandomCrop or CenterCrop it is their padding (padCrop);
	// before a Resize, canvas: the canvas is resized (rw, rh the output),
	// which the decode makes from the image decoded at its own size
	// (visible) padded with rcFill into it (resizeCanvas).
	zoomed       bool
	zoomPad      [4]int
	zoomW, zoomH int
	canvas       bool
	// kx, ky, kw, kh: the part of the canvas (zoomW x zoomH; the image
	// when not zoomed) a canvas plan resizes: all of it, or the IoU crop.
	kx, ky, kw, kh int
	// RandomIoUCrop: iou when it cropped (cx, cy, cw, ch: its crop of the
	// canvas), preFlip when the RandomHorizontalFlip before the Resize
	// was drawn; either with a zoom, or preFlip, makes a canvas plan.
	iou, preFlip bool
	// yolo: a YOLO geometry's canvas plan (yolo.go): the image loaded at
	// ylw x ylh, letterboxed by ylb (ylbOn), warped by yp (ypOn) into
	// the output (cv2.warpPerspective with ypWarp, else cv2.warpAffine).
	yolo, ylbOn, ypOn, ypWarp bool
	ylw, ylh                  int
	ylb                       cv.LetterBoxGeom
	yp                        cv.PerspectiveParams
}

// visible is the plan of what a padded plan decodes: the crop clipped to
// the image, output at its own size (a CenterCrop does not resample).
func (p *samplePlan) visible() samplePlan {
	v := *p
	if p.canvas { // the whole image, at its own size, unflipped
		v.geom, v.cx, v.cy, v.cw, v.ch, v.outW, v.outH = cropResize, 0, 0, p.srcW, p.srcH, p.srcW, p.srcH
		v.padded, v.vis, v.canvas, v.flip = false, false, false, false
		return v
	}
	if p.vis {
		v.cx, v.cy, v.cw, v.ch, v.outW, v.outH = p.vx, p.vy, p.vw, p.vh, p.vw, p.vh
		if p.vw < 1 || p.vh < 1 { // all padding: decode one pixel, shown nowhere
			v.cx, v.cy, v.cw, v.ch, v.outW, v.outH = 0, 0, 1, 1, 1, 1
		}
		v.padded, v.vis = false, false
		return v
	}
	w, h := p.srcW, p.srcH
	if p.geom == resizeCrop {
		w, h = p.rw, p.rh
	}
	if p.cw > w {
		v.cx, v.cw, v.outW = 0, w, w
	}
	if p.ch > h {
		v.cy, v.ch, v.outH = 0, h, h
	}
	v.padded = false
	return v
}

// padAt is where the visible part's top-left pixel goes in the output:
// (padL, padT), or, flipped, the right padding's width from the left (the
// flip of the padded crop).
func (p *samplePlan) padAt() (x, y int) {
	x, y = p.padL, p.padT
	if p.flip {
		vw := p.visible().outW
		x = p.outW - vw - p.padL
	}
	return x, y
}

// region is the fused form of a plan's geometry: the source rectangle box
// (fractional, source pixels) maps onto the output, and the resampling
// filter's support is clipped to the source rectangle [x0,x1) x [y0,y1).
type region struct {
	bx, by, bw, bh float64
	x0, y0, x1, y1 int
}

// plan computes a sample's plan. A CenterCrop larger than the image is
// padded with zeros, as torchvision pads it (samplePlan.padded).
func (t *Transform) plan(srcW, srcH int, k Key) (samplePlan, error) {
	return t.planBoxes(srcW, srcH, k, nil, nil)
}

// planBoxes is plan for a sample whose boxes are src (nil: none known;
// RandomIoUCrop draws against them), scratch the room it may use.
func (t *Transform) planBoxes(srcW, srcH int, k Key, src *Targets, scratch *[][4]float32) (samplePlan, error) {
	gw, gh := t.geomSize()
	p := samplePlan{geom: t.geom, srcW: srcW, srcH: srcH, outW: gw, outH: gh}
	bicubic := false
	if t.zoom != nil {
		t.zoomOut(&p, k)
	}
	switch {
	case t.yolo != nil:
		t.yoloPlan(&p, k)
	case t.fixed != nil:
		if err := t.lsjPlan(&p, k); err != nil {
			return p, err
		}
	case t.iou != nil:
		if err := t.iouPlan(&p, k, src, scratch); err != nil {
			return p, err
		}
	case t.rcrop != nil:
		if err := t.randomCrop(&p, k); err != nil {
			return p, err
		}
	case t.rrc != nil:
		r := k.Stream(streamCrop)
		p.cx, p.cy, p.cw, p.ch = rrcParams(&r, srcW, srcH, t.rrc.Scale, t.rrc.Ratio)
		if t.rrc.RandomInterp {
			// timm's random.choice((BILINEAR, BICUBIC)), after the crop.
			bicubic = r.Float64() >= 0.5
		}
	case t.pad != nil || (t.zoom != nil && t.resize == nil): // Pad or RandomZoomOut, then CenterCrop
		if err := t.padCenterCrop(&p); err != nil {
			return p, err
		}
	case t.resize != nil:
		p.rw, p.rh = resizedSize(srcW, srcH, t.resize.Size)
		if t.resize.Kind != OpResize { // RandomShortestSize, RandomResize: drawn
			p.rw, p.rh = resizeSize(t.resize, k, srcW, srcH)
		}
		if t.varyGeom { // the sample's own size (lsj.go)
			p.outW, p.outH = p.rw, p.rh
		}
		p.cw, p.ch = p.rw, p.rh
		if p.zoomed { // RandomZoomOut then Resize(h, w): the canvas resized
			p.canvas, p.rcFill = true, t.zoom.Fill
		} else if len(t.pre) > 0 { // ops before: the image's own canvas
			p.canvas, p.zoomW, p.zoomH = true, srcW, srcH
		}
		p.kw, p.kh = p.zoomW, p.zoomH
		if t.center != nil {
			p.cw, p.ch = t.center.Size[1], t.center.Size[0]
			p.cx, p.cy = centerOffset(p.rw, p.cw), centerOffset(p.rh, p.ch)
		}
	default: // CenterCrop alone
		p.cw, p.ch = t.center.Size[1], t.center.Size[0]
		p.cx, p.cy = centerOffset(srcW, p.cw), centerOffset(srcH, p.ch)
	}
	if err := t.geomInterp(&p); err != nil {
		return p, err
	}
	if bicubic {
		p.interp = InterpBicubic
	}
	w, h := srcW, srcH
	if p.geom == resizeCrop {
		w, h = p.rw, p.rh
	}
	if !p.vis && !p.canvas && (p.cx < 0 || p.cy < 0 || p.cx+p.cw > w || p.cy+p.ch > h) {
		// Only a CenterCrop can pass the image (RandomResizedCrop's box is
		// inside it): torchvision pads it with zeros.
		if t.rrc != nil || t.center == nil {
			return p, fmt.Errorf("%w: image %dx%d: crop %d,%d %dx%d outside it", ErrUnsupported, srcW, srcH, p.cx, p.cy, p.cw, p.ch)
		}
		p.padded = true
		if p.cw > w {
			p.padL = (p.cw - w) / 2
		}
		if p.ch > h {
			p.padT = (p.ch - h) / 2
		}
	}
	if t.padAfter != nil {
		if err := t.padCropped(&p); err != nil {
			return p, err
		}
	}
	if t.flip > 0 {
		r := k.Stream(streamFlip)
		p.flip = r.Float64() < t.flip
	}
	return p, nil
}

// rrcParams is torchvision's RandomResizedCrop.get_params: ten tries at a
// random area and log-uniform aspect ratio, then a center crop fallback.
func rrcParams(r *RNG, W, H int, scale, ratio [2]float64) (x, y, w, h int) {
	area := float64(W * H)
	for range 10 {
		target := area * r.Uniform(scale[0], scale[1])
		aspect := r.LogUniform(ratio[0], ratio[1])
		w = int(math.RoundToEven(math.Sqrt(target * aspect)))
		h = int(math.RoundToEven(math.Sqrt(target / aspect)))
		if 0 < w && w <= W && 0 < h && h <= H {
			y = r.Intn(H - h + 1)
			x = r.Intn(W - w + 1)
			return x, y, w, h
		}
	}
	in := float64(W) / float64(H)
	switch {
	case in < ratio[0]:
		w = W
		h = int(math.RoundToEven(float64(w) / ratio[0]))
	case in > ratio[1]:
		h = H
		w = int(math.RoundToEven(float64(h) * ratio[1]))
	default:
		w, h = W, H
	}
	return (W - w) / 2, (H - h) / 2, w, h
}

// resizedSize is torchvision's Resize output size: (h, w) as given, or the
// shorter side set to size[0] and the longer scaled and truncated.
func resizedSize(W, H int, size [2]int) (w, h int) {
	if size[1] > 0 {
		return size[1], size[0]
	}
	s := size[0]
	if W <= H {
		return s, int(float64(s) * float64(H) / float64(W))
	}
	return int(float64(s) * float64(W) / float64(H)), s
}

// centerOffset is torchvision's CenterCrop offset: round((size-crop)/2),
// rounding half to even as Python does.
func centerOffset(size, crop int) int {
	return int(math.RoundToEven(float64(size-crop) / 2))
}

// region returns the plan's geometry as one resampling from the source.
func (p *samplePlan) region() region {
	if p.geom == cropResize {
		return region{
			bx: float64(p.cx), by: float64(p.cy), bw: float64(p.cw), bh: float64(p.ch),
			x0: p.cx, y0: p.cy, x1: p.cx + p.cw, y1: p.cy + p.ch,
		}
	}
	// Resize then crop: the crop of the resized image is a fractional box of
	// the source, and the filter may reach past it into the rest of the
	// image, as it does when the whole image is resized first. Clip the
	// support to what it can touch: the box plus the filter's radius.
	sx := float64(p.srcW) / float64(p.rw)
	sy := float64(p.srcH) / float64(p.rh)
	g := region{bx: float64(float64(p.cx) * sx), by: float64(float64(p.cy) * sy), bw: float64(float64(p.cw) * sx), bh: float64(float64(p.ch) * sy)}
	mx, my := p.clipMargin(sx), p.clipMargin(sy)
	g.x0 = max(0, int(math.Floor(g.bx-mx)))
	g.y0 = max(0, int(math.Floor(g.by-my)))
	g.x1 = min(p.srcW, int(math.Ceil(g.bx+g.bw+mx)))
	g.y1 = min(p.srcH, int(math.Ceil(g.by+g.bh+my)))
	return g
}

// randomCrop is torchvision.transforms.v2's RandomCrop: the image padded
// (by a Pad before it, if any, then padding, then pad_if_needed's
// difference on both sides of a side still short of the crop), then a
// crop of Size at a uniform top, then left, where the padded image is
// larger. The plan decodes the part of the source inside the crop (a
// copy: no resampling) and pads it with the fill into place (padCrop).
func (t *Transform) randomCrop(p *samplePlan, k Key) error {
	op := t.rcrop
	ch, cw := op.Size[0], op.Size[1]
	pre, _ := t.prePad(p) // the Pad's or the RandomZoomOut's
	l, tp, r, b := op.Padding[0], op.Padding[1], op.Padding[2], op.Padding[3]
	ph, pw := p.srcH+pre[1]+pre[3]+tp+b, p.srcW+pre[0]+pre[2]+l+r
	if op.PadIfNeeded {
		if ph < ch {
			d := ch - ph
			tp, b, ph = tp+d, b+d, ph+2*d
		}
		if pw < cw {
			d := cw - pw
			l, r, pw = l+d, r+d, pw+2*d
		}
	}
	if ph < ch || pw < cw {
		return fmt.Errorf("%w: image %dx%d, padded to %dx%d, is smaller than the %dx%d crop (RandomCrop: pad_if_needed=True pads it, as torchvision's)",
			ErrUnsupported, p.srcW, p.srcH, pw, ph, cw, ch)
	}
	rng := k.Stream(streamCrop)
	top, left := 0, 0
	if ph > ch {
		top = rng.Intn(ph - ch + 1)
	}
	if pw > cw {
		left = rng.Intn(pw - cw + 1)
	}
	p.rcPad, p.rcFill, p.rcCrop, p.rcTop, p.rcLeft = [4]int{l, tp, r, b}, op.Fill, ph > ch || pw > cw, top, left
	if _, fill := t.prePad(p); (t.pad != nil || p.zoomed) && p.rcPad == [4]int{} {
		p.rcFill = fill // only the Pad or zoom pads (NewTransform: else the fills are equal)
	}
	p.padCrop(pre[0]+l, pre[1]+tp, cw, ch, top, left)
	return nil
}

// padCrop plans the crop of cw x ch at (top, left) of the source padded
// by l on the left and tp on the top (and enough on the right and bottom):
// a plain crop of the source when it is inside it, else the part of the
// source inside the crop (vis), padded into place with p.rcFill.
func (p *samplePlan) padCrop(l, tp, cw, ch, top, left int) {
	// The crop in source coordinates, and what of it the source covers.
	sx, sy := left-l, top-tp
	x0, y0 := max(sx, 0), max(sy, 0)
	x1, y1 := min(sx+cw, p.srcW), min(sy+ch, p.srcH)
	p.cx, p.cy, p.cw, p.ch = sx, sy, cw, ch
	if x0 == sx && y0 == sy && x1 == sx+cw && y1 == sy+ch {
		return // inside the image: a plain crop
	}
	p.padded, p.vis = true, true
	p.vx, p.vy, p.vw, p.vh = x0, y0, max(x1-x0, 0), max(y1-y0, 0)
	p.padL, p.padT = x0-sx, y0-sy
}

// padCropped is a Pad after a RandomCrop or CenterCrop (no resampling):
// the part of the image the crop shows, where it shows it, moved by the
// Pad's left and top padding into the larger output, the rest the Pad's
// fill. One fill per sample: a crop that padded with another fill (a
// RandomCrop's, a CenterCrop's zeros) is refused.
func (t *Transform) padCropped(p *samplePlan) error {
	op := t.padAfter
	if !p.vis {
		// A plain crop, or a CenterCrop past the image on a side (padded,
		// padL or padT set): what of the image it shows.
		x0, y0, x1, y1 := p.cx, p.cy, p.cx+p.cw, p.cy+p.ch
		if p.cw > p.srcW {
			x0, x1 = 0, p.srcW
		}
		if p.ch > p.srcH {
			y0, y1 = 0, p.srcH
		}
		p.vx, p.vy, p.vw, p.vh = x0, y0, x1-x0, y1-y0
	}
	if p.padded && p.rcFill != op.Fill {
		return fmt.Errorf("%w: image %dx%d: the %dx%d crop pads it with %v, then Pad with %v: two fills in one sample are not supported (give both the same fill; a CenterCrop's is 0)",
			ErrUnsupported, p.srcW, p.srcH, p.cw, p.ch, p.rcFill, op.Fill)
	}
	p.padded, p.vis, p.rcFill = true, true, op.Fill
	p.padL, p.padT = p.padL+op.Padding[0], p.padT+op.Padding[1]
	return nil
}

// padCenterCrop is torchvision's pad (a Pad's constant fill) then
// center_crop of the padded image, which pads a side shorter than the
// crop with zeros ((crop - size) // 2 before) and crops the rest at
// round((size - crop) / 2). One fill per sample: a crop larger than the
// padded image after a Pad of a fill other than 0 is refused.
func (t *Transform) padCenterCrop(p *samplePlan) error {
	pad, fill := t.prePad(p)
	ch, cw := t.center.Size[0], t.center.Size[1]
	ph, pw := p.srcH+pad[1]+pad[3], p.srcW+pad[0]+pad[2]
	if (ch > ph || cw > pw) && fill != [3]float64{} {
		name := "Pad"
		if t.zoom != nil {
			name = "RandomZoomOut"
		}
		return fmt.Errorf("%w: image %dx%d, padded by %s to %dx%d, is smaller than the %dx%d CenterCrop, which pads it with zeros: "+
			"%s's fill %v and CenterCrop's zeros in one sample are not supported (%s with fill 0, or pad more)",
			ErrUnsupported, p.srcW, p.srcH, name, pw, ph, cw, ch, name, fill, name)
	}
	anchor := func(size, crop int) int {
		if crop > size {
			return -((crop - size) / 2)
		}
		return centerOffset(size, crop)
	}
	p.rcFill = fill
	p.padCrop(pad[0], pad[1], cw, ch, anchor(ph, ch), anchor(pw, cw))
	return nil
}
