package pipeline

// Floating point in this file: as in plan.go, every product that is added
// or subtracted is wrapped in float64(...), so that the compiler does not
// fuse it into a multiply-add: the weights must be the same doubles as
// torch's and turbo.c's on every machine.

import (
	"image"
	"math"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// resampleTorch is the reference path's resampling, every filter: torch's
// uint8 kernels, the horizontal pass first and rounded to 8 bits, then the
// vertical. src holds the spans' source
// pixels from its origin (the crop, or the whole image); the output is
// flipped if the plan says so and packed into out.
func resampleTorch(src *image.NRGBA, p *samplePlan, layout Layout, out []byte) {
	sx, sy := p.spans()
	ax, ay := fn.NewTorchAxis(sx, p.interp, p.antialias), fn.NewTorchAxis(sy, p.interp, p.antialias)
	w, h := p.outW, p.outH
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
			if p.flip {
				ox = w - 1 - x
			}
			for c := range 3 {
				v := ay.Sum(y, func(j int) byte { return mid[((j-y0)*w+x)*3+c] })
				if layout == HWC {
					out[3*(y*w+ox)+c] = v
				} else {
					out[c*plane+y*w+ox] = v
				}
			}
		}
	}
}
