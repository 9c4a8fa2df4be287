package pipeline

// A mosaic's targets (YOLOMosaic, then its YOLORandomPerspective and
// YOLOMixUp, decode_multi.go): the labels of each of its images as
// ultralytics' Instances holds them (boxes XYXY in pixels of the image's
// load_image size, keypoints (x, y, visibility) likewise), moved as
// ultralytics 8.4.190 moves them: Mosaic._update_labels (add_padding of
// the tile's padw, padh to boxes and keypoints alike), _cat_labels
// (concatenated, Instances.clip to the 2*imgsz canvas: a keypoint outside
// it gets visibility 0, then is clipped; remove_zero_area_boxes drops an
// instance with its keypoints), RandomPerspective.apply_instances (the
// keypoints through M, those leaving the output made invisible, clipped;
// box_candidates drops the instance whole), MixUp.apply_instances (the
// partner's after the sample's), then the steps after the geometry
// (RandomFlip with its flip_idx, ...). Masks are refused.

import (
	"fmt"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// appendMosaicTargets is appendTargets for a sample the last decode made
// as a mosaic (md): its mosaic's instances (mosaicInstances), then its
// MixUp partner's after them (MixUp.apply_instances), then moved by the
// steps after the geometry.
func (d *Decoder) appendMosaicTargets(b []byte, t *Transform, ds Targeted, fs *FieldSet, md *multiDraw) ([]byte, error) {
	if fs.Masks() {
		return b, fmt.Errorf("%w: masks do not follow YOLOMosaic yet", ErrUnsupported)
	}
	all, p, err := d.mosaicInstances(ds, &md.mo)
	if err != nil {
		return b, err
	}
	all = md.perspInstances(all, &md.pp)
	if md.mix {
		two, p2, err := d.mosaicInstances(ds, &md.mixM)
		if err != nil {
			return b, fmt.Errorf("mixup partner (sample %d): %w", md.mixM.idx[0], err)
		}
		if p2 != p {
			return b, fmt.Errorf("%w: mixup partner (sample %d) has %d keypoints an instance, the sample %d", ErrUnsupported, md.mixM.idx[0], p2, p)
		}
		all = cv.Concat(all, md.perspInstances(two, &md.mixPP))
	}
	tg := &d.targets
	tg.reset()
	tg.ImageID = int64(md.mo.idx[0])
	tg.P = p
	if err := setMosaicTargets(&tg.Instances, &all); err != nil {
		return b, err
	}
	w, h, err := tg.Move(t.outW, t.outH, d.vd[0].steps)
	if err != nil {
		return b, err
	}
	tg.W, tg.H = w, h
	return AppendTargets(b, tg), nil
}

// setMosaicTargets appends in's instances to t (reset, its P set): boxes
// and classes, and with P, each instance's P keypoints and their
// visibilities (ultralytics' float visibility, 0, 1 or 2, as COCO's v).
func setMosaicTargets(t *dataset.Instances, in *cv.Instances) error {
	if t.P > 0 && len(in.Keypoints) != len(in.Boxes) {
		return fmt.Errorf("targets: a mosaic of %d instances with %d keypoint sets", len(in.Boxes), len(in.Keypoints))
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

// perspInstances is a mosaic's instances through the
// YOLORandomPerspective after it, if any (its draw pp):
// RandomPerspective.apply_instances.
func (md *multiDraw) perspInstances(in cv.Instances, pp *cv.PerspectiveParams) cv.Instances {
	if !md.persp {
		return in
	}
	s := cv.MosaicSize(md.mo.imgsz)
	return cv.PerspectiveInstances(in, cv.PerspectiveMatrix(*pp, s, s, md.w, md.h), pp.Scale, md.warp, md.w, md.h)
}

// mosaicInstances is one mosaic's instances and the keypoints an
// instance (0: none): each image's in pixels of its load_image size (a
// YOLO dataset's from its normalized labels with ultralytics' arithmetic,
// UltralyticsTargets, another's its SourceTargets at that size), moved by
// its tile, concatenated, clipped and the empty dropped
// (cv.MosaicInstances).
func (d *Decoder) mosaicInstances(ds Targeted, m *mosaicDraw) (cv.Instances, int, error) {
	ms := &d.multi
	ms.ins = ms.ins[:0]
	tg := &d.targets
	p := -1
	for j, i := range m.idx {
		w, h := m.sizes[j][0], m.sizes[j][1]
		tg.reset()
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
			return cv.Instances{}, 0, partnerErr(j, m, fmt.Errorf("%w: %d keypoints an instance, the mosaic's first image %d", ErrUnsupported, tg.P, p))
		}
		p = tg.P
		ms.ins = append(ms.ins, cvMosaicInstances(&tg.Instances))
	}
	return cv.MosaicInstances(ms.ins, m.tiles, m.imgsz), max(p, 0), nil
}

// cvMosaicInstances is t as ultralytics' Instances (cv.Instances): its
// boxes, labels and, with keypoints, each instance's (x, y, visibility);
// a copy, t being the Decoder's scratch.
func cvMosaicInstances(t *dataset.Instances) cv.Instances {
	in := cv.Instances{Boxes: append([][4]float32{}, t.Boxes...), Cls: append([]int64{}, t.Labels...)}
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

// partnerErr names the mosaic's image j in err (0: the sample's own).
func partnerErr(j int, m *mosaicDraw, err error) error {
	if j == 0 {
		return err
	}
	return fmt.Errorf("mosaic partner %d of %d (sample %d): %w", j, m.n-1, m.idx[j], err)
}
