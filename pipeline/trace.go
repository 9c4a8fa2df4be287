package pipeline

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
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
		b = steps[i].appendJSON(b)
	}
	return append(b, ']')
}

// appendJSON appends the step as a [name, {args}] pair.
func (st *Step) appendJSON(b []byte) []byte {
	spec := st.Fn.def()
	b = append(b, `["`...)
	b = append(b, spec.name...)
	b = append(b, `",{`...)
	for i, a := range spec.args {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, a.name)
		b = append(b, ':')
		switch a.kind {
		case argInt:
			b = appendList(b, a.n, func(b []byte, k int) []byte { return strconv.AppendInt(b, int64(st.I[a.at+k]), 10) })
		case argFloat:
			b = appendList(b, a.n, func(b []byte, k int) []byte { return appendFloat(b, st.F[a.at+k]) })
		case argInterp:
			b = strconv.AppendQuote(b, st.Interp.String())
		case argAntialias:
			b = strconv.AppendBool(b, st.Antialias)
		case argBoxFormat:
			b = strconv.AppendQuote(b, BoxFormat(st.I[a.at]).String())
		case argBool:
			b = strconv.AppendBool(b, st.I[a.at] != 0)
		case argCorners, argStartCorners:
			start, end := st.corners()
			pts := &end
			if a.kind == argStartCorners {
				pts = &start
			}
			b = appendList(b, 4, func(b []byte, k int) []byte {
				return appendList(b, 2, func(b []byte, j int) []byte { return strconv.AppendInt(b, int64(pts[k][j]), 10) })
			})
		case argFill:
			if st.FillNone {
				b = append(b, "null"...)
			} else {
				b = appendList(b, 3, func(b []byte, k int) []byte { return appendFloat(b, st.Fill[k]) })
			}
		case argCenter:
			if !st.HasCenter {
				b = append(b, "null"...)
			} else {
				b = appendList(b, 2, func(b []byte, k int) []byte { return appendFloat(b, st.Center[k]) })
			}
		case argEraseValue:
			if st.Random {
				b = append(b, `"random"`...)
			} else {
				b = appendList(b, 3, func(b []byte, k int) []byte { return appendFloat(b, st.Fill[k]) })
			}
		default: // the YOLO family's (op_yolo.go)
			b = st.appendYOLOArg(b, a)
		}
	}
	return append(b, "}]"...)
}

// appendList appends n values, as a JSON list when n > 1.
func appendList(b []byte, n int, one func([]byte, int) []byte) []byte {
	if n == 1 {
		return one(b, 0)
	}
	b = append(b, '[')
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = one(b, k)
	}
	return append(b, ']')
}

// appendFloat appends f in the shortest form that reads back as the same
// float64, always with a '.' or an exponent so that Python reads a float.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	for _, c := range b[n:] {
		if c == '.' || c == 'e' || c == 'n' || c == 'I' {
			return b
		}
	}
	return append(b, ".0"...)
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
		st, err := parseStep(p)
		if err != nil {
			return nil, fmt.Errorf("%w: trace step %d: %v", ErrUnsupported, i, err)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

func parseStep(p [2]json.RawMessage) (Step, error) {
	var name string
	if err := json.Unmarshal(p[0], &name); err != nil {
		return Step{}, fmt.Errorf("name: %v", err)
	}
	f, ok := fnByName[name]
	if !ok {
		return Step{}, fmt.Errorf("unknown op %q", name)
	}
	st := Step{Fn: f, Antialias: f == FnResizedCrop || f == FnResize} // torchvision's antialias=True
	var args map[string]json.RawMessage
	if len(p[1]) > 0 && string(p[1]) != "null" {
		if err := json.Unmarshal(p[1], &args); err != nil {
			return Step{}, fmt.Errorf("%s: arguments: %v", name, err)
		}
	}
	known := 0
	for _, a := range fnDefs[f].args {
		raw, ok := args[a.name]
		if !ok {
			continue
		}
		known++
		if err := st.setArg(a, raw); err != nil {
			return Step{}, fmt.Errorf("%s: %s: %v", name, a.name, err)
		}
	}
	if known != len(args) {
		for k := range args {
			if !fnDefs[f].has(k) {
				return Step{}, fmt.Errorf("%s: unknown argument %q", name, k)
			}
		}
	}
	return st, nil
}

func (s *fnDef) has(name string) bool {
	for _, a := range s.args {
		if a.name == name {
			return true
		}
	}
	return false
}

// setArg sets one argument from its JSON.
func (st *Step) setArg(a arg, raw json.RawMessage) error {
	nums := func(n int) ([]float64, error) {
		if n == 1 {
			var v float64
			err := json.Unmarshal(raw, &v)
			return []float64{v}, err
		}
		var v []float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		if len(v) == 1 && n == 2 { // torchvision takes [k] for (k, k)
			v = append(v, v[0])
		}
		if len(v) != n {
			return nil, fmt.Errorf("want %d values, got %d", n, len(v))
		}
		return v, nil
	}
	switch a.kind {
	case argPair, argFlipIdx: // the YOLO family's (op_yolo.go)
		return st.setYOLOArg(a, raw)
	case argInt:
		v, err := nums(a.n)
		if err != nil {
			return err
		}
		for k, x := range v {
			if x != math.Trunc(x) || math.Abs(x) > 1<<30 {
				return fmt.Errorf("%v is not an integer", x)
			}
			st.I[a.at+k] = int(x)
		}
	case argFloat:
		v, err := nums(a.n)
		if err != nil {
			return err
		}
		copy(st.F[a.at:], v)
	case argInterp:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		in, err := ParseInterpolation(s)
		if err != nil {
			return err
		}
		st.Interp = in
	case argAntialias:
		return json.Unmarshal(raw, &st.Antialias)
	case argBoxFormat:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		f, err := ParseBoxFormat(s)
		if err != nil {
			return err
		}
		st.I[a.at] = int(f)
	case argCorners, argStartCorners:
		var v [][]int
		if err := json.Unmarshal(raw, &v); err != nil || len(v) != 4 {
			return fmt.Errorf("want four [x, y] corners of integers")
		}
		for i, p := range v {
			if len(p) != 2 || p[0] < -1<<30 || p[0] > 1<<30 || p[1] < -1<<30 || p[1] > 1<<30 {
				return fmt.Errorf("corner %d: want [x, y], integers within 2^30", i)
			}
			if a.kind == argCorners {
				st.I[a.at+i] = packPoint(p[0], p[1])
			}
		}
		if a.kind == argStartCorners {
			w1, h1 := v[2][0], v[2][1]
			if v[0][0] != 0 || v[0][1] != 0 || v[1][0] != w1 || v[1][1] != 0 || v[3][0] != 0 || v[3][1] != h1 {
				return fmt.Errorf("%v: only the image's corners [[0, 0], [W-1, 0], [W-1, H-1], [0, H-1]] are supported (RandomPerspective's)", v)
			}
			st.I[a.at], st.I[a.at+1] = w1, h1
		}
	case argBool:
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("want true or false")
		}
		st.I[a.at] = 0
		if v {
			st.I[a.at] = 1
		}
	case argFill, argEraseValue:
		var s string
		if a.kind == argEraseValue && json.Unmarshal(raw, &s) == nil {
			if s != "random" {
				return fmt.Errorf("want a list of values or \"random\", got %q", s)
			}
			st.Random = true
			return nil
		}
		if string(raw) == "null" {
			st.Fill, st.FillNone = [3]float64{}, a.kind == argFill
			return nil
		}
		var v []float64
		var one float64
		if json.Unmarshal(raw, &one) == nil {
			v = []float64{one}
		} else if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		switch len(v) {
		case 1:
			st.Fill = [3]float64{v[0], v[0], v[0]}
		case 3:
			st.Fill = [3]float64(v)
		default:
			return fmt.Errorf("want 1 or 3 values, got %d", len(v))
		}
	case argCenter:
		if string(raw) == "null" {
			st.HasCenter = false
			return nil
		}
		v, err := nums(2)
		if err != nil {
			return err
		}
		st.Center, st.HasCenter = [2]float64(v), true
	}
	return nil
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
		buf = append(buf, Step{Fn: FnPad, I: [6]int{zp[0], zp[1], zp[2], zp[3]}, Fill: t.zoom.Fill})
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
			buf = append(buf, Step{Fn: FnPad, I: [6]int{p.rcPad[0], p.rcPad[1], p.rcPad[2], p.rcPad[3]}, Fill: p.rcFill})
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
	return Step{Fn: FnPad, I: [6]int{pd[0], pd[1], pd[2], pd[3]}, Fill: op.Fill}
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
		b = st.appendJSON(b)
	}
	geom := t.geometrySteps(&vd.plan, geo[:0])
	if vd.multi != nil { // a Mosaic's sample: its entries are its geometry
		sep()
		b, geom = vd.multi.appendJSON(b), nil
	}
	for _, st := range geom {
		sep()
		b = st.appendJSON(b)
	}
	for i := range vd.steps {
		sep()
		b = vd.steps[i].appendJSON(b)
	}
	if t.norm != nil {
		sep()
		st := Step{Fn: FnNormalize}
		copy(st.F[:3], t.norm.Mean[:])
		copy(st.F[3:], t.norm.Std[:])
		b = st.appendJSON(b)
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
		return n
	}
	n := 2
	for _, v := range t.views {
		n += v.MaxTraceBytes() + 1
	}
	return n
}
