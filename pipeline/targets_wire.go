package pipeline

// The targets' sources (COCO's annotations, YOLO's label files) and their
// encoding on the wire (docs/detection.md gives the layout).

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

// AppendTargets appends t's encoding, little-endian: u32 H, u32 W (the
// canvas), i64 image id, u32 K, u32 the boxes' format (its low byte) and
// P, the keypoints an instance (the bits above: P << 8); then K x 4
// float32 boxes, K int64 labels, K x P x 2 float32 keypoints (x, y), K
// uint8 crowd flags, K x P uint8 visibilities. The header is 24 bytes, so
// the boxes, labels and keypoints are aligned within it. A sample of a
// dataset without keypoints (P = 0) is 24 + 25K bytes, as before them.
func AppendTargets(b []byte, t *Targets) []byte {
	le := binary.LittleEndian
	k := len(t.Boxes)
	b = le.AppendUint32(b, uint32(t.H))
	b = le.AppendUint32(b, uint32(t.W))
	b = le.AppendUint64(b, uint64(t.ImageID))
	b = le.AppendUint32(b, uint32(k))
	b = le.AppendUint32(b, uint32(t.Format)|uint32(t.P)<<8)
	for _, bx := range t.Boxes {
		for _, v := range bx {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	for _, l := range t.Labels {
		b = le.AppendUint64(b, uint64(l))
	}
	if t.P > 0 {
		for _, p := range t.Points {
			b = le.AppendUint32(b, math.Float32bits(p[0]))
			b = le.AppendUint32(b, math.Float32bits(p[1]))
		}
	}
	b = append(b, t.Crowd...)
	if t.P > 0 {
		b = append(b, t.Vis...)
	}
	return b
}

// TargetsSize is the bytes AppendTargets writes for k instances of p
// keypoints each.
func TargetsSize(k, p int) int64 {
	return targetsHeader + int64(k)*(16+8+1) + int64(k)*int64(p)*(8+1)
}

// SourceTargets implements Targeted: the image's annotations, bbox XYWH
// to XYXY as torchvision's CocoDetection wrapper converts it (float32),
// crowds kept; the image id is COCO's. A file with keypoints gives every
// instance the file's most keypoints of a category (annot.COCO.Keypoints),
// each (x, y) made float32 (addCOCOPoints).
func (d *COCODataset) SourceTargets(i, w, h int, t *Targets) error {
	s, err := d.ann.Sample(i)
	if err != nil {
		return &annotationError{err}
	}
	t.ImageID = s.Image.ID
	t.P = d.ann.Keypoints()
	for k := range s.Instances {
		in := &s.Instances[k]
		t.add(xywhToXYXY(in.BBox), int64(in.Label), in.IsCrowd)
		t.addCOCOPoints(in.Keypoints)
	}
	return nil
}

// SourceTargets implements Targeted: each label's box (normalized cx, cy,
// w, h) in pixels of the w x h image (yoloToXYXY), its class the label;
// the image id is the sample's index. YOLO has no crowds. A pose dataset
// (kpt_shape) gives each instance its points in pixels (addYOLOPoints);
// a visibility other than 0, 1 or 2 is the sample's error, naming the
// label file.
func (d *YOLODataset) SourceTargets(i, w, h int, t *Targets) error {
	ls, err := d.Labels(i)
	if err != nil {
		return err // an annotationError already
	}
	t.ImageID = int64(i)
	t.P = d.cfg.KptShape[0]
	for k := range ls {
		t.add(yoloToXYXY(ls[k].Box, w, h), int64(ls[k].Class), false)
		if t.P == 0 {
			continue
		}
		if err := t.addYOLOPoints(ls[k].Keypoints, w, h); err != nil {
			lp := annot.LabelPath(filepath.Join(d.dir, filepath.FromSlash(d.Name(i))))
			return &annotationError{&annot.SampleError{File: labelName(d.dir, lp), Annotation: fmt.Sprintf("instance %d", k), Field: "keypoints", Err: err}}
		}
	}
	return nil
}
