package pipeline

// The detection recipes' geometry (RandomZoomOut, RandomIoUCrop and the
// flip before their Resize): their draws, and the canvas a zoom or a flip
// before the resize makes, resized in Go. Floating point as in plan.go:
// every product that is added is rounded first.

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// maxPre bounds the ops before the geometry.
const maxPre = 4

// streamPre is the RNG stream of op i before the geometry: stream + i,
// children of the geometry's stream, as streamZoom.
const streamPre = streamCrop*64 + 3

// leadingPre counts the RandomPhotometricDistorts that ops start with.
func leadingPre(ops []Op) int {
	n := 0
	for n < len(ops) && ops[n].Kind == OpRandomPhotometricDistort {
		n++
	}
	return n
}

// compilePre compiles t's first pre ops (RandomPhotometricDistort: ops on
// pixels alone, whose draws do not depend on the image's size), which run
// on the image decoded at its own size before the geometry: every sample
// then takes the canvas path, which needs a geometry that ends in
// Resize((h, w)) (after a RandomZoomOut or a RandomIoUCrop, if any).
func (t *Transform) compilePre(pre int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: %s", ErrUnsupported, fmt.Sprintf(format, a...))
	}
	if pre > maxPre {
		return bad("%d ops before the geometry: the limit is %d", pre, maxPre)
	}
	if t.resize == nil || t.resize.Size[1] == 0 || t.center != nil || t.rrc != nil || t.rcrop != nil || t.pad != nil || t.padAfter != nil {
		return bad("op 0 (RandomPhotometricDistort) before the geometry needs a geometry that ends in Resize((h, w)) (after a RandomZoomOut or a RandomIoUCrop, if any); move it after the geometry")
	}
	c := compiler{w: t.outW, h: t.outH}
	for i := range pre {
		nd, err := c.compile(&t.ops[i], i, streamPre+uint64(i), 0)
		if err != nil {
			return err
		}
		t.pre = append(t.pre, nd)
		t.maxPre += nd.maxSteps
	}
	return nil
}

// drawPre appends the steps of t's ops before the geometry for key k.
func (t *Transform) drawPre(k Key, buf []Step) []Step {
	return t.drawPreInto(new(drawer), k, buf)
}

// drawPreInto is drawPre with the caller's drawer d, reused.
func (t *Transform) drawPreInto(d *drawer, k Key, buf []Step) []Step {
	*d = drawer{k: k, steps: buf}
	for i := range t.pre {
		t.pre[i].draw(d)
	}
	steps := d.steps
	d.steps = nil
	return steps
}

// SetBoxSource tells d that the next samples it decodes are ds's sample i
// (until the next call; nil: none), whose boxes a RandomIoUCrop draws
// against.
func (d *Decoder) SetBoxSource(ds Targeted, i int) { d.boxSrc, d.boxIdx = ds, i }

// streamZoom is RandomZoomOut's RNG stream: a child of the geometry's
// stream as a container's children are (stream*64 + 1 + i), which no op
// uses (the geometry is no container), so that the crop after it keeps
// stream 1's numbers.
const streamZoom = streamCrop*64 + 1

// zoomOut is torchvision's RandomZoomOut: with probability p (a draw >= p
// leaves the image), r uniform in side_range and the canvas int(side * r)
// a side, the image at (int((canvas_w - w) * u), int((canvas_h - h) *
// v)). Drawn in float32 from 24-bit uniforms, as torch.rand draws
// float32s and multiplies a Python number with them in float32.
func (t *Transform) zoomOut(p *samplePlan, k Key) {
	r := k.Stream(streamZoom)
	u := r.Float32
	if float64(u()) >= t.zoom.P {
		return
	}
	lo, hi := t.zoom.SideRange[0], t.zoom.SideRange[1]
	s := float32(lo) + float32(u()*float32(hi-lo))
	cw, ch := int(float32(p.srcW)*s), int(float32(p.srcH)*s)
	left, top := int(float32(cw-p.srcW)*u()), int(float32(ch-p.srcH)*u())
	p.zoomed, p.zoomW, p.zoomH = true, cw, ch
	p.zoomPad = [4]int{left, top, cw - (left + p.srcW), ch - (top + p.srcH)}
}

// prePad is the padding before a RandomCrop or CenterCrop and its fill: a
// Pad's, or a RandomZoomOut's as drawn for p (none when it was not).
func (t *Transform) prePad(p *samplePlan) ([4]int, [3]float64) {
	switch {
	case t.pad != nil:
		return t.pad.Padding, t.pad.Fill
	case p.zoomed:
		return p.zoomPad, t.zoom.Fill
	}
	return [4]int{}, [3]float64{}
}

// streamPreFlip is the RNG stream of a RandomHorizontalFlip between a
// RandomIoUCrop and its Resize: a child of the geometry's, as streamZoom.
const streamPreFlip = streamCrop*64 + 2

// iouPlan plans a RandomIoUCrop (after a RandomZoomOut's canvas, if one
// was drawn) and its Resize: the crop drawn against src's boxes as they
// are on the canvas (iouParams), resized to the output, flipped before
// if the flip between them is drawn. Without a zoom or that flip it is a
// crop and resize of the source (cropResize); else a canvas plan.
func (t *Transform) iouPlan(p *samplePlan, k Key, src *Targets, scratch *[][4]float32) error {
	if src == nil && t.iouOn() {
		return fmt.Errorf("%w: RandomIoUCrop draws its crop against the sample's boxes: a job with targets only (JobSpec.targets)", ErrUnsupported)
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
	W, H := p.srcW, p.srcH
	if p.zoomed {
		zp := p.zoomPad
		W, H, _ = MoveBoxes(boxes, W, H, []Step{{Fn: FnPad, I: [6]int{zp[0], zp[1], zp[2], zp[3]}}})
		p.rcFill = t.zoom.Fill
	}
	var top, left, h, w int
	var ok bool
	if t.iouOn() { // else switched off by a stop_epoch: the whole canvas
		r := k.Stream(streamCrop)
		var err error
		if top, left, h, w, ok, err = iouParams(&r, W, H, boxes, t.iou); err != nil {
			return err
		}
	}
	p.geom, p.iou = cropResize, ok
	p.cx, p.cy, p.cw, p.ch = 0, 0, W, H
	if ok {
		p.cx, p.cy, p.cw, p.ch = left, top, w, h
	}
	if t.preFlip > 0 {
		fr := k.Stream(streamPreFlip)
		p.preFlip = fr.Float64() < t.preFlip
	}
	p.zoomW, p.zoomH = W, H
	p.kx, p.ky, p.kw, p.kh = p.cx, p.cy, p.cw, p.ch
	p.canvas = p.zoomed || p.preFlip || len(t.pre) > 0
	return nil
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
func iouParams(r *RNG, W, H int, boxes [][4]float32, op *Op) (top, left, h, w int, ok bool, err error) {
	u := r.Float32
	lo, d := float32(op.Scale[0]), float32(op.Scale[1]-op.Scale[0])
	for range maxIoURounds {
		least := op.Options[r.Intn(len(op.Options))]
		if least >= 1 {
			return 0, 0, 0, 0, false, nil
		}
		for range op.Trials {
			sw := lo + float32(d*u())
			sh := lo + float32(d*u())
			w, h = int(float32(W)*sw), int(float32(H)*sh)
			if h == 0 {
				continue
			}
			if ar := float64(w) / float64(h); !(op.Ratio[0] <= ar && ar <= op.Ratio[1]) {
				continue
			}
			left = int(float32(W-w) * u())
			top = int(float32(H-h) * u())
			if w == 0 || h == 0 {
				continue
			}
			if best, any := maxIoU(boxes, top, left, h, w); any && !(best < float32(least)) {
				return top, left, h, w, true, nil
			}
		}
	}
	return 0, 0, 0, 0, false, fmt.Errorf("%w: RandomIoUCrop found no crop of the %dx%d image meeting its options %v in %d rounds of %d trials (torchvision's would loop on)",
		ErrUnsupported, W, H, op.Options, maxIoURounds, op.Trials)
}

// maxIoU is the largest IoU (torchvision's box_iou, float32) of the crop
// (left, top, left+w, top+h) with the boxes whose centre is inside it, and
// whether there is one.
func maxIoU(boxes [][4]float32, top, left, h, w int) (float32, bool) {
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

// resizeCanvas is a RandomZoomOut's canvas resized (torchvision's pad,
// then resize; a RandomIoUCrop's crop of it, flipped if p.preFlip,
// between): the image src, decoded at its own size in layout, put at
// (zoomPad[0], zoomPad[1]) on a zoomW x zoomH canvas of p.rcFill, whose
// part kx, ky, kw, kh torch's kernels (resampleTorch) resize, and flip if
// p says so, into dst.
// With cgo the resampler does it (resizeCanvasFast), making only the
// crop's rows and columns its taps read; resizeCanvasGo is the same bytes
// in Go (without cgo, and on the reference path: WithReference).
func (d *Decoder) resizeCanvas(dst []byte, p *samplePlan, src []byte, layout Layout) {
	if p.yolo {
		d.yoloCanvas(dst, p, src, layout)
		return
	}
	if !d.opts.reference && d.resizeCanvasFast(dst, p, src, layout) {
		return
	}
	d.resizeCanvasGo(dst, p, src, layout)
}

// resizeCanvasGo is resizeCanvas in Go: the crop of the canvas made
// whole in the Decoder's scratch (the fill, the image's part of it, its
// columns reversed if p.preFlip), then resized (resampleRGBA).
func (d *Decoder) resizeCanvasGo(dst []byte, p *samplePlan, src []byte, layout Layout) {
	kw, kh, w, h := p.kw, p.kh, p.srcW, p.srcH
	n := 4 * kw * kh
	if cap(d.canvas) < n {
		d.canvas = make([]byte, n)
	}
	c, f := d.canvas[:n], p.rcFill
	for i := 0; i < n; i += 4 {
		c[i], c[i+1], c[i+2], c[i+3] = byte(f[0]), byte(f[1]), byte(f[2]), 255
	}
	// The image's top-left corner, from the crop's, and its part of the crop.
	left, top := p.zoomPad[0]-p.kx, p.zoomPad[1]-p.ky
	x0, x1, y0, y1 := max(left, 0), min(left+w, kw), max(top, 0), min(top+h, kh)
	plane := w * h
	for y := y0; y < y1; y++ {
		row := c[4*y*kw:][:4*kw]
		for x := x0; x < x1; x++ {
			o := (y-top)*w + x - left
			if layout == HWC {
				row[4*x], row[4*x+1], row[4*x+2] = src[3*o], src[3*o+1], src[3*o+2]
			} else {
				row[4*x], row[4*x+1], row[4*x+2] = src[o], src[plane+o], src[2*plane+o]
			}
		}
		if p.preFlip { // the crop's columns reversed (the fill's rows are the same)
			for i, j := 0, kw-1; i < j; i, j = i+1, j-1 {
				a, b := row[4*i:4*i+4], row[4*j:4*j+4]
				a[0], a[1], a[2], b[0], b[1], b[2] = b[0], b[1], b[2], a[0], a[1], a[2]
			}
		}
	}
	cp := *p
	cp.geom, cp.srcW, cp.srcH, cp.cx, cp.cy, cp.cw, cp.ch = cropResize, kw, kh, 0, 0, kw, kh
	// The image's rows, from the crop's top: the others are the fill's.
	d.resampleRGBA(c, 4*kw, &cp, layout, dst, top, top+h)
}

// resampleRGBA is resampleTorch (torch's uint8 kernels, the horizontal
// pass first, rounded and clamped, then the vertical; the same sums, so
// the same bytes) on RGBA rows of stride bytes from src, the crop's
// top-left pixel, without its per-tap calls: the canvas path's resize.
// The rows outside [img0, img1) are all one colour: their horizontal pass
// is made once and copied.
func (d *Decoder) resampleRGBA(src []byte, stride int, p *samplePlan, layout Layout, out []byte, img0, img1 int) {
	sx, sy := p.spans()
	ax, ay := fn.NewTorchAxis(sx, p.interp, p.antialias), fn.NewTorchAxis(sy, p.interp, p.antialias)
	w, h := p.outW, p.outH
	y0, y1 := 1<<62, 0
	for i, s := range ay.Start {
		y0, y1 = min(y0, s), max(y1, s+len(ay.K[i]))
	}
	n := (y1 - y0) * w * 3
	if cap(d.mid) < n {
		d.mid = make([]byte, n)
	}
	mid := d.mid[:n]
	hr, vr := int32(1)<<(ax.Prec-1), int32(1)<<(ay.Prec-1)
	fillRow := -1 // a fill row's pass, once made
	for y := y0; y < y1; y++ {
		row, m := src[y*stride:], mid[(y-y0)*w*3:]
		if fill := y < img0 || y >= img1; fill && fillRow >= 0 {
			copy(m[:3*w], mid[(fillRow-y0)*w*3:][:3*w])
			continue
		} else if fill {
			fillRow = y
		}
		for x := range w {
			r, g, b := hr, hr, hr
			px := row[4*ax.Start[x]:]
			for j, k := range ax.K[x] {
				k32 := int32(k)
				r += int32(px[4*j]) * k32
				g += int32(px[4*j+1]) * k32
				b += int32(px[4*j+2]) * k32
			}
			m[3*x], m[3*x+1], m[3*x+2] = clamp8(r>>ax.Prec), clamp8(g>>ax.Prec), clamp8(b>>ax.Prec)
		}
	}
	plane := w * h
	for y := range h {
		taps, base := ay.K[y], (ay.Start[y]-y0)*w*3
		for x := range w {
			r, g, b := vr, vr, vr
			for j, k := range taps {
				k32, o := int32(k), base+(j*w+x)*3
				r += int32(mid[o]) * k32
				g += int32(mid[o+1]) * k32
				b += int32(mid[o+2]) * k32
			}
			ox := x
			if p.flip {
				ox = w - 1 - x
			}
			if layout == HWC {
				o := 3 * (y*w + ox)
				out[o], out[o+1], out[o+2] = clamp8(r>>ay.Prec), clamp8(g>>ay.Prec), clamp8(b>>ay.Prec)
			} else {
				o := y*w + ox
				out[o], out[plane+o], out[2*plane+o] = clamp8(r>>ay.Prec), clamp8(g>>ay.Prec), clamp8(b>>ay.Prec)
			}
		}
	}
}

// clamp8 is a sum shifted back, clamped to 0..255 (torchAxis.sum's end).
func clamp8(v int32) byte { return byte(min(max(v, 0), 255)) }
