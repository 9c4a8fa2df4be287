package testops

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/samplerkey"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TraceBoxes is transform.Tracer for the tests of pipeline/transform,
// whose test binary does not link the pipeline's root (which sets the
// Tracer to its Decoder's draw): the same draw, made of the same
// transform's side for the Decoder (Transform.Sampler), in the same
// order (decode.go's Decoder.draw and decode_targets.go's appendTrace):
// per view, its plan (RandomIoUCrop's against boxes, label 0 each), the
// steps before the geometry, the geometry's, the steps after it at the
// sample's size, Normalize. The root's TestTracerHook holds it to the
// Decoder's trace, byte for byte, over the presets and the recipes.
func TraceBoxes(t *transform.Transform, srcW, srcH int, k det.Key, boxes [][4]float32) ([]byte, error) {
	var sk samplerkey.Key
	t = t.Sampler(sk).AtEpoch(k.Epoch) // without the ops a stop_epoch switched off
	nv := t.Views()
	var b []byte
	if t.Sampler(sk).ViewList() != nil {
		b = append(b, '[')
	}
	for v := range nv {
		kv := k
		kv.View += uint64(v)
		if v > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = traceView(b, t.View(v), t.DecodeMode() == transform.DecodeExact, srcW, srcH, kv, boxes); err != nil {
			if nv > 1 {
				err = fmt.Errorf("view %d: %w", v, err)
			}
			return nil, err
		}
	}
	if t.Sampler(sk).ViewList() != nil {
		b = append(b, ']')
	}
	return b, nil
}

// traceView appends one view's trace (vt, one view's transform) to b.
func traceView(b []byte, vt *transform.Transform, exact bool, srcW, srcH int, k det.Key, boxes [][4]float32) ([]byte, error) {
	var sk samplerkey.Key
	s := vt.Sampler(sk)
	var src *targets.Targets
	if s.IoUOp() != nil && s.IoUOn() && boxes != nil {
		src = new(targets.Targets)
		for _, bx := range boxes {
			src.Add(bx, 0, false)
		}
	}
	var room [][4]float32
	p, err := s.PlanBoxes(srcW, srcH, k, src, &room)
	if err == nil && (p.CW < 1 || p.CH < 1) {
		err = fmt.Errorf("%w: the transform's crop of the %dx%d image is empty (%dx%d)", errs.Unsupported, srcW, srcH, p.CW, p.CH)
	}
	if err != nil {
		return nil, err
	}
	p.Exact = exact
	var d optab.Drawer
	var steps, pre []fn.Step
	if len(s.PostNodes()) > 0 {
		w, h := s.SampleSize(&p)
		steps = s.DrawInto(&d, k, w, h, nil)
	}
	if len(s.PreNodes()) > 0 {
		pre = s.DrawPreInto(&d, k, nil)
	}
	b = append(b, '[')
	n := 0
	add := func(st *fn.Step) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = st.AppendJSON(b)
	}
	for i := range pre {
		add(&pre[i])
	}
	geom := s.GeometrySteps(&p, nil)
	for i := range geom {
		add(&geom[i])
	}
	for i := range steps {
		add(&steps[i])
	}
	if norm := s.NormOp(); norm != nil {
		st := fn.Step{Fn: fn.Normalize}
		copy(st.F[:3], norm.Mean[:])
		copy(st.F[3:], norm.Std[:])
		add(&st)
	}
	return append(b, ']'), nil
}
