package annot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestReadSampleJSON: a WebDataset sample's COCO-style member gives its
// instances as a COCO file's annotations would (bbox, category id as
// given, crowd, keypoints, segmentation checked); everything malformed is
// a SampleError naming the member, the annotation and the field.
func TestReadSampleJSON(t *testing.T) {
	const name = "shard-000000.tar/000007.json"
	good := `{"image_id": 42, "width": 8, "height": 6, "caption": "ignored", "annotations": [
	  {"bbox": [1.5, 2, 3.25, 1], "category_id": 17, "keypoints": [1, 2, 2, 0, 0, 0]},
	  {"bbox": [0, 0, 8, 6], "category_id": 3, "iscrowd": 1, "segmentation": {"size": [6, 8], "counts": [0, 48]}, "id": 99},
	  {"bbox": [4, 4, 1, 1], "category_id": 17, "segmentation": [[4, 4, 5, 4, 5, 5]]}]}`
	s, err := ReadSampleJSON(name, []byte(good), 8, 6)
	if err != nil {
		t.Fatal(err)
	}
	if !s.HasID || s.ImageID != 42 || len(s.Instances) != 3 {
		t.Fatalf("%+v", s)
	}
	in := s.Instances
	if in[0].BBox != [4]float64{1.5, 2, 3.25, 1} || in[0].CategoryID != 17 || in[0].IsCrowd || len(in[0].Keypoints) != 6 ||
		in[1].CategoryID != 3 || !in[1].IsCrowd || in[1].ID != 99 || in[2].Segmentation == nil {
		t.Fatalf("instances %+v", in)
	}
	if s, err := ReadSampleJSON(name, []byte(`{"annotations": []}`), 8, 6); err != nil || s.HasID || len(s.Instances) != 0 {
		t.Fatalf("no instances: %+v %v", s, err)
	}
	ann := func(a string) string { return `{"annotations": [{"bbox": [0, 0, 1, 1], "category_id": 1}, ` + a + `]}` }
	many := `{"annotations": [` + strings.Repeat(`{"bbox": [0, 0, 1, 1], "category_id": 1}, `, MaxInstances) + `{"bbox": [0, 0, 1, 1], "category_id": 1}]}`
	for _, c := range []struct{ doc, annotation, field string }{
		{`[1, 2]`, "file", "json"},
		{`{"annotations": [1, 2}`, "file", "json"},
		{`{"boxes": [[0, 0, 1, 1]]}`, "file", "annotations"},
		{`{"annotations": {"bbox": [0, 0, 1, 1]}}`, "file", "annotations"},
		{`{"annotations": []} {}`, "file", "json"},
		{`{"image_id": "x", "annotations": []}`, "file", "image_id"},
		{`{"width": 9, "annotations": []}`, "file", "width"},
		{`{"height": 5, "annotations": []}`, "file", "height"},
		{many, "file", "annotations"},
		{ann(`7`), "annotation 1", "json"},
		{ann(`{"bbox": [0, 0, 1, 1]}`), "annotation 1", "category_id"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1.5}`), "annotation 1", "category_id"},
		{ann(`{"category_id": 1}`), "annotation 1", "bbox"},
		{ann(`{"bbox": [NaN, 0, 1, 1], "category_id": 1}`), "annotation 1", "bbox"},
		{ann(`{"bbox": [0, 0, 1], "category_id": 1}`), "annotation 1", "bbox"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1, "iscrowd": 2}`), "annotation 1", "iscrowd"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1, "keypoints": [1, 2]}`), "annotation 1", "keypoints"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1, "keypoints": [1, 2, 3]}`), "annotation 1", "keypoints"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1, "segmentation": [[0, 0, 1, 1]]}`), "annotation 1", "segmentation"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1, "segmentation": {"size": [5, 8], "counts": [0, 40]}}`), "annotation 1", "segmentation"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1, "area": -1}`), "annotation 1", "area"},
		// Past int64, or finite in float64 but not in float32 (the targets').
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1, "id": 99999999999999999999}`), "annotation 1", "id"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 99999999999999999999}`), "annotation 1", "category_id"},
		{`{"image_id": 99999999999999999999, "annotations": []}`, "file", "image_id"},
		{ann(`{"bbox": [0, 0, 1e39, 1], "category_id": 1}`), "annotation 1", "bbox"},
		{ann(`{"bbox": [0, 0, 1, 1], "category_id": 1, "keypoints": [1e39, 2, 2]}`), "annotation 1", "keypoints"},
	} {
		_, err := ReadSampleJSON(name, []byte(c.doc), 8, 6)
		var se *SampleError
		if !errors.As(err, &se) || se.File != name || se.Annotation != c.annotation || se.Field != c.field {
			t.Errorf("%.80s: %v; want a SampleError of %s, %s, field %s", c.doc, err, name, c.annotation, c.field)
		}
	}
	big := fmt.Sprintf(`{"annotations": [], "pad": "%s"}`, strings.Repeat("x", MaxSampleJSON))
	if _, err := ReadSampleJSON(name, []byte(big), 8, 6); err == nil || !strings.Contains(err.Error(), "field size") {
		t.Errorf("a member over %d bytes: %v", MaxSampleJSON, err)
	}
}

// FuzzReadSampleJSON: any bytes are a sample's instances, each with a
// box of size at least 0 finite in float32 (its corners too) and its
// keypoints in triplets, finite in float32, or a
// SampleError naming the member; never a panic.
func FuzzReadSampleJSON(f *testing.F) {
	f.Add([]byte(`{"annotations": [{"bbox": [1, 2, 3, 4], "category_id": 1, "keypoints": [1, 2, 2], "segmentation": [[0, 0, 4, 0, 4, 4]]}]}`))
	f.Add([]byte(`{"image_id": 3, "width": 8, "annotations": [{"bbox": [NaN, 0, 1, 1], "category_id": 1, "segmentation": {"size": [6, 8], "counts": "12"}}]}`))
	f.Add([]byte(`{"annotations": []}`))
	f.Add([]byte(`[1, 2]`))
	f.Add([]byte(`{"annotations": [{"bbox": [3e38, 0, 3e38, 1e39], "category_id": 99999999999999999999, "id": 1e30, "keypoints": [1e39, 2, 2]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSampleJSON("s.tar/k.json", data, 8, 6)
		if err != nil {
			var se *SampleError
			if !errors.As(err, &se) || se.File != "s.tar/k.json" || se.Field == "" {
				t.Fatalf("not a SampleError naming the member and a field: %v", err)
			}
			return
		}
		for _, in := range s.Instances {
			for _, v := range in.BBox {
				if v != v || v > 1e308 || v < -1e308 {
					t.Fatalf("box %v", in.BBox)
				}
			}
			if in.BBox[2] < 0 || in.BBox[3] < 0 || len(in.Keypoints)%3 != 0 {
				t.Fatalf("instance %+v", in)
			}
			x2, y2 := float32(in.BBox[0])+float32(in.BBox[2]), float32(in.BBox[1])+float32(in.BBox[3])
			if !finite32(in.BBox[0]) || !finite32(in.BBox[1]) || !finite32(float64(x2)) || !finite32(float64(y2)) {
				t.Fatalf("box %v: not finite in float32", in.BBox)
			}
			for _, v := range in.Keypoints {
				if !finite32(v) {
					t.Fatalf("keypoints %v: not finite in float32", in.Keypoints)
				}
			}
		}
	})
}

// BenchmarkReadSampleJSON: a COCO-like sample's member (7 instances with
// polygons of 20 vertices, one crowd RLE) read and checked, as each
// sample's targets are made.
func BenchmarkReadSampleJSON(b *testing.B) {
	var anns []string
	for k := range 7 {
		var poly []string
		for j := range 20 {
			poly = append(poly, fmt.Sprintf("%d.5, %d.25", 100+k*30+j%5*4, 80+j*3))
		}
		anns = append(anns, fmt.Sprintf(`{"bbox": [%d.5, 80.25, 20, 57], "category_id": %d, "iscrowd": 0, "area": 812.5, "segmentation": [[%s]]}`,
			100+k*30, k%3+1, strings.Join(poly, ", ")))
	}
	anns = append(anns, `{"bbox": [0, 0, 640, 480], "category_id": 1, "iscrowd": 1, "segmentation": {"size": [480, 640], "counts": [1000, 5000, 301200]}}`)
	doc := []byte(`{"image_id": 9, "width": 640, "height": 480, "annotations": [` + strings.Join(anns, ", ") + `]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := ReadSampleJSON("s.tar/k.json", doc, 640, 480); err != nil {
			b.Fatal(err)
		}
	}
}
