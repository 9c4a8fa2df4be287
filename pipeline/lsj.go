package pipeline

// Large-scale jitter (the Copy-Paste paper's LSJ, torchvision's detection
// references' "lsj" recipe): ScaleJitter then FixedSizeCrop, fused into
// the decode. Drawn in float32 as torch.rand and its products with Python
// numbers are: every product rounded to float32 before it is used.

import (
	"fmt"
)

const (
	// OpScaleJitter is torchvision.transforms.v2's ScaleJitter: the image
	// resized by min(Size[0]/h, Size[1]/w) (Size the target_size as
	// (height, width)) times a scale uniform in Scale (scale_range), each
	// side truncated; Interp and NoAntialias its resampling. A geometry
	// op, first, then FixedSizeCrop.
	OpScaleJitter OpKind = "ScaleJitter"
	// OpFixedSizeCrop is torchvision's FixedSizeCrop (its detection
	// references' and prototype transforms'): a crop of at most Size
	// (height, width) at one uniform r (top int((h - height) * r), left
	// int((w - width) * r) where the image is larger), padded on the right
	// and bottom with Fill to Size; the target boxes it leaves empty are
	// dropped with their labels. A geometry op: first, or after a
	// ScaleJitter.
	OpFixedSizeCrop OpKind = "FixedSizeCrop"
)

// maxJitter bounds ScaleJitter's scale_range: at most 16 times the target
// size (torchvision's default is (0.1, 2)).
const maxJitter = 16

// lsjGeometry parses t's geometry when it starts with a ScaleJitter or a
// FixedSizeCrop (t.jitter, t.fixed, the output size) and returns how many
// ops it has (0: another geometry).
func (t *Transform) lsjGeometry() (int, error) {
	bad := func(format string, a ...any) (int, error) {
		return 0, fmt.Errorf("%w: transform: %s", ErrUnsupported, fmt.Sprintf(format, a...))
	}
	n := 0
	if n < len(t.ops) && t.ops[n].Kind == OpScaleJitter {
		op := &t.ops[n]
		if err := checkSize(op, false); err != nil {
			return 0, err
		}
		if s := op.Scale; !(s[0] > 0 && s[0] <= s[1] && s[1] <= maxJitter) {
			return bad("ScaleJitter scale_range %v: want 0 < min <= max <= %d", s, maxJitter)
		}
		if err := checkInterp(op, true); err != nil {
			return 0, err
		}
		t.jitter, n = op, n+1
		if n == len(t.ops) || t.ops[n].Kind != OpFixedSizeCrop {
			return bad("ScaleJitter gives a size that varies per image: follow it with FixedSizeCrop, which fixes the batch's size")
		}
	}
	if n < len(t.ops) && t.ops[n].Kind == OpFixedSizeCrop {
		op := &t.ops[n]
		if err := checkSize(op, false); err != nil {
			return 0, err
		}
		if err := checkPadding(op); err != nil {
			return 0, err
		}
		t.fixed, n = op, n+1
		t.geom, t.outH, t.outW = cropResize, op.Size[0], op.Size[1]
		if t.jitter != nil {
			t.geom = resizeCrop
		}
		if n < len(t.ops) && (geometryKind(t.ops[n].Kind) || t.ops[n].Kind == OpScaleJitter || t.ops[n].Kind == OpFixedSizeCrop) {
			return bad("op %d (%s) after FixedSizeCrop is not supported: the geometry is ScaleJitter (if any) then FixedSizeCrop", n, t.ops[n].Kind)
		}
	}
	return n, nil
}

// jitterSize is ScaleJitter.make_params for a w x h image: the scale
// lo + u * (hi - lo) (u a 24-bit uniform, in float32 as torch.rand's
// tensor), r = float32(min(tH / h, tW / w)) * scale, each side
// int(side * r) in float32.
func jitterSize(r *RNG, op *Op, w, h int) (nw, nh int) {
	u := r.Float32()
	lo, hi := op.Scale[0], op.Scale[1]
	scale := float32(lo) + float32(u*float32(hi-lo))
	base := min(float64(op.Size[0])/float64(h), float64(op.Size[1])/float64(w))
	f := float32(float32(base) * scale)
	return int(float32(float32(w) * f)), int(float32(float32(h) * f))
}

// fixedOffset is FixedSizeCrop's draw on a w x h image: one uniform r,
// top int((h - height) * r) and left int((w - width) * r) in float32
// where the image is larger (0 where it is not).
func fixedOffset(r *RNG, op *Op, w, h int) (top, left int) {
	u := r.Float32()
	return int(float32(float32(max(h-op.Size[0], 0)) * u)), int(float32(float32(max(w-op.Size[1], 0)) * u))
}

// lsjPlan plans ScaleJitter (if any) and FixedSizeCrop: the image resized
// to rw x rh (resizeCrop; not resized: cropResize), its window at (cx, cy)
// of at most the crop's size decoded, padded on the right and bottom with
// the fill (padded, vis) where it is smaller than the crop. Each op draws
// from a stream of its own.
func (t *Transform) lsjPlan(p *samplePlan, k Key) error {
	w, h := p.srcW, p.srcH
	if t.jitter != nil {
		r := k.Stream(streamCrop)
		w, h = jitterSize(&r, t.jitter, p.srcW, p.srcH)
		if w < 1 || h < 1 {
			return fmt.Errorf("%w: ScaleJitter resizes the %dx%d image to %dx%d: a side of 0 pixels (torchvision's resize fails too)",
				ErrUnsupported, p.srcW, p.srcH, w, h)
		}
		p.rw, p.rh = w, h // at most maxSide * maxJitter a side
	}
	r := k.Stream(streamFixed)
	top, left := fixedOffset(&r, t.fixed, w, h)
	ch, cw := t.fixed.Size[0], t.fixed.Size[1]
	p.cx, p.cy, p.cw, p.ch = left, top, cw, ch
	p.rcFill = t.fixed.Fill
	if w < cw || h < ch { // padded on the right and bottom
		p.padded, p.vis = true, true
		p.vx, p.vy, p.vw, p.vh = left, top, min(w, cw), min(h, ch)
		p.padL, p.padT = 0, 0
	}
	return nil
}

// streamFixed is FixedSizeCrop's RNG stream: a child of the geometry's, as
// streamZoom, so that a ScaleJitter before it keeps stream 1.
const streamFixed = streamCrop*64 + 4

// lsjSteps are the plan's ScaleJitter and FixedSizeCrop as functional
// ops: resize to the drawn size, then fixed_size_crop.
func (t *Transform) lsjSteps(p *samplePlan, buf []Step) []Step {
	w, h := p.srcW, p.srcH
	if t.jitter != nil {
		st := Step{Fn: FnResize, Interp: p.interp, Antialias: p.antialias, I: [6]int{4: p.rh, 5: p.rw}}
		buf = append(buf, st)
		w, h = p.rw, p.rh
	}
	ch, cw := t.fixed.Size[0], t.fixed.Size[1]
	return append(buf, Step{Fn: FnFixedSizeCrop, I: [6]int{p.cy, p.cx, min(h, ch), min(w, cw), ch, cw}, Fill: t.fixed.Fill})
}
