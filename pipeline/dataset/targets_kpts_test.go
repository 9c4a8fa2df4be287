package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSourceKeypoints: a COCO file's instances get its most keypoints of
// a category, zeros with visibility 0 where an instance has none; a YOLO
// pose dataset's points are in pixels, and a visibility other than 0, 1
// or 2 fails the sample naming the label file and the field.
func TestSourceKeypoints(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "images", "train")
	if err := os.MkdirAll(img, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a.jpg", "b.jpg"} {
		if err := os.WriteFile(filepath.Join(img, n), []byte("not decoded"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ann := filepath.Join(dir, "person_keypoints.json")
	doc := `{"images": [{"id": 3, "file_name": "a.jpg", "width": 40, "height": 20}, {"id": 4, "file_name": "b.jpg", "width": 40, "height": 20}],
	 "categories": [{"id": 1, "name": "person", "keypoints": ["nose", "eye"]}, {"id": 2, "name": "ball"}],
	 "annotations": [{"id": 10, "image_id": 3, "category_id": 1, "bbox": [1, 2, 10, 10], "keypoints": [3.25, 4, 2, 0, 0, 0], "num_keypoints": 1},
	                 {"id": 11, "image_id": 3, "category_id": 2, "bbox": [20, 2, 5, 5]},
	                 {"id": 12, "image_id": 4, "category_id": 1, "bbox": [1, 2, 10, 10], "keypoints": [1, 2, 2], "num_keypoints": 1}]}`
	if err := os.WriteFile(ann, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cd, err := OpenCOCO(img, ann)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()
	var tg Instances
	if err := cd.SourceTargets(0, 40, 20, &tg); err != nil {
		t.Fatal(err)
	}
	if tg.P != 2 || len(tg.Points) != 4 || tg.Points[0] != [2]float32{3.25, 4} || tg.Points[2] != [2]float32{} || string(tg.Vis) != "\x02\x00\x00\x00" {
		t.Errorf("coco: P %d points %v vis %v", tg.P, tg.Points, tg.Vis)
	}
	tg.Reset()
	if err := cd.SourceTargets(1, 40, 20, &tg); err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "field keypoints") {
		t.Errorf("coco, wrong length: %v", err)
	}

	lab := filepath.Join(dir, "labels", "train")
	if err := os.MkdirAll(lab, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(lab, "a.txt"), []byte("0 0.5 0.5 0.2 0.2 0.25 0.5 2 0.1 0.2 0\n"), 0o644)
	os.WriteFile(filepath.Join(lab, "b.txt"), []byte("0 0.5 0.5 0.2 0.2 0.25 0.5 0.5 0.1 0.2 0\n"), 0o644)
	yaml := filepath.Join(dir, "data.yaml")
	os.WriteFile(yaml, []byte("kpt_shape: [2, 3]\nnames: [person]\n"), 0o644)
	yd, err := OpenYOLO(img, yaml)
	if err != nil {
		t.Fatal(err)
	}
	defer yd.Close()
	tg.Reset()
	if err := yd.SourceTargets(0, 40, 20, &tg); err != nil {
		t.Fatal(err)
	}
	if tg.P != 2 || tg.Points[0] != [2]float32{10, 10} || tg.Points[1] != [2]float32{float32(float32(0.1) * 40), float32(float32(0.2) * 20)} || string(tg.Vis) != "\x02\x00" {
		t.Errorf("yolo: P %d points %v vis %v", tg.P, tg.Points, tg.Vis)
	}
	tg.Reset()
	err = yd.SourceTargets(1, 40, 20, &tg)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "labels/train/b.txt: instance 0: field keypoints: keypoint 0 has visibility 0.5") {
		t.Errorf("yolo, visibility 0.5: %v", err)
	}
}
