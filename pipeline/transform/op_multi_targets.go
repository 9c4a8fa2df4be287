package transform

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// A multi-image sample's instances (its MultiDraw's), read once with its
// plan (PlanMulti) or its targets (Instances), whichever first: the
// labels of each of its images as ultralytics' Instances holds them
// (boxes XYXY in pixels of the image's load_image size, a segment
// dataset's polygons resampled to 1000 points and keypoints (x, y,
// visibility) likewise), moved as ultralytics 8.4.190 moves them:
// Mosaic._update_labels (add_padding of the tile's padw, padh to boxes,
// segments and keypoints alike), _cat_labels (concatenated, segments of
// unequal lengths resampled to the longest, Instances.clip to the
// 2*imgsz canvas: a keypoint outside it gets visibility 0, then is
// clipped; remove_zero_area_boxes drops an instance with its segment and
// keypoints), CopyPaste.apply_instances, RandomPerspective.apply_instances
// (segments through M, each box their segment2box and the segment
// clipped to it; the keypoints through M, those leaving the output made
// invisible, clipped; box_candidates, of area ratio 0.01 with segments,
// drops the instance whole), MixUp.apply_instances and
// CutMix.apply_instances (the partner's after the sample's); and YOLOX's
// MixUp's, its partner's boxes after the sample's (yoloxInstances).

// PerspInstances is a mosaic's instances through the
// YOLORandomPerspective after it, if any (its draw pp):
// RandomPerspective.apply_instances.
func (md *MultiDraw) PerspInstances(in cv.Instances, pp *cv.PerspectiveParams) cv.Instances {
	if !md.Persp {
		return in
	}
	s := cv.MosaicSize(md.Mo.Imgsz)
	return cv.PerspectiveInstances(in, cv.PerspectiveMatrix(*pp, s, s, md.W, md.H), pp.Scale, md.Warp, md.W, md.H)
}

// Instances is the sample's instances after its multi-image geometry,
// of ds's labels (contiguous: a COCO dataset's labelled by rank), and
// the keypoints an instance: its pre_transform's, its MixUp partner's
// after them, then the CutMix's picked instances moved into its area,
// as the plan drew them. The instances its draw read are not read
// again, unless with other labels.
func (md *MultiDraw) Instances(ds Targeted, contiguous bool) (cv.Instances, int, error) {
	if md.cl != contiguous { // read with other labels: read again
		for i := range md.Pres {
			md.Pres[i].haveIn, md.Pres[i].haveOut = false, false
		}
		md.haveX = false
		md.cl = contiguous
	}
	all, p, err := md.multiInstances(ds)
	if err == nil && md.XOK {
		all, err = md.yoloxInstances(ds, all)
	}
	if err != nil || !md.CutOK {
		return all, p, err
	}
	two, _, err := md.preMixInstances(ds, &md.Pres[PreCut])
	if err != nil {
		return all, p, fmt.Errorf("cutmix partner (sample %d): %w", md.CutM.Idx[0], err)
	}
	if len(two.Keypoints) > 0 && len(two.Keypoints[0]) != p || cv.MixedSegments(all, two) {
		return all, p, fmt.Errorf("%w: cutmix partner (sample %d) has other labels than the sample's (keypoints or polygons)", errs.Unsupported, md.CutM.Idx[0])
	}
	return cv.CutMixInstances(all, two, md.CutArea(md.CutChoice), md.CutSel), p, nil
}

// multiInstances is a mosaic's instances after the ops of its
// pre_transform (its CopyPastes, its warp) and its MixUp (the partner's,
// made the same way, after them), and the keypoints an instance.
func (md *MultiDraw) multiInstances(ds Targeted) (cv.Instances, int, error) {
	all, p, err := md.preMixInstances(ds, &md.Pres[PreSelf])
	if err != nil || !md.Mix {
		return all, p, err
	}
	two, p2, err := md.preMixInstances(ds, &md.Pres[PreMix])
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

// cutmixPick is the CutMix partner's instances and those its area takes
// (cv.CutMixPick), given the sample's instances in.
func (md *MultiDraw) cutmixPick(ds Targeted, in cv.Instances) (cv.Instances, []int, error) {
	two, _, err := md.preMixInstances(ds, &md.Pres[PreCut])
	if err != nil {
		return two, nil, fmt.Errorf("cutmix partner (sample %d): %w", md.CutM.Idx[0], err)
	}
	return two, cv.CutMixPick(md.CutArea(md.CutChoice), two.Boxes, len(in.Segments) > 0), nil
}

// preInstances is pre_transform pr's instances: its mosaic's, with the
// copies its CopyPaste in flip mode pasted (after them, as its draw
// selected them), warped; read once.
func (md *MultiDraw) preInstances(ds Targeted, pr *PreDraw) (cv.Instances, int, error) {
	if pr.haveIn {
		return pr.in, pr.p, nil
	}
	in, p, err := md.mosaicInstances(ds, pr.Mo)
	if err != nil {
		return in, p, err
	}
	if pr.Mo.CP {
		in = cv.CopyPasteInstances(in, pr.Flipped, pr.Sel)
	}
	pr.in, pr.p, pr.haveIn = md.PerspInstances(in, pr.PP), p, true
	return pr.in, p, nil
}

// preMixInstances is pre_transform pr's instances (preInstances), then
// what its CopyPaste in mixup mode pasted, as its draw selected them,
// after them; read once.
func (md *MultiDraw) preMixInstances(ds Targeted, pr *PreDraw) (cv.Instances, int, error) {
	if pr.haveOut {
		return pr.out, pr.p, nil
	}
	in, p, err := md.preInstances(ds, pr)
	if err != nil {
		return in, p, err
	}
	if pr.CP != nil && len(pr.CPSel) > 0 {
		if !pr.CPPart.haveIn { // read with other labels since: again
			if pr.Two, _, err = md.preInstances(ds, pr.CPPart); err != nil {
				return in, p, fmt.Errorf("copy_paste partner (sample %d): %w", pr.CP.Mo.Idx[0], err)
			}
		}
		in = cv.CopyPasteInstances(in, pr.Two, pr.CPSel)
	}
	pr.out, pr.haveOut = in, true
	return in, p, nil
}

// copyPasteMixSelect is CopyPaste.get_params in mixup mode on the
// instances in of pre_transform pr, of ds's labels: its partner's
// instances (its mosaic, warped) and those it pastes
// (cv.CopyPasteMixSelect); none when in has none (ultralytics' returns
// such a sample untouched). Boxes without polygons are refused, as in
// flip mode.
func (md *MultiDraw) copyPasteMixSelect(ds Targeted, in cv.Instances, pr *PreDraw) (cv.Instances, []int, error) {
	if len(in.Boxes) == 0 {
		return cv.Instances{}, nil, nil
	}
	cp := pr.CP
	two, _, err := md.preInstances(ds, pr.CPPart)
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

// mosaicInstances is one mosaic's instances and the keypoints an
// instance (0: none): each image's in pixels of its load_image size (a
// YOLO dataset's from its normalized labels with ultralytics' arithmetic,
// UltralyticsTargets, another's its SourceTargets at that size), moved by
// its tile, concatenated, clipped and the empty dropped
// (cv.MosaicInstances).
func (md *MultiDraw) mosaicInstances(ds Targeted, m *MosaicDraw) (cv.Instances, int, error) {
	md.ins = md.ins[:0]
	tg := &md.lab
	p := -1
	for j, i := range m.Idx {
		if err := md.imageLabels(ds, i, m.Sizes[j][0], m.Sizes[j][1]); err != nil {
			return cv.Instances{}, 0, partnerErr(j, m, err)
		}
		if p >= 0 && tg.P != p {
			return cv.Instances{}, 0, partnerErr(j, m, fmt.Errorf("%w: %d keypoints an instance, the mosaic's first image %d", errs.Unsupported, tg.P, p))
		}
		p = tg.P
		md.ins = append(md.ins, cvMosaicInstances(tg))
	}
	if cv.MixedSegments(md.ins...) {
		return cv.Instances{}, 0, errMixedSegments(m.Idx)
	}
	return cv.MosaicInstances(md.ins, m.Tiles, m.Imgsz), max(p, 0), nil
}

// imageLabels reads image i's labels of ds at its w x h into md.lab
// (reset): a YOLO dataset's from its normalized labels with ultralytics'
// arithmetic (UltralyticsTargets), another's its SourceTargets at that
// size.
func (md *MultiDraw) imageLabels(ds Targeted, i, w, h int) error {
	tg := &md.lab
	tg.Reset()
	tg.WantMasks, tg.ContiguousLabels = false, md.cl
	if u, ok := ds.(dataset.UltralyticsTargeted); ok {
		return u.UltralyticsTargets(i, w, h, tg)
	}
	return ds.SourceTargets(i, w, h, tg)
}

// cvMosaicInstances is t as ultralytics' Instances (cv.Instances): its
// boxes, labels, segments and, with keypoints, each instance's (x, y,
// visibility);
// a copy, t being the draw's scratch.
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
func partnerErr(j int, m *MosaicDraw, err error) error {
	if j == 0 {
		return err
	}
	return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, m.N-1, m.Idx[j], err)
}

// SetTargets sets t (reset) to the sample's instances after its
// multi-image geometry (Instances: ds's labels, contiguous a COCO
// dataset's labelled by rank), its image id the sample's, P the
// keypoints an instance.
func (md *MultiDraw) SetTargets(ds Targeted, contiguous bool, t *Instances) error {
	all, p, err := md.Instances(ds, contiguous)
	if err != nil {
		return err
	}
	t.ImageID, t.P = int64(md.Mo.Idx[0]), p
	return AddInstances(t, &all)
}

// AddInstances appends in's instances to t (its P set): boxes and
// classes, segments where it has them, and with P, each instance's P
// keypoints and their visibilities (ultralytics' float visibility, 0, 1
// or 2, as COCO's v).
func AddInstances(t *dataset.Instances, in *cv.Instances) error {
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
