package transform

// Floating point in this file: every product that is added or subtracted is
// wrapped in float64(...), which rounds it and so stops the compiler from
// fusing it into a multiply-add (the Go spec allows that, and arm64, ppc64,
// s390x, riscv64 and amd64 with GOAMD64=v3 do it): a plan must be the same
// on every machine.

import (
	"fmt"
	"math"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// SamplePlan is everything size-dependent or random about one sample: where
// its pixels come from, whether it is flipped, how its colors are jittered.
// It is a pure function of (transform, image size, key); both decode paths
// execute the same plan.
type SamplePlan struct {
	Geom geomKind
	// Source image size.
	SrcW, SrcH int
	// resizeCrop: the whole source is resized to rw x rh first.
	RW, RH int
	// The crop: of the source (cropResize) or of the resized image
	// (resizeCrop).
	CX, CY, CW, CH int
	OutW, OutH     int
	Flip           bool
	// The geometry op's filter, and whether it widens when downscaling.
	// A plan made by hand (tests) sets antialias for the default filter,
	// antialiased bilinear: false is torch's non-antialiased kernel.
	Interp    Interpolation
	Antialias bool
	// Exact: the transform decodes in DecodeExact (its default), so the
	// fast path decodes at full scale (dctScalable). A plan made by hand
	// (tests) leaves it false: the Decoder's DCT scaling applies.
	Exact bool
	// Padded: a CenterCrop larger than the image (or the resized image)
	// on a side, which torchvision pads with zeros (F.center_crop: left
	// and top (crop - size) // 2, the rest right and bottom). cx, cy, cw,
	// ch stay the crop as asked (the trace's center_crop); visible() is
	// what is decoded, and padL, padT where its top-left pixel goes in
	// the unflipped output.
	Padded     bool
	PadL, PadT int
	// RandomCrop: its padding (left, top, right, bottom, pad_if_needed's
	// included; a Pad before it is not in it), fill (a Pad's fill when
	// only the Pad pads), and whether it crops (the trace's pad and crop);
	// the part of the source that shows (vx, vy, vw, vh: vis, empty when
	// the crop is all padding) and where (padL, padT). A Pad then
	// CenterCrop is planned the same way (padCrop).
	rcPad  [4]int
	RCFill [3]float64
	// segPad: a PadIfSmaller's padding (right, bottom) of the resized
	// image, before the RandomCrop's (op_seg.go).
	segPad         [2]int
	rcCrop         bool
	RCTop, RCLeft  int
	Vis            bool
	vx, vy, VW, VH int
	// RandomZoomOut: zoomed when it was drawn (its p), zoomPad its padding
	// (left, top, right, bottom), the image on a canvas of zoomW x zoomH.
	// Before a RandomCrop or CenterCrop it is their padding (padCrop);
	// before a Resize, canvas: the canvas is resized (rw, rh the output),
	// which the decode makes from the image decoded at its own size
	// (visible) padded with rcFill into it (resizeCanvas).
	Zoomed       bool
	ZoomPad      [4]int
	ZoomW, ZoomH int
	Canvas       bool
	// KX, ky, kw, kh: the part of the canvas (zoomW x zoomH; the image
	// when not zoomed) a canvas plan resizes: all of it, or the IoU crop.
	KX, KY, KW, KH int
	// RandomIoUCrop: iou when it cropped (cx, cy, cw, ch: its crop of the
	// canvas), preFlip when the RandomHorizontalFlip before the Resize
	// was drawn; either with a zoom, or preFlip, makes a canvas plan.
	IoU, PreFlip bool
	// YOLO: a YOLO geometry's canvas plan (op_yolo.go): the image loaded at
	// ylw x ylh, letterboxed by ylb (ylbOn), warped by yp (ypOn) into
	// the output (cv2.warpPerspective with ypWarp, else cv2.warpAffine).
	YOLO, YLBOn, YPOn, YPWarp bool
	YLW, YLH                  int
	YLB                       cv.LetterBoxGeom
	YP                        cv.PerspectiveParams
	// PreCrop: a RandomResizedCrop before a resize of the whole image (a
	// trainer's before a vision-language processor: cropBefore): its box
	// of the source (PreCX, PreCY, PreCW, PreCH) resized to PreW x PreH
	// with PreInterp is the image the rest of the plan sees (ImageSize), a
	// canvas plan's, which Visible decodes.
	PreCrop                    bool
	PreCX, PreCY, PreCW, PreCH int
	PreW, PreH                 int
	PreInterp                  Interpolation
	PreAntialias               bool
}

// ImageSize is the size of the image the plan's geometry takes: its
// crop's before the geometry (PreCrop), else the source's.
func (p *SamplePlan) ImageSize() (w, h int) {
	if p.PreCrop {
		return p.PreW, p.PreH
	}
	return p.SrcW, p.SrcH
}

// Visible is the plan of what a padded plan decodes: the crop clipped to
// the image, output at its own size (a CenterCrop does not resample).
func (p *SamplePlan) Visible() SamplePlan {
	v := *p
	if p.Canvas { // the whole image, at its own size, unflipped
		v.Geom, v.CX, v.CY, v.CW, v.CH, v.OutW, v.OutH = CropResize, 0, 0, p.SrcW, p.SrcH, p.SrcW, p.SrcH
		v.Padded, v.Vis, v.Canvas, v.Flip, v.PreCrop = false, false, false, false, false
		if p.PreCrop { // the crop before the geometry, resized to its size
			v.CX, v.CY, v.CW, v.CH, v.OutW, v.OutH = p.PreCX, p.PreCY, p.PreCW, p.PreCH, p.PreW, p.PreH
			v.Interp, v.Antialias = p.PreInterp, p.PreAntialias
		}
		return v
	}
	if p.Vis {
		v.CX, v.CY, v.CW, v.CH, v.OutW, v.OutH = p.vx, p.vy, p.VW, p.VH, p.VW, p.VH
		if p.VW < 1 || p.VH < 1 { // all padding: decode one pixel, shown nowhere
			v.CX, v.CY, v.CW, v.CH, v.OutW, v.OutH = 0, 0, 1, 1, 1, 1
		}
		v.Padded, v.Vis = false, false
		return v
	}
	w, h := p.SrcW, p.SrcH
	if p.Geom == ResizeCrop {
		w, h = p.RW, p.RH
	}
	if p.CW > w {
		v.CX, v.CW, v.OutW = 0, w, w
	}
	if p.CH > h {
		v.CY, v.CH, v.OutH = 0, h, h
	}
	v.Padded = false
	return v
}

// PadAt is where the visible part's top-left pixel goes in the output:
// (padL, padT), or, flipped, the right padding's width from the left (the
// flip of the padded crop).
func (p *SamplePlan) PadAt() (x, y int) {
	x, y = p.PadL, p.PadT
	if p.Flip {
		vw := p.Visible().OutW
		x = p.OutW - vw - p.PadL
	}
	return x, y
}

// region is the fused form of a plan's geometry: the source rectangle box
// (fractional, source pixels) maps onto the output, and the resampling
// filter's support is clipped to the source rectangle [x0,x1) x [y0,y1).
type region struct {
	BX, BY, BW, BH float64
	X0, Y0, X1, Y1 int
}

// geomPlan computes a sample's geometry of a transform of one view (a
// view), its boxes not known. A CenterCrop larger than the image is
// padded with zeros, as torchvision pads it (samplePlan.padded).
func (t *Transform) geomPlan(srcW, srcH int, k det.Key) (SamplePlan, error) {
	return t.planBoxes(srcW, srcH, k, nil, nil)
}

// planBoxes is plan for a sample whose boxes are src (nil: none known;
// RandomIoUCrop draws against them), scratch the room it may use.
func (t *Transform) planBoxes(srcW, srcH int, k det.Key, src *targets.Targets, scratch *[][4]float32) (SamplePlan, error) {
	gw, gh := t.geomSize()
	p := SamplePlan{Geom: t.geom, SrcW: srcW, SrcH: srcH, OutW: gw, OutH: gh}
	bicubic := false
	if t.preCrop != nil { // the rest of the plan takes the crop for the image (op_smart.go)
		if err := t.planCrop(&p, k); err != nil {
			return p, err
		}
		srcW, srcH = p.PreW, p.PreH
	}
	if t.zoom != nil {
		t.zoomOut(&p, k)
	}
	switch {
	case t.whole, t.own: // the image at its own size (a rotation with expand=True first; none, under the job's bound)
		p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH = 0, 0, srcW, srcH, srcW, srcH
	case t.yolo != nil:
		t.yoloPlan(&p, k)
	case t.fixed != nil:
		if err := t.lsjPlan(&p, k); err != nil {
			return p, err
		}
	case t.seg != nil: // RandomResize, its flip, PadIfSmaller, RandomCrop (op_seg.go)
		if err := t.segPlan(&p, k); err != nil {
			return p, err
		}
	default: // torchvision's crops, pads and resizes, and the self-sized resizes (op_geometry.go)
		var err error
		if bicubic, err = t.cropPlan(&p, k, src, scratch, srcW, srcH); err != nil {
			return p, err
		}
	}
	if err := t.checkBound(&p); err != nil {
		return p, err
	}
	if err := t.geomInterp(&p); err != nil {
		return p, err
	}
	if bicubic {
		p.Interp = InterpBicubic
	}
	w, h := srcW, srcH
	if p.Geom == ResizeCrop {
		w, h = p.RW, p.RH
	}
	anyRes := onCanvas(t.resize) // its canvas path pads the resized canvas too (decode.go)
	if !p.Vis && (!p.Canvas || anyRes) && (p.CX < 0 || p.CY < 0 || p.CX+p.CW > w || p.CY+p.CH > h) {
		// Only a CenterCrop can pass the image (RandomResizedCrop's box is
		// inside it): torchvision pads it with zeros.
		if t.rrc != nil || (t.center == nil && !anyRes) {
			return p, fmt.Errorf("%w: image %dx%d: crop %d,%d %dx%d outside it", errs.Unsupported, srcW, srcH, p.CX, p.CY, p.CW, p.CH)
		}
		p.Padded = true
		if p.CW > w {
			p.PadL = (p.CW - w) / 2
		}
		if p.CH > h {
			p.PadT = (p.CH - h) / 2
		}
	}
	if t.padAfter != nil {
		if err := t.padCropped(&p); err != nil {
			return p, err
		}
	}
	if t.flip > 0 {
		r := k.Stream(streamFlip)
		p.Flip = r.Float64() < t.flip
	}
	return p, nil
}

// RRCParams is torchvision's RandomResizedCrop.get_params: ten tries at a
// random area and log-uniform aspect ratio, then a center crop fallback.
func RRCParams(r *det.RNG, W, H int, scale, ratio [2]float64) (x, y, w, h int) {
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

// ResizedSize is torchvision's Resize output size: (h, w) as given, or the
// shorter side set to size[0] and the longer scaled and truncated.
func ResizedSize(W, H int, size [2]int) (w, h int) {
	if size[1] > 0 {
		return size[1], size[0]
	}
	s := size[0]
	if W <= H {
		return s, int(float64(s) * float64(H) / float64(W))
	}
	return int(float64(s) * float64(W) / float64(H)), s
}

// CenterOffset is torchvision's CenterCrop offset: round((size-crop)/2),
// rounding half to even as Python does.
func CenterOffset(size, crop int) int {
	return int(math.RoundToEven(float64(size-crop) / 2))
}

// Region returns the plan's geometry as one resampling from the source.
func (p *SamplePlan) Region() region {
	if p.Geom == CropResize {
		return region{
			BX: float64(p.CX), BY: float64(p.CY), BW: float64(p.CW), BH: float64(p.CH),
			X0: p.CX, Y0: p.CY, X1: p.CX + p.CW, Y1: p.CY + p.CH,
		}
	}
	// Resize then crop: the crop of the resized image is a fractional box of
	// the source, and the filter may reach past it into the rest of the
	// image, as it does when the whole image is resized first. Clip the
	// support to what it can touch: the box plus the filter's radius.
	sx := float64(p.SrcW) / float64(p.RW)
	sy := float64(p.SrcH) / float64(p.RH)
	g := region{BX: float64(float64(p.CX) * sx), BY: float64(float64(p.CY) * sy), BW: float64(float64(p.CW) * sx), BH: float64(float64(p.CH) * sy)}
	mx, my := p.clipMargin(sx), p.clipMargin(sy)
	g.X0 = max(0, int(math.Floor(g.BX-mx)))
	g.Y0 = max(0, int(math.Floor(g.BY-my)))
	g.X1 = min(p.SrcW, int(math.Ceil(g.BX+g.BW+mx)))
	g.Y1 = min(p.SrcH, int(math.Ceil(g.BY+g.BH+my)))
	return g
}

// randomCrop is torchvision.transforms.v2's RandomCrop: the image padded
// (by a Pad before it, if any, then padding, then pad_if_needed's
// difference on both sides of a side still short of the crop), then a
// crop of Size at a uniform top, then left, where the padded image is
// larger. The plan decodes the part of the source inside the crop (a
// copy: no resampling) and pads it with the fill into place (padCrop).
func (t *Transform) randomCrop(p *SamplePlan, k det.Key) error {
	op := t.rcrop
	ch, cw := op.Size[0], op.Size[1]
	pre, _ := t.prePad(p) // the Pad's or the RandomZoomOut's
	pad, ph, pw := cropPadding(op, p.SrcH+pre[1]+pre[3], p.SrcW+pre[0]+pre[2])
	l, tp, r, b := pad[0], pad[1], pad[2], pad[3]
	if ph < ch || pw < cw {
		return fmt.Errorf("%w: image %dx%d, padded to %dx%d, is smaller than the %dx%d crop (RandomCrop: pad_if_needed=True pads it, as torchvision's)",
			errs.Unsupported, p.SrcW, p.SrcH, pw, ph, cw, ch)
	}
	top, left := cropAt(k.Stream(StreamCrop), ph, pw, ch, cw)
	p.rcPad, p.RCFill, p.rcCrop, p.RCTop, p.RCLeft = [4]int{l, tp, r, b}, optab.FillOf(op).Fill, ph > ch || pw > cw, top, left
	if _, fill := t.prePad(p); (t.pad != nil || p.Zoomed) && p.rcPad == [4]int{} {
		p.RCFill = fill // only the Pad or zoom pads (NewTransform: else the fills are equal)
	}
	p.padCrop(pre[0]+l, pre[1]+tp, cw, ch, top, left)
	return nil
}

// padCrop plans the crop of cw x ch at (top, left) of the source padded
// by l on the left and tp on the top (and enough on the right and bottom):
// a plain crop of the source when it is inside it, else the part of the
// source inside the crop (vis), padded into place with p.rcFill.
func (p *SamplePlan) padCrop(l, tp, cw, ch, top, left int) {
	p.cropWindow(p.SrcW, p.SrcH, left-l, top-tp, cw, ch) // the crop in source coordinates
}

// cropWindow plans the crop of cw x ch at (sx, sy) of a w x h image (the
// source, or the resized image of a resizeCrop plan), either of which may
// be negative: a plain crop when it is inside the image, else the part of
// the image inside the crop (vis), padded into place with p.rcFill.
func (p *SamplePlan) cropWindow(w, h, sx, sy, cw, ch int) {
	x0, y0 := max(sx, 0), max(sy, 0)
	x1, y1 := min(sx+cw, w), min(sy+ch, h)
	p.CX, p.CY, p.CW, p.CH = sx, sy, cw, ch
	if x0 == sx && y0 == sy && x1 == sx+cw && y1 == sy+ch {
		return // inside the image: a plain crop
	}
	p.Padded, p.Vis = true, true
	p.vx, p.vy, p.VW, p.VH = x0, y0, max(x1-x0, 0), max(y1-y0, 0)
	p.PadL, p.PadT = x0-sx, y0-sy
}

// padCropped is a Pad after a RandomCrop or CenterCrop (no resampling):
// the part of the image the crop shows, where it shows it, moved by the
// Pad's left and top padding into the larger output, the rest the Pad's
// fill. One fill per sample: a crop that padded with another fill (a
// RandomCrop's, a CenterCrop's zeros) is refused.
func (t *Transform) padCropped(p *SamplePlan) error {
	op := t.padAfter
	if !p.Vis {
		// A plain crop, or a CenterCrop past the image on a side (padded,
		// padL or padT set): what of the image it shows.
		x0, y0, x1, y1 := p.CX, p.CY, p.CX+p.CW, p.CY+p.CH
		if p.CW > p.SrcW {
			x0, x1 = 0, p.SrcW
		}
		if p.CH > p.SrcH {
			y0, y1 = 0, p.SrcH
		}
		p.vx, p.vy, p.VW, p.VH = x0, y0, x1-x0, y1-y0
	}
	pa := optab.ArgsOf[PadArgs](op)
	if p.Padded && p.RCFill != pa.Fill {
		return fmt.Errorf("%w: image %dx%d: the %dx%d crop pads it with %v, then Pad with %v: two fills in one sample are not supported (give both the same fill; a CenterCrop's is 0)",
			errs.Unsupported, p.SrcW, p.SrcH, p.CW, p.CH, p.RCFill, pa.Fill)
	}
	p.Padded, p.Vis, p.RCFill = true, true, pa.Fill
	pd := pa.Padding
	p.PadL, p.PadT = p.PadL+pd[0], p.PadT+pd[1]
	return nil
}

// padCenterCrop is torchvision's pad (a Pad's constant fill) then
// center_crop of the padded image, which pads a side shorter than the
// crop with zeros ((crop - size) // 2 before) and crops the rest at
// round((size - crop) / 2). One fill per sample: a crop larger than the
// padded image after a Pad of a fill other than 0 is refused.
func (t *Transform) padCenterCrop(p *SamplePlan) error {
	pad, fill := t.prePad(p)
	ch, cw := t.center.Size[0], t.center.Size[1]
	ph, pw := p.SrcH+pad[1]+pad[3], p.SrcW+pad[0]+pad[2]
	if (ch > ph || cw > pw) && fill != [3]float64{} {
		name := "Pad"
		if t.zoom != nil {
			name = "RandomZoomOut"
		}
		return fmt.Errorf("%w: image %dx%d, padded by %s to %dx%d, is smaller than the %dx%d CenterCrop, which pads it with zeros: "+
			"%s's fill %v and CenterCrop's zeros in one sample are not supported (%s with fill 0, or pad more)",
			errs.Unsupported, p.SrcW, p.SrcH, name, pw, ph, cw, ch, name, fill, name)
	}
	anchor := func(size, crop int) int {
		if crop > size {
			return -((crop - size) / 2)
		}
		return CenterOffset(size, crop)
	}
	p.RCFill = fill
	p.padCrop(pad[0], pad[1], cw, ch, anchor(ph, ch), anchor(pw, cw))
	return nil
}

// cropPadding is a RandomCrop's padding of an image of h x w (after any
// padding before it): its padding, then pad_if_needed's difference on
// both sides of a side still short of the crop, as torchvision's
// make_params; and the padded size.
func cropPadding(op *optab.Op, h, w int) (pad [4]int, ph, pw int) {
	ch, cw := op.Size[0], op.Size[1]
	ca := optab.ArgsOf[RandomCropArgs](op)
	l, tp, r, b := ca.Padding[0], ca.Padding[1], ca.Padding[2], ca.Padding[3]
	ph, pw = h+tp+b, w+l+r
	if ca.PadIfNeeded {
		if ph < ch {
			d := ch - ph
			tp, b, ph = tp+d, b+d, ph+2*d
		}
		if pw < cw {
			d := cw - pw
			l, r, pw = l+d, r+d, pw+2*d
		}
	}
	return [4]int{l, tp, r, b}, ph, pw
}

// cropAt draws a RandomCrop's top, then left, uniform where the padded
// ph x pw image is larger than the ch x cw crop (torch.randint's).
func cropAt(rng det.RNG, ph, pw, ch, cw int) (top, left int) {
	if ph > ch {
		top = rng.Intn(ph - ch + 1)
	}
	if pw > cw {
		left = rng.Intn(pw - cw + 1)
	}
	return top, left
}

// Interpolation is the resampling filter of the geometry op (RandomResizedCrop,
// Resize) and of rotate and affine: kernels.Interpolation, whose doc says
// each one's semantics.
type Interpolation = kernels.Interpolation

// The interpolations. The zero value is bilinear, torchvision's default.
const (
	InterpBilinear = kernels.Bilinear
	InterpNearest  = kernels.Nearest
	InterpBicubic  = kernels.Bicubic
)

// ParseInterpolation parses torchvision's name of an interpolation
// ("nearest", "bilinear", "bicubic"; case-insensitive): fn's.
func ParseInterpolation(s string) (Interpolation, error) { return fn.ParseInterpolation(s) }

// geomInterp sets the plan's filter from its geometry op: RandomResizedCrop,
// else Resize (which a CenterCrop after it follows), else CenterCrop, which
// does not resample. Antialias is off for nearest, as torchvision has it.
func (t *Transform) geomInterp(p *SamplePlan) error {
	op := t.center
	switch {
	case t.yolo != nil, t.whole, t.own, t.iou != nil && t.resize == nil: // the image (or a crop) at its own size: no resampling
		p.Interp, p.Antialias = InterpBilinear, true
		return nil
	case t.seg != nil: // RandomResize resamples, the crop copies
		op = t.resize
	case t.rcrop != nil:
		op = t.rcrop
	case t.rrc != nil:
		op = t.rrc
	case t.resize != nil:
		op = t.resize
	case t.fixed != nil:
		op = t.fixed // its crop copies pixels
		if t.jitter != nil {
			op = t.jitter
		}
	}
	rs := optab.ResamplingOf(op)
	if !rs.Interp.Valid() {
		return fmt.Errorf("%w: transform: %s interpolation %d: want bilinear, nearest or bicubic", errs.Unsupported, op.Kind, rs.Interp)
	}
	p.Interp, p.Antialias = rs.Interp, rs.Antialiased()
	return nil
}

// DCTScalable reports whether the plan may decode at a DCT scale: only when
// its transform asks for DecodeFast (the default, DecodeExact, decodes at
// full scale, as torchvision does). A scaled IDCT averages pixels, a
// low-pass: right before an antialiased filter, wrong before nearest
// (which must pick pixels) or a filter that is not widened (torch's
// non-antialiased kernels alias, and are asked for as such).
func (p *SamplePlan) DCTScalable() bool { return !p.Exact && p.Antialias }

// Spans returns the plan's geometry as torch computes it: crop then resize
// (resized_crop), or resize the whole image then crop (resize,
// center_crop).
func (p *SamplePlan) Spans() (x, y fn.Span) {
	if p.Geom == CropResize {
		return fn.Span{Base: p.CX, In: p.CW, Out: p.OutW, N: p.OutW}, fn.Span{Base: p.CY, In: p.CH, Out: p.OutH, N: p.OutH}
	}
	return fn.Span{In: p.SrcW, Out: p.RW, Off: p.CX, N: p.OutW}, fn.Span{In: p.SrcH, Out: p.RH, Off: p.CY, N: p.OutH}
}

// clipMargin is how far, in source pixels, the plan's filter reaches past a
// box whose side is s times its output's: the radius of the support plus
// one pixel of slack for rounding (bilinear's support is 1, bicubic's 2,
// widened by s when antialiased and s > 1).
func (p *SamplePlan) clipMargin(s float64) float64 {
	if p.Interp == InterpBicubic {
		return 2*math.Max(s, 1) + 1
	}
	return math.Max(s, 1) + 1
}
