//go:build cgo

package pipeline

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// decodeFormatViews decodes a PNG through libpng or a WebP through libwebp
// (formats.c) and writes each plan's view into out at offs[v], as
// decodeFastViews does a JPEG: the same job, the same resampler, the rows
// handed to it as they are decoded, at full scale.
func (d *Decoder) decodeFormatViews(data []byte, hd *header, ps []transform.SamplePlan, layout transform.Layout, out []byte, offs []int) error {
	f := &d.fast
	if err := f.open(); err != nil {
		return err
	}
	if len(ps) < 1 || len(ps) > codec.MaxViews || len(offs) != len(ps) {
		return fmt.Errorf("%w: fast path: %d views at %d offsets: want 1..%d", errs.Unsupported, len(ps), len(offs), codec.MaxViews)
	}
	for v := range ps {
		if n := 3 * ps[v].OutW * ps[v].OutH; len(data) == 0 || offs[v] < 0 || offs[v]+n > len(out) {
			return fmt.Errorf("%w: fast path: %d input bytes, %d output bytes for view %d of %dx%d at %d", errs.Unsupported, len(data), len(out), v, ps[v].OutW, ps[v].OutH, offs[v])
		}
	}
	f.setJob(&d.opts, hd, ps, offs, len(out), layout, d.knobs())
	var rc codec.Code
	if hd.format == formatPNG {
		rc = f.s.DecodePNG(data, out, d.ops.Stop)
	} else {
		rc = f.s.DecodeWebP(data, out, d.ops.Stop)
	}
	if d.ops.Stopped() {
		// Rows put after the flag was set were skipped: whatever rc
		// says, the output is not the sample.
		return ops.ErrAbandoned
	}
	return f.s.Err(rc)
}

// resizeCanvasFast is resizeCanvas through the resampler (formats.c's
// stoker_canvas, torch's kernels as resizeCanvasGo's): the crop kx, ky,
// kw, kh of the canvas is the view's source, made a row at a time where
// the taps read it. False, having written nothing, when C cannot (its
// scratch out of memory): resizeCanvasGo then.
func (d *Decoder) resizeCanvasFast(dst []byte, p *transform.SamplePlan, src []byte, layout transform.Layout) bool {
	f := &d.fast
	w, h := p.ImageSize()
	if f.open() != nil || len(dst) == 0 || len(src) < 3*w*h {
		return false
	}
	cp := *p
	cp.Geom, cp.SrcW, cp.SrcH, cp.CX, cp.CY, cp.CW, cp.CH = transform.CropResize, p.KW, p.KH, 0, 0, p.KW, p.KH
	ps := [1]transform.SamplePlan{cp}
	f.setJob(&d.opts, &header{w: p.KW, h: p.KH, comps: 3}, ps[:], canvasOff[:], len(dst), layout, d.knobs())
	rc := f.s.Canvas(src, w, h, layout == transform.HWC, p.ZoomPad[0]-p.KX, p.ZoomPad[1]-p.KY, p.PreFlip,
		[3]byte{byte(p.RCFill[0]), byte(p.RCFill[1]), byte(p.RCFill[2])}, dst)
	return rc == codec.OK
}

// canvasOff is resizeCanvasFast's one view's offset.
var canvasOff = [1]int{0}
