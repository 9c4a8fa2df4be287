package transform

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// Plan is what one sample of a single source image undergoes, drawn before
// a pixel of it is decoded: per view, the geometry's plan (where its
// pixels come from, at what size, flipped or not) and its steps, the
// steps of the ops before the geometry and those after it. The
// geometry's steps, then the ops', are the moves its targets take. Transform.Plan draws it, a pure
// function of (transform, source size, key, the source's boxes); the
// pipeline's Decoder executes it; its trace (AppendTrace) is what a batch
// asked for traces carries and what `stoker ops draw` prints. Drawing is
// tested without decoding.
//
// A Plan is a plain value whose buffers are reused from one sample to the
// next (Plan fills it in place, as the Decoder draws every sample).
type Plan struct {
	// Views are the transform's views, in order (one unless it has
	// several).
	Views []ViewPlan
	// Direct: the decode may write the output's bytes itself (uint8, no
	// step runs on planes after it, no Normalize); Layout is the layout
	// it decodes into (planes, CHW, when steps run on them).
	Direct bool
	Layout Layout

	t       *Transform // what drew it: the transform of the key's epoch (AtEpoch)
	drawer  optab.Drawer
	boxes   targets.Targets // the sample's source targets, where the draw read them (read: TakeSource's)
	read    bool
	boxRoom [][4]float32
	multi   MultiDraw // Views[0].Multi's, of a multi-image sample (PlanMulti)
}

// Transform is the transform p was drawn with, as it is at the key's
// epoch (without the ops a stop_epoch switched off).
func (p *Plan) Transform() *Transform { return p.t }

// ViewPlan is one view's part of a Plan.
type ViewPlan struct {
	// Geom is the geometry's plan, which the decode fuses (its crop,
	// scale and filter); Geometry the same as torchvision's functional
	// steps (resized_crop, resize, pad, crop, horizontal_flip, ...): its
	// trace's, and what moves the sample's targets.
	Geom     SamplePlan
	Geometry []fn.Step
	// Pre are the steps of the ops before the geometry (a detection
	// recipe's photometric ops), run on the image at its own size; Steps
	// those of the ops after it, at the sample's size.
	Pre, Steps []fn.Step
	// Multi is a multi-image sample's draw (its partners'
	// pre_transforms, the tiles' places, what its CopyPastes and CutMix
	// take), which is its geometry; nil for a single image.
	Multi *MultiDraw
}

// BoxSource is where a sample's targets are: From's sample Index, read
// with the job's options (Instances' WantMasks and ContiguousLabels). A
// plan reads them only when it draws against them (a RandomIoUCrop), and
// keeps them for the sample's targets (TakeSource): they are read once.
// From nil: none known, and such a plan fails.
type BoxSource struct {
	From              Targeted
	Index             int
	Masks, Contiguous bool
}

// TakeSource gives t the source targets (at the source's size) that the
// plan read for its draw, swapping their buffers with t's, when it read
// them with t's options (WantMasks, ContiguousLabels): the caller's
// BoxSource's sample, which then needs no second read. False: it read
// none such (its draw did not need them), and the caller reads them.
func (p *Plan) TakeSource(t *Instances) bool {
	if !p.read || p.boxes.WantMasks != t.WantMasks || p.boxes.ContiguousLabels != t.ContiguousLabels {
		return false
	}
	p.read = false
	p.boxes.Instances, *t = *t, p.boxes.Instances
	return true
}

// Plan draws into p everything sample k of a srcW x srcH source undergoes
// (see Plan), reusing p's buffers. View v draws with k.View + v (a batch's
// samples have View 0). A sample whose transform's multi-image op applies
// at k's epoch is planned from its partners' files too (Transform.PlanMulti).
func (t *Transform) Plan(p *Plan, srcW, srcH int, k det.Key, boxes BoxSource) error {
	t = t.AtEpoch(k.Epoch) // without the ops a stop_epoch switched off
	p.t = t
	nv := t.Views()
	if cap(p.Views) < nv {
		p.Views = append(p.Views[:cap(p.Views)], make([]ViewPlan, nv-cap(p.Views))...)
	}
	p.Views = p.Views[:nv]
	p.Direct, p.Layout = true, t.Layout()
	p.read = false
	for v := range nv {
		vt, kv := t.View(v), k
		kv.View += uint64(v)
		var src *targets.Targets
		if vt.iou != nil && vt.iouOn() && boxes.From != nil {
			src = &p.boxes
			if !p.read { // once, for every view
				src.Reset()
				src.WantMasks, src.ContiguousLabels = boxes.Masks, boxes.Contiguous
				if err := boxes.From.SourceTargets(boxes.Index, srcW, srcH, &src.Instances); err != nil {
					return fmt.Errorf("targets: %w", err)
				}
				p.read = true
			}
		}
		kg := kv           // the plan's and the ops before it's
		if t.SharedPre() { // a processor's views of one augmented image: view 0's crop, flip and ops before
			kg = k
		}
		g, err := vt.planBoxes(srcW, srcH, kg, src, &p.boxRoom)
		// RandomResizedCrop's fallback (torchvision's formula) rounds a
		// side to zero on images much thinner than its ratio range: (3,
		// 4) on a 1x10 image, say. Neither decode path can resample an
		// empty crop (the reference path would return a sample of stale
		// bytes).
		if err == nil && (g.CW < 1 || g.CH < 1) {
			err = fmt.Errorf("%w: the transform's crop of the %dx%d image is empty (%dx%d)", errs.Unsupported, srcW, srcH, g.CW, g.CH)
		}
		if err != nil {
			if nv > 1 {
				err = fmt.Errorf("view %d: %w", v, err)
			}
			return err
		}
		g.Exact = t.DecodeMode() == DecodeExact
		vp := &p.Views[v]
		vp.Geom, vp.Multi = g, nil
		vp.Geometry = vt.geometrySteps(&vp.Geom, vp.Geometry[:0])
		w, h := vt.SampleSize(&g)
		vp.Steps = vt.drawSteps(&p.drawer, kv, w, h, vp.Steps)
		vp.Pre = vp.Pre[:0]
		if len(vt.pre) > 0 {
			if cap(vp.Pre) < vt.maxPre {
				vp.Pre = make([]fn.Step, 0, vt.maxPre)
			}
			if vp.Pre = vt.drawPreInto(&p.drawer, kg, vp.Pre); len(vp.Pre) > 0 {
				p.Direct, p.Layout = false, CHW // the steps run on planes
			}
		}
		if vt.norm != nil {
			p.Direct = false
		}
		if len(vp.Steps) > 0 && t.Layout() == HWC {
			p.Direct, p.Layout = false, CHW
		}
	}
	return nil
}

// drawSteps draws the steps of t's ops after the geometry for a w x h
// sample into buf (reused; emptied first).
func (t *Transform) drawSteps(d *optab.Drawer, k det.Key, w, h int, buf []fn.Step) []fn.Step {
	buf = buf[:0]
	if len(t.post) == 0 {
		return buf
	}
	if cap(buf) < t.maxSteps {
		buf = make([]fn.Step, 0, t.maxSteps)
	}
	return t.drawInto(d, k, w, h, buf)
}

// AppendTrace appends p's trace to b (see AppendTrace): of one view, a
// JSON list of its steps: the crop before the ops before the geometry,
// those ops' steps, the geometry's (a multi-image draw's entries), the
// steps after it, Normalize; of several views, a JSON list of each view's,
// in order.
func (p *Plan) AppendTrace(b []byte) []byte {
	if p.t.views == nil {
		return p.Views[0].appendTrace(b, p.t)
	}
	b = append(b, '[')
	for v, vt := range p.t.views {
		if v > 0 {
			b = append(b, ',')
		}
		b = p.Views[v].appendTrace(b, vt)
	}
	return append(b, ']')
}

// appendTrace appends one view's trace, as drawn for t (the view's
// transform), to b.
func (vp *ViewPlan) appendTrace(b []byte, t *Transform) []byte {
	b = append(b, '[')
	n := 0
	add := func(st *fn.Step) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = st.AppendJSON(b)
	}
	if st, ok := vp.Geom.PreCropStep(); ok { // a crop before the ops before the geometry
		add(&st)
	}
	for i := range vp.Pre {
		add(&vp.Pre[i])
	}
	if vp.Multi != nil { // a multi-image sample: its entries are its geometry
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = vp.Multi.AppendJSON(b)
	}
	for i := range vp.Geometry {
		add(&vp.Geometry[i])
	}
	for i := range vp.Steps {
		add(&vp.Steps[i])
	}
	if t.norm != nil {
		norm := optab.ArgsOf[optab.NormalizeArgs](t.norm)
		st := fn.Step{Fn: fn.Normalize}
		copy(st.F[:3], norm.Mean[:])
		copy(st.F[3:], norm.Std[:])
		add(&st)
	}
	return append(b, ']')
}

// sourceBoxes is a Targeted of samples alike, each a w x h image with
// boxes b (in its pixels), label 0 each: asked at another size (a
// multi-image op's load_image size), scaled to it.
type sourceBoxes struct {
	b    [][4]float32
	w, h int
}

func (s sourceBoxes) SourceTargets(_, w, h int, t *Instances) error {
	fx, fy := float32(w)/float32(s.w), float32(h)/float32(s.h)
	for _, bx := range s.b {
		if w != s.w || h != s.h {
			bx = [4]float32{bx[0] * fx, bx[1] * fy, bx[2] * fx, bx[3] * fy}
		}
		t.Add(bx, 0, false)
	}
	return nil
}
