package transform

import (
	"encoding/json"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
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
func AppendTrace(b []byte, steps []fn.Step) []byte {
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
func ParseTrace(data []byte) ([]fn.Step, error) {
	var pairs [][2]json.RawMessage
	if err := json.Unmarshal(data, &pairs); err != nil {
		return nil, fmt.Errorf("%w: trace: %v", errs.Unsupported, err)
	}
	steps := make([]fn.Step, 0, len(pairs))
	for i, p := range pairs {
		st, err := fn.ParseStep(p)
		if err != nil {
			return nil, fmt.Errorf("%w: trace step %d: %v", errs.Unsupported, i, err)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// PreCropStep is the step of p's crop before the geometry (PreCrop:
// torchvision's resized_crop, which the trace shows before the ops that
// run on the crop), ok false for none.
func (p *SamplePlan) PreCropStep() (st fn.Step, ok bool) {
	if !p.PreCrop {
		return st, false
	}
	st = fn.Step{Fn: fn.ResizedCrop, I: [6]int{p.PreCY, p.PreCX, p.PreCH, p.PreCW, p.PreH, p.PreW}, Interp: p.PreInterp, Antialias: p.PreAntialias}
	return st, true
}

// geometrySteps are the plan's geometry as functional ops: resized_crop
// (RandomResizedCrop), resize and center_crop (Resize, CenterCrop), then
// horizontal_flip when a fused flip drew one.
func (t *Transform) geometrySteps(p *SamplePlan, buf []fn.Step) []fn.Step {
	aa := func(op *optab.Op) fn.Step {
		rs := optab.ResamplingOf(op)
		return fn.Step{Interp: rs.Interp, Antialias: rs.Antialiased()}
	}
	if p.Zoomed { // RandomZoomOut: torchvision's pad of its drawn padding
		zp := p.ZoomPad
		buf = append(buf, fn.Step{Fn: fn.Pad, I: [6]int{zp[0], zp[1], zp[2], zp[3]}, Fill: optab.FillOf(t.zoom).Fill, MaskFill: maskFill(t.zoom)})
	}
	switch {
	case t.yolo != nil:
		buf = t.yoloSteps(p, buf)
	case t.fixed != nil:
		buf = t.lsjSteps(p, buf)
	case t.seg != nil:
		buf = t.segSteps(p, buf)
		if t.seg.flip != nil {
			return buf // the plan's flip is the one before the padding, traced there
		}
	case t.iou != nil:
		if p.IoU {
			buf = append(buf, fn.Step{Fn: fn.IoUCrop, I: [6]int{p.CY, p.CX, p.CH, p.CW}})
		}
		for _, st := range t.iouMid {
			if st.Fn != fn.HorizontalFlip || p.PreFlip {
				buf = append(buf, st)
			}
		}
		if t.resize != nil { // else the crop at its own size, under the job's bound
			st := aa(t.resize)
			st.Fn, st.I = fn.Resize, [6]int{4: p.OutH, 5: p.OutW}
			buf = append(buf, st)
		}
	case t.rcrop != nil:
		if t.pad != nil {
			buf = append(buf, padStep(t.pad))
		}
		if p.rcPad != [4]int{} {
			buf = append(buf, fn.Step{Fn: fn.Pad, I: [6]int{p.rcPad[0], p.rcPad[1], p.rcPad[2], p.rcPad[3]}, Fill: p.RCFill, MaskFill: maskFill(t.rcrop)})
		}
		if p.rcCrop {
			buf = append(buf, fn.Step{Fn: fn.Crop, I: [6]int{p.RCTop, p.RCLeft, t.rcrop.Size[0], t.rcrop.Size[1]}})
		}
	case t.rrc != nil:
		// The plan's filter: RandomInterp draws it per sample.
		st := fn.Step{Interp: p.Interp, Antialias: p.Antialias}
		st.Fn, st.I = fn.ResizedCrop, [6]int{p.CY, p.CX, p.CH, p.CW, p.OutH, p.OutW}
		buf = append(buf, st)
	default:
		if t.resize != nil {
			st := aa(t.resize)
			st.Fn, st.I = fn.Resize, [6]int{4: p.RH, 5: p.RW}
			buf = append(buf, st)
		}
		if t.pad != nil {
			buf = append(buf, padStep(t.pad))
		}
		if t.center != nil {
			buf = append(buf, fn.Step{Fn: fn.CenterCrop, I: [6]int{4: p.CH, 5: p.CW}})
		}
	}
	if t.padAfter != nil {
		buf = append(buf, padStep(t.padAfter))
	}
	if p.Flip {
		buf = append(buf, fn.Step{Fn: fn.HorizontalFlip})
	}
	return buf
}

// padStep is a Pad's step: torchvision's pad with its padding and fill.
func padStep(op *optab.Op) fn.Step {
	pd := optab.ArgsOf[PadArgs](op).Padding
	return fn.Step{Fn: fn.Pad, I: [6]int{pd[0], pd[1], pd[2], pd[3]}, Fill: optab.FillOf(op).Fill, MaskFill: maskFill(op)}
}

// MaxStepJSON bounds one step's JSON: the longest, affine's, with every
// number at its longest (24 bytes), is under 380 (TestStepJSONBound).
const MaxStepJSON = 400

// MaxTraceBytes bounds one sample's trace: its geometry (two steps and a
// flip), the steps its ops may draw, and a normalize; of several views,
// every view's and the list around them.
func (t *Transform) MaxTraceBytes() int {
	if t.views == nil {
		n := (t.maxSteps+4)*MaxStepJSON + 2
		if t.seg != nil { // its resize, flip, two pads and crop
			n += 2 * MaxStepJSON
		}
		if t.mosaic != nil { // its entry, and a MixUp's (the partner's mosaic and warp)
			n += 3 * MaxStepJSON
		}
		if t.cutmix != nil { // a CutMix's: its partner's, and its areas
			n += 4 * MaxStepJSON
		}
		if t.copyPasteMix != nil { // a CopyPaste's in mixup mode: its partner's, for each pre_transform
			n += 9 * MaxStepJSON
		}
		return n
	}
	n := 2
	for _, v := range t.views {
		n += v.MaxTraceBytes() + 1
	}
	return n
}

// drawStepsFor appends to buf the steps t's ops after the geometry draw for
// key k, in the order they run, and returns it.
func (t *Transform) drawStepsFor(k det.Key, buf []fn.Step) []fn.Step {
	return t.drawStepsAt(k, t.outW, t.outH, buf)
}

// drawStepsAt is drawSteps for a sample of w x h (its own size, of a
// transform of per-sample sizes).
func (t *Transform) drawStepsAt(k det.Key, w, h int, buf []fn.Step) []fn.Step {
	return t.drawInto(new(optab.Drawer), k, w, h, buf)
}

// drawInto is drawStepsAt with the caller's drawer d, reused.
func (t *Transform) drawInto(d *optab.Drawer, k det.Key, w, h int, buf []fn.Step) []fn.Step {
	*d = optab.Drawer{K: k, W: w, H: h, Steps: buf}
	for i := range t.post {
		t.post[i].Draw(d)
	}
	steps := d.Steps
	d.Steps = nil
	return steps
}

// Trace is the trace a w x h source image would get for key k, drawn
// without decoding anything (what `stoker ops draw` prints, and what the
// sampling tests count): the plan's geometry, the steps, normalize (of
// several views, each view's); a multi-image op's entries for a sample it
// makes of the image and itself as its partners (TraceSet of one).
func (t *Transform) Trace(srcW, srcH int, k det.Key) ([]byte, error) {
	return t.TraceBoxes(srcW, srcH, k, nil)
}

// TraceBoxes is Trace for a source whose boxes (XYXY, in its pixels) are
// boxes: what a RandomIoUCrop, a CopyPaste or a CutMix draws against
// (nil: none, and a transform with one fails).
func (t *Transform) TraceBoxes(srcW, srcH int, k det.Key, boxes [][4]float32) ([]byte, error) {
	return t.TraceSet(srcW, srcH, k, boxes, 1)
}

// TraceSet is TraceBoxes for sample k of a set of size samples alike:
// a multi-image op's partners are drawn among
// them (multiPartners), each a srcW x srcH image with the same boxes,
// scaled to the size it is loaded at. Its plan is the decode's for such
// a set (Transform.PlanMulti).
func (t *Transform) TraceSet(srcW, srcH int, k det.Key, boxes [][4]float32, size int) ([]byte, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w: a set of %d samples", errs.Unsupported, size)
	}
	var p Plan
	var src Targeted
	if boxes != nil {
		src = sourceBoxes{boxes, srcW, srcH}
	}
	if idx := t.multiPartners(k, size, nil); idx != nil {
		sz := func([]byte) (int, int, error) { return srcW, srcH, nil }
		if err := t.PlanMulti(&p, k, MultiSource{Partners: idx, Files: make([][]byte, len(idx)), Size: sz, Labels: src}); err != nil {
			return nil, err
		}
		return p.AppendTrace(nil), nil
	}
	if err := t.Plan(&p, srcW, srcH, k, BoxSource{From: src}); err != nil {
		return nil, err
	}
	return p.AppendTrace(nil), nil
}
