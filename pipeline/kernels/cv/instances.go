package cv

import "fmt"

// Instances are a sample's labels as ultralytics' Instances holds them in
// its training transforms: boxes XYXY in pixels (after convert_bbox("xyxy")
// and denormalize), segments (n polygons of one length k, [n][k][2], or
// none), keypoints ([n][p][3]: x, y, visibility, or none), one class each.
// All float32, as numpy holds them; the kernels move them in place or
// return new ones.
type Instances struct {
	Boxes     [][4]float32
	Segments  [][][2]float32
	Keypoints [][][3]float32
	Cls       []int64
}

// Len is the number of instances.
func (in *Instances) Len() int { return len(in.Boxes) }

// Check says what is wrong with in: lengths that disagree, segments or
// keypoints of unequal lengths.
func (in *Instances) Check() error {
	n := len(in.Boxes)
	if len(in.Cls) != n {
		return fmt.Errorf("cv: %d boxes and %d classes", n, len(in.Cls))
	}
	if in.Segments != nil && len(in.Segments) != n {
		return fmt.Errorf("cv: %d boxes and %d segments", n, len(in.Segments))
	}
	if in.Keypoints != nil && len(in.Keypoints) != n {
		return fmt.Errorf("cv: %d boxes and %d keypoint sets", n, len(in.Keypoints))
	}
	for i := 1; i < len(in.Segments); i++ {
		if len(in.Segments[i]) != len(in.Segments[0]) {
			return fmt.Errorf("cv: segments of %d and %d points: resample them to one length first", len(in.Segments[0]), len(in.Segments[i]))
		}
	}
	for i := 1; i < len(in.Keypoints); i++ {
		if len(in.Keypoints[i]) != len(in.Keypoints[0]) {
			return fmt.Errorf("cv: keypoint sets of %d and %d points", len(in.Keypoints[0]), len(in.Keypoints[i]))
		}
	}
	return nil
}

// Scale multiplies every coordinate by (sw, sh) in float32 (Instances.scale;
// the boxes alone with boxesOnly).
func (in *Instances) Scale(sw, sh float32, boxesOnly bool) {
	for i := range in.Boxes {
		b := &in.Boxes[i]
		b[0], b[1], b[2], b[3] = b[0]*sw, b[1]*sh, b[2]*sw, b[3]*sh
	}
	if boxesOnly {
		return
	}
	for _, s := range in.Segments {
		for j := range s {
			s[j][0], s[j][1] = s[j][0]*sw, s[j][1]*sh
		}
	}
	for _, k := range in.Keypoints {
		for j := range k {
			k[j][0], k[j][1] = k[j][0]*sw, k[j][1]*sh
		}
	}
}

// AddPadding adds (padw, padh) to every coordinate (Instances.add_padding).
func (in *Instances) AddPadding(padw, padh float32) {
	for i := range in.Boxes {
		b := &in.Boxes[i]
		b[0], b[1], b[2], b[3] = b[0]+padw, b[1]+padh, b[2]+padw, b[3]+padh
	}
	for _, s := range in.Segments {
		for j := range s {
			s[j][0], s[j][1] = s[j][0]+padw, s[j][1]+padh
		}
	}
	for _, k := range in.Keypoints {
		for j := range k {
			k[j][0], k[j][1] = k[j][0]+padw, k[j][1]+padh
		}
	}
}

func clamp32(v, lo, hi float32) float32 { return min(max(v, lo), hi) }

// Clip is Instances.clip(w, h) (preserve_obb off): boxes' and segments' x
// within [0, w] and y within [0, h]; keypoints outside get visibility 0,
// then are clipped likewise.
func (in *Instances) Clip(w, h int) {
	fw, fh := float32(w), float32(h)
	for i := range in.Boxes {
		b := &in.Boxes[i]
		b[0], b[1], b[2], b[3] = clamp32(b[0], 0, fw), clamp32(b[1], 0, fh), clamp32(b[2], 0, fw), clamp32(b[3], 0, fh)
	}
	for _, s := range in.Segments {
		for j := range s {
			s[j][0], s[j][1] = clamp32(s[j][0], 0, fw), clamp32(s[j][1], 0, fh)
		}
	}
	for _, k := range in.Keypoints {
		for j := range k {
			x, y := k[j][0], k[j][1]
			if x < 0 || x > fw || y < 0 || y > fh {
				k[j][2] = 0
			}
			k[j][0], k[j][1] = clamp32(x, 0, fw), clamp32(y, 0, fh)
		}
	}
}

// Keep keeps the instances whose keep is true, in order.
func (in *Instances) Keep(keep []bool) {
	j := 0
	for i := range in.Boxes {
		if !keep[i] {
			continue
		}
		in.Boxes[j], in.Cls[j] = in.Boxes[i], in.Cls[i]
		if in.Segments != nil {
			in.Segments[j] = in.Segments[i]
		}
		if in.Keypoints != nil {
			in.Keypoints[j] = in.Keypoints[i]
		}
		j++
	}
	in.Boxes, in.Cls = in.Boxes[:j], in.Cls[:j]
	if in.Segments != nil {
		in.Segments = in.Segments[:j]
	}
	if in.Keypoints != nil {
		in.Keypoints = in.Keypoints[:j]
	}
}

// RemoveZeroArea drops the boxes whose float32 area (x2-x1)*(y2-y1) is not
// above 0 (remove_zero_area_boxes), and what goes with them.
func (in *Instances) RemoveZeroArea() {
	keep := make([]bool, len(in.Boxes))
	for i, b := range in.Boxes {
		keep[i] = (b[2]-b[0])*(b[3]-b[1]) > 0
	}
	in.Keep(keep)
}

// Concat is Instances.concatenate of instances with their classes: where
// any have segments, every list with instances must have them (MixedSegments
// says so beforehand).
func Concat(list ...Instances) Instances {
	var out Instances
	segs, kpts := false, false
	for _, in := range list {
		segs = segs || len(in.Segments) > 0
		kpts = kpts || in.Keypoints != nil
	}
	// Segments of unequal lengths are resampled to the longest
	// (Instances.concatenate: resample_segments).
	longest, equal := 0, true
	for _, in := range list {
		if len(in.Segments) > 0 {
			k := len(in.Segments[0])
			equal = equal && (longest == 0 || k == longest)
			longest = max(longest, k)
		}
	}
	for _, in := range list {
		out.Boxes = append(out.Boxes, in.Boxes...)
		out.Cls = append(out.Cls, in.Cls...)
		switch {
		case segs && !equal:
			out.Segments = append(out.Segments, ResampleSegments(in.Segments, longest)...)
		case segs:
			out.Segments = append(out.Segments, in.Segments...)
		}
		if kpts {
			out.Keypoints = append(out.Keypoints, in.Keypoints...)
		}
	}
	if out.Boxes == nil {
		out.Boxes, out.Cls = [][4]float32{}, []int64{}
	}
	return out
}

// Clone is a deep copy.
func (in *Instances) Clone() Instances {
	out := Instances{Boxes: append([][4]float32{}, in.Boxes...), Cls: append([]int64{}, in.Cls...)}
	if in.Segments != nil {
		out.Segments = make([][][2]float32, len(in.Segments))
		for i, s := range in.Segments {
			out.Segments[i] = append([][2]float32{}, s...)
		}
	}
	if in.Keypoints != nil {
		out.Keypoints = make([][][3]float32, len(in.Keypoints))
		for i, k := range in.Keypoints {
			out.Keypoints[i] = append([][3]float32{}, k...)
		}
	}
	return out
}

// FromYOLO is the pixel XYXY boxes of normalized YOLO xywh boxes as
// ultralytics makes them: xywh2xyxy in float32 (x - w/2, x + w/2), then
// denormalize (times the image's w and h in float32).
func FromYOLO(xywh [][4]float32, w, h int) [][4]float32 {
	out := make([][4]float32, len(xywh))
	fw, fh := float32(w), float32(h)
	for i, b := range xywh {
		hw, hh := float32(b[2]/2), float32(b[3]/2)
		out[i] = [4]float32{(b[0] - hw) * fw, (b[1] - hh) * fh, (b[0] + hw) * fw, (b[1] + hh) * fh}
	}
	return out
}

// MixedSegments says whether list mixes instances with segments and
// instances without (an image of box lines beside one of polygons):
// ultralytics' Instances.concatenate would pair the segments with the
// wrong boxes then.
func MixedSegments(list ...Instances) bool {
	with, without := false, false
	for _, in := range list {
		if len(in.Segments) > 0 {
			with = true
		} else if len(in.Boxes) > 0 {
			without = true
		}
	}
	return with && without
}
