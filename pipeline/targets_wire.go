package pipeline

// The targets' encoding on the wire (docs/detection.md gives the layout);
// their sources are pipeline/dataset's (COCO's annotations, YOLO's label
// files: Instances).

import (
	"encoding/binary"
	"math"
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
