package cv

import "testing"

// TestConcatResamplesSegments: instances whose segments differ in length
// are concatenated with the shorter resampled to the longer (ultralytics'
// Instances.concatenate), and MixedSegments tells a list of polygons and
// box lines alone from one of polygons and empty images.
func TestConcatResamplesSegments(t *testing.T) {
	seg := func(k int, x float32) [][2]float32 {
		s := make([][2]float32, k)
		for i := range s {
			s[i] = [2]float32{x + float32(i), x}
		}
		return s
	}
	a := Instances{Boxes: [][4]float32{{0, 0, 1, 1}}, Cls: []int64{0}, Segments: [][][2]float32{seg(1000, 0)}}
	b := Instances{Boxes: [][4]float32{{0, 0, 1, 1}, {1, 1, 2, 2}}, Cls: []int64{1, 2}, Segments: [][][2]float32{seg(1202, 5), seg(1202, 7)}}
	empty := Instances{Boxes: [][4]float32{}, Cls: []int64{}}
	out := Concat(a, empty, b)
	if err := out.Check(); err != nil || out.Len() != 3 || len(out.Segments[0]) != 1202 {
		t.Fatalf("Concat: %v, %d instances, first segment of %d points", err, out.Len(), len(out.Segments[0]))
	}
	if out.Segments[0][0] != a.Segments[0][0] || &out.Segments[1][0] != &b.Segments[0][0] {
		t.Error("Concat: the first point moved, or the longer segments were copied")
	}
	boxes := Instances{Boxes: [][4]float32{{0, 0, 1, 1}}, Cls: []int64{3}}
	if MixedSegments(a, empty, b) || !MixedSegments(a, boxes) || MixedSegments(boxes, empty) {
		t.Error("MixedSegments")
	}
}
