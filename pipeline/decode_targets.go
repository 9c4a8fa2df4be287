package pipeline

import (
	"errors"
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
) // A sample's targets and trace as the decoder drew them: the Decoder's
// side of targets.go, op_yolo.go and trace.go (their moves and steps are the
// ops'), and a Transform's Trace, which draws a decode without decoding.

// appendTargets appends sample i's targets (of ds), moved through the
// geometry and steps d drew for its last sample with t, to b.
// AppendTargets appends sample i's targets (of ds, with fs's options)
// made after the Decoder's last decode of it with t, as the executor
// makes them: for a benchmark of their cost (bench cost).
func (d *Decoder) AppendTargets(b []byte, t *transform.Transform, ds transform.Targeted, i int, fs *dataset.FieldSet) ([]byte, error) {
	return d.appendTargets(b, t, ds, i, fs)
}

func (d *Decoder) appendTargets(b []byte, t *transform.Transform, ds transform.Targeted, i int, fs *dataset.FieldSet) ([]byte, error) {
	if t.Sampler(sk).ViewList() != nil {
		return b, fmt.Errorf("%w: targets do not support views yet", errs.Unsupported)
	}
	vp, t := &d.plan.Views[0], d.plan.Transform()      // the transform at the sample's epoch
	d.targets.ContiguousLabels = fs.ContiguousLabels() // kept by Reset, for the partners' too
	if vp.Multi != nil {
		return d.appendMosaicTargets(b, t, ds, fs, vp.Multi)
	}
	tg := &d.targets
	tg.Reset()
	tg.WantMasks = fs.Masks()
	w0, h0, err := sourceTargets(ds, i, &vp.Geom, &tg.Instances)
	if err != nil {
		return b, err
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

// cutmixTargets is all (the sample's instances, p keypoints each) after
// the CutMix that applied (CutMix.apply_instances): the partner's
// instances its draw picked (drawCutMix) moved into the area, after them.
func (d *Decoder) cutmixTargets(ds transform.Targeted, md *transform.MultiDraw, all cv.Instances, p int) (cv.Instances, error) {
	two, _, err := d.preMixInstances(ds, &d.multi.pres[preCut], md)
	if err != nil {
		return all, fmt.Errorf("cutmix partner (sample %d): %w", md.CutM.Idx[0], err)
	}
	sel := d.multi.cutSel
	if t := md.CutM.Idx; len(two.Keypoints) > 0 && len(two.Keypoints[0]) != p || cv.MixedSegments(all, two) {
		return all, fmt.Errorf("%w: cutmix partner (sample %d) has other labels than the sample's (keypoints or polygons)", errs.Unsupported, t[0])
	}
	return cv.CutMixInstances(all, two, md.CutArea(md.CutChoice), sel), nil
}

// cutmixPick is the CutMix partner's instances and those its area takes
// (cv.CutMixPick), given the sample's instances in.
func (d *Decoder) cutmixPick(ds transform.Targeted, md *transform.MultiDraw, in cv.Instances) (cv.Instances, []int, error) {
	two, _, err := d.preMixInstances(ds, &d.multi.pres[preCut], md)
	if err != nil {
		return two, nil, fmt.Errorf("cutmix partner (sample %d): %w", md.CutM.Idx[0], err)
	}
	return two, cv.CutMixPick(md.CutArea(md.CutChoice), two.Boxes, len(in.Segments) > 0), nil
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

// A mosaic's targets (YOLOMosaic, then its YOLORandomPerspective and
// YOLOMixUp, decode_multi.go): the labels of each of its images as
// ultralytics' Instances holds them (boxes XYXY in pixels of the image's
// load_image size, a segment dataset's polygons resampled to 1000 points
// and keypoints (x, y, visibility) likewise), moved as ultralytics 8.4.190
// moves them: Mosaic._update_labels (add_padding of the tile's padw, padh
// to boxes, segments and keypoints alike), _cat_labels (concatenated,
// segments of unequal lengths resampled to the longest, Instances.clip to
// the 2*imgsz canvas: a keypoint outside it gets visibility 0, then is
// clipped; remove_zero_area_boxes drops an instance with its segment and
// keypoints), RandomPerspective.apply_instances (segments through M, each
// box their segment2box and the segment clipped to it; the keypoints
// through M, those leaving the output made invisible, clipped;
// box_candidates, of area ratio 0.01 with segments, drops the instance
// whole), MixUp.apply_instances (the partner's after the sample's), then
// the steps after the geometry (RandomFlip with its flip_idx, ...). Masks
// are refused.
//
// appendMosaicTargets is appendTargets for a sample the last decode made
// as a mosaic (md): its mosaic's instances (mosaicInstances), then its
// MixUp partner's after them (MixUp.apply_instances), then moved by the
// steps after the geometry.
func (d *Decoder) appendMosaicTargets(b []byte, t *transform.Transform, ds transform.Targeted, fs *dataset.FieldSet, md *transform.MultiDraw) ([]byte, error) {
	if fs.Masks() {
		return b, fmt.Errorf("%w: masks do not follow YOLOMosaic yet", errs.Unsupported)
	}
	if m := &d.multi; m.cl != d.targets.ContiguousLabels { // read with other labels: read again
		for i := range m.pres {
			m.pres[i].haveIn, m.pres[i].haveOut = false, false
		}
		m.cl = d.targets.ContiguousLabels
	}
	all, p, err := d.multiInstances(ds, md)
	if err == nil && md.CutOK {
		all, err = d.cutmixTargets(ds, md, all, p)
	}
	if err != nil {
		return b, err
	}
	tg := &d.targets
	tg.Reset()
	tg.ImageID = int64(md.Mo.Idx[0])
	tg.P = p
	if err := setMosaicTargets(&tg.Instances, &all); err != nil {
		return b, err
	}
	w, h, err := transform.MoveTargets(tg, t.Sampler(sk).OutW(), t.Sampler(sk).OutH(), d.plan.Views[0].Steps)
	if err != nil {
		return b, err
	}
	tg.W, tg.H = w, h
	if tg.WantOverlap = fs.OverlapMask(); tg.WantOverlap {
		return tg.AppendOverlap(b, fs.MaskRatio(), fs.MaskOverlap(), fs.TargetsMax())
	}
	return targets.AppendTargets(b, tg), nil
}

// multiInstances is a mosaic's instances after the ops of its
// pre_transform (its CopyPastes, its warp) and its MixUp (the partner's,
// made the same way, after them), and the keypoints an instance.
func (d *Decoder) multiInstances(ds transform.Targeted, md *transform.MultiDraw) (cv.Instances, int, error) {
	all, p, err := d.preMixInstances(ds, &d.multi.pres[preSelf], md)
	if err != nil || !md.Mix {
		return all, p, err
	}
	two, p2, err := d.preMixInstances(ds, &d.multi.pres[preMix], md)
	if err != nil {
		return all, p, fmt.Errorf("mixup partner (sample %d): %w", md.MixM.Idx[0], err)
	}
	if p2 != p {
		return all, p, fmt.Errorf("%w: mixup partner (sample %d) has %d keypoints an instance, the sample %d", errs.Unsupported, md.MixM.Idx[0], p2, p)
	}
	if cv.MixedSegments(all, two) {
		return all, p, errMixedSegments(append(append([]int{}, md.Mo.Idx...), md.MixM.Idx...))
	}
	return cv.Concat(all, two), p, nil
}

// preInstances is pre_transform pr's instances: its mosaic's, with the
// copies its CopyPaste in flip mode pasted (CopyPaste.apply_instances:
// after them, as its draw selected them), warped; read once.
func (d *Decoder) preInstances(ds transform.Targeted, pr *preDraw, md *transform.MultiDraw) (cv.Instances, int, error) {
	if pr.haveIn {
		return pr.in, pr.p, nil
	}
	in, p, err := d.mosaicInstances(ds, pr.mo)
	if err != nil {
		return in, p, err
	}
	if pr.mo.CP {
		in = cv.CopyPasteInstances(in, pr.flipped, pr.sel)
	}
	pr.in, pr.p, pr.haveIn = md.PerspInstances(in, pr.pp), p, true
	return pr.in, p, nil
}

// setMosaicTargets appends in's instances to t (reset, its P set): boxes
// and classes, segments where it has them, and with P, each instance's P
// keypoints and their visibilities (ultralytics' float visibility, 0, 1
// or 2, as COCO's v).
func setMosaicTargets(t *dataset.Instances, in *cv.Instances) error {
	if t.P > 0 && len(in.Keypoints) != len(in.Boxes) {
		return fmt.Errorf("targets: a mosaic of %d instances with %d keypoint sets", len(in.Boxes), len(in.Keypoints))
	}
	if len(in.Segments) > 0 {
		if len(in.Segments) != len(in.Boxes) {
			return fmt.Errorf("targets: a mosaic of %d instances with %d segments", len(in.Boxes), len(in.Segments))
		}
		// Copies: the steps after the geometry move them in place, and
		// in's are the pre_transforms' (read once, for the draw too).
		for _, sg := range in.Segments {
			t.Segments = append(t.Segments, append([][2]float32(nil), sg...))
		}
	}
	for q := range in.Boxes {
		t.Add(in.Boxes[q], in.Cls[q], false)
		if t.P == 0 {
			continue
		}
		kp := in.Keypoints[q]
		if len(kp) != t.P {
			return fmt.Errorf("targets: a mosaic instance of %d keypoints, the dataset's have %d", len(kp), t.P)
		}
		for _, k := range kp {
			t.Points = append(t.Points, [2]float32{k[0], k[1]})
			t.Vis = append(t.Vis, uint8(k[2]))
		}
	}
	return nil
}

// mosaicInstances is one mosaic's instances and the keypoints an
// instance (0: none): each image's in pixels of its load_image size (a
// YOLO dataset's from its normalized labels with ultralytics' arithmetic,
// UltralyticsTargets, another's its SourceTargets at that size), moved by
// its tile, concatenated, clipped and the empty dropped
// (cv.MosaicInstances).
func (d *Decoder) mosaicInstances(ds transform.Targeted, m *transform.MosaicDraw) (cv.Instances, int, error) {
	ms := &d.multi
	ms.ins = ms.ins[:0]
	tg := &d.targets
	p := -1
	for j, i := range m.Idx {
		w, h := m.Sizes[j][0], m.Sizes[j][1]
		tg.Reset()
		tg.WantMasks = false
		var err error
		if u, ok := ds.(dataset.UltralyticsTargeted); ok {
			err = u.UltralyticsTargets(i, w, h, &tg.Instances)
		} else {
			err = ds.SourceTargets(i, w, h, &tg.Instances)
		}
		if err != nil {
			return cv.Instances{}, 0, partnerErr(j, m, err)
		}
		if p >= 0 && tg.P != p {
			return cv.Instances{}, 0, partnerErr(j, m, fmt.Errorf("%w: %d keypoints an instance, the mosaic's first image %d", errs.Unsupported, tg.P, p))
		}
		p = tg.P
		ms.ins = append(ms.ins, cvMosaicInstances(&tg.Instances))
	}
	if cv.MixedSegments(ms.ins...) {
		return cv.Instances{}, 0, errMixedSegments(m.Idx)
	}
	return cv.MosaicInstances(ms.ins, m.Tiles, m.Imgsz), max(p, 0), nil
}

// cvMosaicInstances is t as ultralytics' Instances (cv.Instances): its
// boxes, labels, segments and, with keypoints, each instance's (x, y,
// visibility);
// a copy, t being the Decoder's scratch.
func cvMosaicInstances(t *dataset.Instances) cv.Instances {
	in := cv.Instances{Boxes: append([][4]float32{}, t.Boxes...), Cls: append([]int64{}, t.Labels...)}
	if len(t.Segments) > 0 {
		// The segments are the dataset's fresh ones (UltralyticsTargets
		// makes them for each call): no copy.
		in.Segments = append([][][2]float32{}, t.Segments...)
	}
	if t.P == 0 {
		return in
	}
	in.Keypoints = make([][][3]float32, len(t.Boxes))
	for k := range in.Keypoints {
		kp := make([][3]float32, t.P)
		for j := range kp {
			q := k*t.P + j
			kp[j] = [3]float32{t.Points[q][0], t.Points[q][1], float32(t.Vis[q])}
		}
		in.Keypoints[k] = kp
	}
	return in
}

// errMixedSegments refuses a mosaic (of the images idx) of segment lines
// and box lines: ultralytics' Instances.concatenate pairs the segments it
// has with the wrong boxes then (and its segment task refuses such a
// dataset).
func errMixedSegments(idx []int) error {
	return fmt.Errorf("%w: a mosaic of samples %v mixes label files of polygons with label files of boxes alone: give every image of a segment dataset polygons", errs.Unsupported, idx)
}

// partnerErr names the mosaic's image j in err (0: the sample's own).
func partnerErr(j int, m *transform.MosaicDraw, err error) error {
	if j == 0 {
		return err
	}
	return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, m.N-1, m.Idx[j], err)
}

// SetBoxSource tells d that the next samples it decodes are ds's sample i
// (until the next call; nil: none), whose boxes a RandomIoUCrop draws
// against.
func (d *Decoder) SetBoxSource(ds transform.Targeted, i int) { d.boxSrc, d.boxIdx = ds, i }

// AppendTrace appends the trace of the last sample d decoded (a JSON list
// of [op, {arguments}] pairs: see transform.AppendTrace) to b; of a
// transform of several views, a JSON list of each view's, in order: its
// plan's (transform.Plan.AppendTrace). It is only meaningful after a
// Decode that succeeded.
func (d *Decoder) AppendTrace(b []byte) []byte {
	return d.plan.AppendTrace(b)
}

// copyPasteMixSelect is CopyPaste.get_params in mixup mode on the
// instances in of pre_transform pr, of ds's labels: its partner's
// instances (its mosaic, warped) and those it pastes
// (cv.CopyPasteMixSelect); none when in has none (ultralytics' returns
// such a sample untouched). Boxes without polygons are refused, as in
// flip mode.
func (d *Decoder) copyPasteMixSelect(ds transform.Targeted, in cv.Instances, pr *preDraw, md *transform.MultiDraw) (cv.Instances, []int, error) {
	if len(in.Boxes) == 0 {
		return cv.Instances{}, nil, nil
	}
	cp := pr.cp
	two, _, err := d.preInstances(ds, pr.cpPart, md)
	if err != nil {
		return two, nil, fmt.Errorf("copy_paste partner (sample %d): %w", cp.Mo.Idx[0], err)
	}
	for _, x := range []cv.Instances{in, two} {
		if len(x.Boxes) > 0 && len(x.Segments) == 0 {
			return two, nil, fmt.Errorf("%w: YOLOCopyPaste: the samples %v and %v have boxes without polygons: CopyPaste pastes segments, give it a YOLO segment dataset (ultralytics' skips it silently on boxes)", errs.Unsupported, md.Mo.Idx, cp.Mo.Idx)
		}
	}
	if len(two.Keypoints) > 0 || len(in.Keypoints) > 0 {
		return two, nil, fmt.Errorf("%w: YOLOCopyPaste mode 'mixup' on a dataset with keypoints is not supported", errs.Unsupported)
	}
	return two, cv.CopyPasteMixSelect(in, two, cp.P), nil
}

// preMixInstances is pre_transform pr's instances (preInstances), then
// what its CopyPaste in mixup mode pasted, as its draw selected them,
// after them; read once.
func (d *Decoder) preMixInstances(ds transform.Targeted, pr *preDraw, md *transform.MultiDraw) (cv.Instances, int, error) {
	if pr.haveOut {
		return pr.out, pr.p, nil
	}
	in, p, err := d.preInstances(ds, pr, md)
	if err != nil {
		return in, p, err
	}
	if pr.cp != nil && len(pr.cpSel) > 0 {
		if !pr.cpPart.haveIn { // read with other labels since: again
			if pr.two, _, err = d.preInstances(ds, pr.cpPart, md); err != nil {
				return in, p, fmt.Errorf("copy_paste partner (sample %d): %w", pr.cp.Mo.Idx[0], err)
			}
		}
		in = cv.CopyPasteInstances(in, pr.two, pr.cpSel)
	}
	pr.out, pr.haveOut = in, true
	return in, p, nil
}
