//go:build cgo

package pipeline

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestExactCanvasFastIsGo: the canvas path through the resampler
// (resizeCanvasFast, formats.c's stoker_canvas) and the one in Go
// (resizeCanvasGo: the crop made, then resampleRGBA) write the bytes of
// the whole canvas made, then its crop resized (canvasWhole) on random
// images, zooms, crops (inside the image, across its edge, in the
// fill alone), output sizes up and down, filters, flips before and after
// the resize, and layouts, at every SIMD level and without SIMD.
func TestExactCanvasFastIsGo(t *testing.T) {
	exactTest(t)
	rng := rand.New(rand.NewPCG(7, 11))
	levels := []int{0, -1}
	for l := 1; l <= simdBest(); l++ {
		levels = append(levels, l)
	}
	interps := []transform.Interpolation{transform.InterpBilinear, transform.InterpBicubic, transform.InterpNearest}
	for i := range 300 {
		w, h := 1+rng.IntN(90), 1+rng.IntN(90)
		p := transform.SamplePlan{SrcW: w, SrcH: h, Interp: interps[rng.IntN(3)], Antialias: rng.IntN(4) != 0,
			Flip: rng.IntN(2) == 0, PreFlip: rng.IntN(2) == 0, Canvas: true}
		p.ZoomW, p.ZoomH = w, h
		if rng.IntN(4) != 0 { // zoomed: the image somewhere on a larger canvas
			p.Zoomed = true
			p.ZoomW, p.ZoomH = w+rng.IntN(3*w+1), h+rng.IntN(3*h+1)
			l, tp := rng.IntN(p.ZoomW-w+1), rng.IntN(p.ZoomH-h+1)
			p.ZoomPad = [4]int{l, tp, p.ZoomW - w - l, p.ZoomH - h - tp}
			p.RCFill = [3]float64{float64(rng.IntN(256)), float64(rng.IntN(256)), float64(rng.IntN(256))}
		}
		p.KW, p.KH = 1+rng.IntN(p.ZoomW), 1+rng.IntN(p.ZoomH)
		p.KX, p.KY = rng.IntN(p.ZoomW-p.KW+1), rng.IntN(p.ZoomH-p.KH+1)
		p.OutW, p.OutH = 1+rng.IntN(2*p.KW+8), 1+rng.IntN(2*p.KH+8)
		if rng.IntN(3) == 0 { // a downscale by a lot: wide antialiased taps
			p.OutW, p.OutH = 1+rng.IntN(8), 1+rng.IntN(8)
		}
		src := make([]byte, 3*w*h)
		for j := range src {
			src[j] = byte(rng.IntN(256))
		}
		for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
			name := fmt.Sprintf("case %d: %dx%d on %dx%d at %v, crop %d,%d %dx%d to %dx%d, %v aa %v flip %v preflip %v %v",
				i, w, h, p.ZoomW, p.ZoomH, p.ZoomPad, p.KX, p.KY, p.KW, p.KH, p.OutW, p.OutH, p.Interp, p.Antialias, p.Flip, p.PreFlip, layout)
			g := NewDecoder()
			want := make([]byte, 3*p.OutW*p.OutH)
			pg := p
			g.canvasWhole(want, &pg, src, layout)
			goCrop := make([]byte, len(want))
			pg = p
			g.resizeCanvasGo(goCrop, &pg, src, layout)
			g.Close()
			if !bytes.Equal(goCrop, want) {
				t.Fatalf("%s: Go, the crop made: %d bytes differ from the whole canvas'", name, diffCount(goCrop, want))
			}
			for _, simd := range levels {
				d := NewDecoder()
				knobsOf(d).SIMDMax = simd
				got := make([]byte, len(want))
				pf := p
				if !d.resizeCanvasFast(got, &pf, src, layout) {
					t.Fatalf("%s: the resampler refused it", name)
				}
				d.Close()
				if !bytes.Equal(got, want) {
					t.Fatalf("%s, simd %d: %d bytes differ from the Go canvas'", name, simd, diffCount(got, want))
				}
			}
		}
	}
}

func diffCount(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// canvasWhole is resizeCanvas as it was first written: the whole canvas
// made, the image put on it, the crop's columns reversed in place if
// p.preFlip, then the crop resized (resampleRGBA): the reference of
// TestExactCanvasFastIsGo.
func (d *Decoder) canvasWhole(dst []byte, p *transform.SamplePlan, src []byte, layout transform.Layout) {
	cw, ch, w, h := p.ZoomW, p.ZoomH, p.SrcW, p.SrcH
	n := 4 * cw * ch
	if cap(d.canvas) < n {
		d.canvas = make([]byte, n)
	}
	c, f := d.canvas[:n], p.RCFill
	for i := 0; i < n; i += 4 {
		c[i], c[i+1], c[i+2], c[i+3] = byte(f[0]), byte(f[1]), byte(f[2]), 255
	}
	plane := w * h
	for y := range h {
		row := c[4*((p.ZoomPad[1]+y)*cw+p.ZoomPad[0]):][:4*w]
		for x := range w {
			o := y*w + x
			if layout == transform.HWC {
				row[4*x], row[4*x+1], row[4*x+2] = src[3*o], src[3*o+1], src[3*o+2]
			} else {
				row[4*x], row[4*x+1], row[4*x+2] = src[o], src[plane+o], src[2*plane+o]
			}
		}
	}
	if p.PreFlip { // the crop's columns reversed, row by row
		for y := p.KY; y < p.KY+p.KH; y++ {
			row := c[4*(y*cw+p.KX):][:4*p.KW]
			for i, j := 0, p.KW-1; i < j; i, j = i+1, j-1 {
				a, b := row[4*i:4*i+4], row[4*j:4*j+4]
				a[0], a[1], a[2], b[0], b[1], b[2] = b[0], b[1], b[2], a[0], a[1], a[2]
			}
		}
	}
	cp := *p
	cp.Geom, cp.SrcW, cp.SrcH, cp.CX, cp.CY, cp.CW, cp.CH = transform.CropResize, cw, ch, p.KX, p.KY, p.KW, p.KH
	// The image's rows, from the crop's top: the others are the fill's.
	top := p.ZoomPad[1] - p.KY
	d.resampleRGBA(c[4*(p.KY*cw+p.KX):], 4*cw, &cp, layout, dst, top, top+h)
}
