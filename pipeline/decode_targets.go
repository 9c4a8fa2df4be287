package pipeline

import (
	"errors"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// A sample's targets and trace as the decoder drew them: the Decoder's
// side of targets.go, op_multi.go and trace.go (their moves and steps are
// the ops'), and a Transform's Trace, which draws a decode without
// decoding.

// AppendTargets appends the targets of the sample the Decoder last
// decoded with t (its Sample's, with fs's options), as the executor
// makes them: for a benchmark of their cost (bench cost).
func (d *Decoder) AppendTargets(b []byte, t *transform.Transform, fs *dataset.FieldSet) ([]byte, error) {
	return d.appendTargets(b, t, fs)
}

// appendTargets appends the targets of the sample d last decoded with t
// (its Sample's), moved through the geometry and steps it drew, to
// b. They are read once: by the plan, where its draw needed them (a
// RandomIoUCrop's, a mosaic's), or here.
func (d *Decoder) appendTargets(b []byte, t *transform.Transform, fs *dataset.FieldSet) ([]byte, error) {
	if t.Views() > 1 {
		return b, fmt.Errorf("%w: targets do not support views yet", errs.Unsupported)
	}
	ds, i := d.boxSrc, d.boxIdx
	if ds == nil {
		return b, fmt.Errorf("%w: targets: the sample's dataset has none (its Sample's Targets)", errs.Unsupported)
	}
	vp, t := &d.plan.Views[0], d.plan.Transform() // the transform at the sample's epoch
	d.wantTargets(fs)
	if vp.Multi != nil {
		return d.appendMultiTargets(b, t, ds, fs, vp.Multi)
	}
	tg := &d.targets
	tg.Reset()
	w0, h0 := vp.Geom.SrcW, vp.Geom.SrcH
	if vp.Geom.YOLO || !d.plan.TakeSource(&tg.Instances) { // read here, as the draw did not
		var err error
		if w0, h0, err = sourceTargets(ds, i, &vp.Geom, &tg.Instances); err != nil {
			return b, err
		}
	}
	if tg.WantMasks {
		tg.StartMasks(vp.Geom.SrcW, vp.Geom.SrcH)
	}
	// The plan's geometry steps, then the ops' (the trace's order), in two
	// calls: no list of both is made.
	w, h, err := transform.MoveTargets(tg, w0, h0, vp.Geometry)
	if err == nil {
		w, h, err = transform.MoveTargets(tg, w, h, vp.Steps)
	}
	if err != nil {
		return b, err
	}
	tg.W, tg.H = w, h
	if tg.WantOverlap = fs.OverlapMask(); tg.WantOverlap {
		return tg.AppendOverlap(b, fs.MaskRatio(), fs.MaskOverlap(), fs.TargetsMax())
	}
	base := len(b)
	if b = targets.AppendTargets(b, tg); tg.WantMasks {
		b, err = tg.AppendMasks(b, base, fs.TargetsMax(), d.ops.Stopped)
		if errors.Is(err, targets.ErrStopped) {
			err = ops.ErrAbandoned
		}
		return b, err
	}
	return b, nil
}

// sourceTargets sets t to ds's sample i as the plan p starts from, and
// returns the canvas they are on: the source image's, but for a YOLO
// geometry on a dataset of ultralytics' labels, the loaded image's, with
// its arithmetic (the load's step then leaves them, a ratio of 1).
func sourceTargets(ds transform.Targeted, i int, p *transform.SamplePlan, t *transform.Instances) (int, int, error) {
	if u, ok := ds.(dataset.UltralyticsTargeted); ok && p.YOLO && !t.WantMasks {
		return p.YLW, p.YLH, u.UltralyticsTargets(i, p.YLW, p.YLH, t)
	}
	return p.SrcW, p.SrcH, ds.SourceTargets(i, p.SrcW, p.SrcH, t)
}

// appendMultiTargets is appendTargets for a sample the last decode made
// of several images (md): its instances as its plan read and moved them
// (transform.MultiDraw.SetTargets, ultralytics' moves), then moved by the
// steps after the geometry (RandomFlip with its flip_idx, ...). Masks are
// refused.
func (d *Decoder) appendMultiTargets(b []byte, t *transform.Transform, ds transform.Targeted, fs *dataset.FieldSet, md *transform.MultiDraw) ([]byte, error) {
	if fs.Masks() {
		return b, fmt.Errorf("%w: masks do not follow a multi-image op yet", errs.Unsupported)
	}
	tg := &d.targets
	tg.Reset()
	if err := md.SetTargets(ds, tg.ContiguousLabels, &tg.Instances); err != nil {
		return b, err
	}
	oh, ow := t.Size()
	w, h, err := transform.MoveTargets(tg, ow, oh, d.plan.Views[0].Steps)
	if err != nil {
		return b, err
	}
	tg.W, tg.H = w, h
	if tg.WantOverlap = fs.OverlapMask(); tg.WantOverlap {
		return tg.AppendOverlap(b, fs.MaskRatio(), fs.MaskOverlap(), fs.TargetsMax())
	}
	return targets.AppendTargets(b, tg), nil
}

// wantTargets sets the options the sample's targets are read with: fs's
// masks and label numbering (kept by Reset, for a mosaic's partners too).
func (d *Decoder) wantTargets(fs *dataset.FieldSet) {
	d.targets.WantMasks, d.targets.ContiguousLabels = fs.Masks(), fs.ContiguousLabels()
}

// AppendTrace appends the trace of the last sample d decoded (a JSON list
// of [op, {arguments}] pairs: see transform.AppendTrace) to b; of a
// transform of several views, a JSON list of each view's, in order: its
// plan's (transform.Plan.AppendTrace). It is only meaningful after a
// Decode that succeeded.
func (d *Decoder) AppendTrace(b []byte) []byte {
	return d.plan.AppendTrace(b)
}
