package pipeline

import (
	"encoding/json"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// A trace is what a sample's ops drew, as JSON in torchvision's words: a
// list of [name, {argument: value}] pairs, one per functional op applied,
// in order, geometry first, e.g.
//
//	[["resized_crop", {"top": 10, "left": 4, "height": 180, "width": 200,
//	  "size": [224, 224], "interpolation": "bilinear", "antialias": true}],
//	 ["horizontal_flip", {}], ["adjust_hue", {"hue_factor": 0.042}]]
//
// Each pair calls torchvision.transforms.v2.functional.<name>(img, **args)
// (a fill is a list of per-channel values or null for None, a center null
// for the image's center, erase's "v" a list of per-channel values or
// "random" for noise),
// which is how the parity tests replay it. timm's solarize_add and AugMix's
// augmix_begin / augmix_chain / augmix_end have no torchvision functional:
// docs/transforms.md says what they do.

// AppendTrace appends steps' trace, a JSON list, to b.
func AppendTrace(b []byte, steps []Step) []byte {
	b = append(b, '[')
	for i := range steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = steps[i].AppendJSON(b)
	}
	return append(b, ']')
}

// ParseTrace parses a trace (AppendTrace's JSON) back into steps. It is
// the input of `stoker ops apply` and of tests; it checks names and
// argument shapes, not ranges (the kernels' callers do that).
func ParseTrace(data []byte) ([]Step, error) {
	var pairs [][2]json.RawMessage
	if err := json.Unmarshal(data, &pairs); err != nil {
		return nil, fmt.Errorf("%w: trace: %v", ErrUnsupported, err)
	}
	steps := make([]Step, 0, len(pairs))
	for i, p := range pairs {
		st, err := fn.ParseStep(p)
		if err != nil {
			return nil, fmt.Errorf("%w: trace step %d: %v", ErrUnsupported, i, err)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// geometrySteps are the plan's geometry as functional ops: resized_crop
// (RandomResizedCrop), resize and center_crop (Resize, CenterCrop), then
// horizontal_flip when a fused flip drew one.
func (t *Transform) geometrySteps(p *samplePlan, buf []Step) []Step {
	aa := func(op *Op) Step {
		return Step{Interp: op.Interp, Antialias: !op.NoAntialias && op.Interp != InterpNearest}
	}
	if p.zoomed { // RandomZoomOut: torchvision's pad of its drawn padding
		zp := p.zoomPad
		buf = append(buf, Step{Fn: FnPad, I: [6]int{zp[0], zp[1], zp[2], zp[3]}, Fill: t.zoom.Fill, MaskFill: t.zoom.maskFill()})
	}
	switch {
	case t.yolo != nil:
		buf = t.yoloSteps(p, buf)
	case t.fixed != nil:
		buf = t.lsjSteps(p, buf)
	case t.iou != nil:
		if p.iou {
			buf = append(buf, Step{Fn: FnIoUCrop, I: [6]int{p.cy, p.cx, p.ch, p.cw}})
		}
		for _, st := range t.iouMid {
			if st.Fn != FnHorizontalFlip || p.preFlip {
				buf = append(buf, st)
			}
		}
		st := aa(t.resize)
		st.Fn, st.I = FnResize, [6]int{4: p.outH, 5: p.outW}
		buf = append(buf, st)
	case t.rcrop != nil:
		if t.pad != nil {
			buf = append(buf, padStep(t.pad))
		}
		if p.rcPad != [4]int{} {
			buf = append(buf, Step{Fn: FnPad, I: [6]int{p.rcPad[0], p.rcPad[1], p.rcPad[2], p.rcPad[3]}, Fill: p.rcFill, MaskFill: t.rcrop.maskFill()})
		}
		if p.rcCrop {
			buf = append(buf, Step{Fn: FnCrop, I: [6]int{p.rcTop, p.rcLeft, t.rcrop.Size[0], t.rcrop.Size[1]}})
		}
	case t.rrc != nil:
		// The plan's filter: RandomInterp draws it per sample.
		st := Step{Interp: p.interp, Antialias: p.antialias}
		st.Fn, st.I = FnResizedCrop, [6]int{p.cy, p.cx, p.ch, p.cw, p.outH, p.outW}
		buf = append(buf, st)
	default:
		if t.resize != nil {
			st := aa(t.resize)
			st.Fn, st.I = FnResize, [6]int{4: p.rh, 5: p.rw}
			buf = append(buf, st)
		}
		if t.pad != nil {
			buf = append(buf, padStep(t.pad))
		}
		if t.center != nil {
			buf = append(buf, Step{Fn: FnCenterCrop, I: [6]int{4: p.ch, 5: p.cw}})
		}
	}
	if t.padAfter != nil {
		buf = append(buf, padStep(t.padAfter))
	}
	if p.flip {
		buf = append(buf, Step{Fn: FnHorizontalFlip})
	}
	return buf
}

// padStep is a Pad's step: torchvision's pad with its padding and fill.
func padStep(op *Op) Step {
	pd := op.Padding
	return Step{Fn: FnPad, I: [6]int{pd[0], pd[1], pd[2], pd[3]}, Fill: op.Fill, MaskFill: op.maskFill()}
}

// AppendTrace appends the trace of the last sample d decoded with t (a
// JSON list of [op, {arguments}] pairs: see AppendTrace) to b; of a
// transform of several views, a JSON list of each view's, in order. It is
// only meaningful after a Decode that succeeded.
func (d *Decoder) AppendTrace(b []byte, t *Transform) []byte {
	if t = t.AtEpoch(d.epoch); t.views == nil {
		return d.vd[0].appendTrace(b, t)
	}
	b = append(b, '[')
	for v := range t.views {
		if v > 0 {
			b = append(b, ',')
		}
		b = d.vd[v].appendTrace(b, t.views[v])
	}
	return append(b, ']')
}

// appendTrace appends one view's trace, as drawn for t, to b.
func (vd *viewDraw) appendTrace(b []byte, t *Transform) []byte {
	var geo [6]Step
	b = append(b, '[')
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	for _, st := range vd.pre {
		sep()
		b = st.AppendJSON(b)
	}
	geom := t.geometrySteps(&vd.plan, geo[:0])
	if vd.multi != nil { // a Mosaic's sample: its entries are its geometry
		sep()
		b, geom = vd.multi.appendJSON(b), nil
	}
	for _, st := range geom {
		sep()
		b = st.AppendJSON(b)
	}
	for i := range vd.steps {
		sep()
		b = vd.steps[i].AppendJSON(b)
	}
	if t.norm != nil {
		sep()
		st := Step{Fn: FnNormalize}
		copy(st.F[:3], t.norm.Mean[:])
		copy(st.F[3:], t.norm.Std[:])
		b = st.AppendJSON(b)
	}
	return append(b, ']')
}

// maxStepJSON bounds one step's JSON: the longest, affine's, with every
// number at its longest (24 bytes), is under 380 (TestStepJSONBound).
const maxStepJSON = 400

// MaxTraceBytes bounds one sample's trace: its geometry (two steps and a
// flip), the steps its ops may draw, and a normalize; of several views,
// every view's and the list around them.
func (t *Transform) MaxTraceBytes() int {
	if t.views == nil {
		n := (t.maxSteps+4)*maxStepJSON + 2
		if t.mosaic != nil { // its entry, and a MixUp's (the partner's mosaic and warp)
			n += 3 * maxStepJSON
		}
		if t.cutmix != nil { // a CutMix's: its partner's, and its areas
			n += 4 * maxStepJSON
		}
		if t.copyPasteMix != nil { // a CopyPaste's in mixup mode: its partner's, for each pre_transform
			n += 9 * maxStepJSON
		}
		return n
	}
	n := 2
	for _, v := range t.views {
		n += v.MaxTraceBytes() + 1
	}
	return n
}
