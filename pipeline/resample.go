package pipeline

import (
	"image"
	"math"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// Floating point in this file: as in plan.go, every product that is added
// or subtracted is wrapped in float64(...), so that the compiler does not
// fuse it into a multiply-add: the weights must be the same doubles as
// torch's and turbo.c's on every machine.

// resampleTorch is the reference path's resampling, every filter: torch's
// uint8 kernels, the horizontal pass first and rounded to 8 bits, then the
// vertical. src holds the spans' source
// pixels from its origin (the crop, or the whole image); the output is
// flipped if the plan says so and packed into out.
func resampleTorch(src *image.NRGBA, p *transform.SamplePlan, layout transform.Layout, out []byte) {
	sx, sy := p.Spans()
	ax, ay := fn.NewTorchAxis(sx, p.Interp, p.Antialias), fn.NewTorchAxis(sy, p.Interp, p.Antialias)
	w, h := p.OutW, p.OutH
	// The rows the vertical taps read, horizontally resampled.
	y0, y1 := math.MaxInt, 0
	for i, s := range ay.Start {
		y0, y1 = min(y0, s), max(y1, s+len(ay.K[i]))
	}
	mid := make([]byte, (y1-y0)*w*3)
	for y := y0; y < y1; y++ {
		row := src.Pix[src.PixOffset(src.Rect.Min.X, src.Rect.Min.Y+y):]
		m := mid[(y-y0)*w*3:]
		for x := range w {
			for c := range 3 {
				m[3*x+c] = ax.Sum(x, func(j int) byte { return row[4*j+c] })
			}
		}
	}
	plane := w * h
	for y := range h {
		for x := range w {
			ox := x
			if p.Flip {
				ox = w - 1 - x
			}
			for c := range 3 {
				v := ay.Sum(y, func(j int) byte { return mid[((j-y0)*w+x)*3+c] })
				if layout == transform.HWC {
					out[3*(y*w+ox)+c] = v
				} else {
					out[c*plane+y*w+ox] = v
				}
			}
		}
	}
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
func (d *Decoder) resizeCanvas(dst []byte, p *transform.SamplePlan, src []byte, layout transform.Layout) {
	if p.YOLO { // the YOLO family's load, letterbox and warp (op_yolo.go)
		p.MakeYOLO(dst, src, layout, &d.yoloRoom, d.ops.Stopped)
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
func (d *Decoder) resizeCanvasGo(dst []byte, p *transform.SamplePlan, src []byte, layout transform.Layout) {
	kw, kh := p.KW, p.KH
	w, h := p.ImageSize()
	n := 4 * kw * kh
	if cap(d.canvas) < n {
		d.canvas = make([]byte, n)
	}
	c, f := d.canvas[:n], p.RCFill
	for i := 0; i < n; i += 4 {
		c[i], c[i+1], c[i+2], c[i+3] = byte(f[0]), byte(f[1]), byte(f[2]), 255
	}
	// The image's top-left corner, from the crop's, and its part of the crop.
	left, top := p.ZoomPad[0]-p.KX, p.ZoomPad[1]-p.KY
	x0, x1, y0, y1 := max(left, 0), min(left+w, kw), max(top, 0), min(top+h, kh)
	plane := w * h
	for y := y0; y < y1; y++ {
		row := c[4*y*kw:][:4*kw]
		for x := x0; x < x1; x++ {
			o := (y-top)*w + x - left
			if layout == transform.HWC {
				row[4*x], row[4*x+1], row[4*x+2] = src[3*o], src[3*o+1], src[3*o+2]
			} else {
				row[4*x], row[4*x+1], row[4*x+2] = src[o], src[plane+o], src[2*plane+o]
			}
		}
		if p.PreFlip { // the crop's columns reversed (the fill's rows are the same)
			for i, j := 0, kw-1; i < j; i, j = i+1, j-1 {
				a, b := row[4*i:4*i+4], row[4*j:4*j+4]
				a[0], a[1], a[2], b[0], b[1], b[2] = b[0], b[1], b[2], a[0], a[1], a[2]
			}
		}
	}
	cp := *p
	cp.Geom, cp.SrcW, cp.SrcH, cp.CX, cp.CY, cp.CW, cp.CH = transform.CropResize, kw, kh, 0, 0, kw, kh
	// The image's rows, from the crop's top: the others are the fill's.
	d.resampleRGBA(c, 4*kw, &cp, layout, dst, top, top+h)
}

// resampleRGBA is resampleTorch (torch's uint8 kernels, the horizontal
// pass first, rounded and clamped, then the vertical; the same sums, so
// the same bytes) on RGBA rows of stride bytes from src, the crop's
// top-left pixel, without its per-tap calls: the canvas path's resize.
// The rows outside [img0, img1) are all one colour: their horizontal pass
// is made once and copied.
func (d *Decoder) resampleRGBA(src []byte, stride int, p *transform.SamplePlan, layout transform.Layout, out []byte, img0, img1 int) {
	sx, sy := p.Spans()
	ax, ay := fn.NewTorchAxis(sx, p.Interp, p.Antialias), fn.NewTorchAxis(sy, p.Interp, p.Antialias)
	w, h := p.OutW, p.OutH
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
			if p.Flip {
				ox = w - 1 - x
			}
			if layout == transform.HWC {
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
