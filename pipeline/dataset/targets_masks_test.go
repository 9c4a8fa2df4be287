package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

// TestSourceMasks: with WantMasks, a COCO sample's instances each get
// annot's mask of their segmentation (polygons merged, a run-length mask,
// none: zeros) at the image's size, and a decoded image of another size
// than the file says fails the sample naming the field; a YOLO segment
// line's polygon is scaled to pixels and rasterized, and a box line fails
// naming its label file and the field polygon.
func TestSourceMasks(t *testing.T) {
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
	ann := filepath.Join(dir, "instances.json")
	doc := `{"images": [{"id": 3, "file_name": "a.jpg", "width": 40, "height": 20}, {"id": 4, "file_name": "b.jpg", "width": 40, "height": 20}],
	 "categories": [{"id": 1, "name": "thing"}],
	 "annotations": [{"id": 10, "image_id": 3, "category_id": 1, "bbox": [1, 2, 10, 10], "segmentation": [[1, 2, 11, 2, 11, 12], [20, 1, 30, 1, 25, 9]]},
	                 {"id": 11, "image_id": 3, "category_id": 1, "bbox": [0, 0, 2, 1], "iscrowd": 1, "segmentation": {"size": [20, 40], "counts": [0, 1, 799]}},
	                 {"id": 12, "image_id": 3, "category_id": 1, "bbox": [20, 2, 5, 5]}]}`
	if err := os.WriteFile(ann, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cd, err := OpenCOCO(img, ann)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()
	tg := Instances{WantMasks: true}
	if err := cd.SourceTargets(0, 40, 20, &tg); err != nil {
		t.Fatal(err)
	}
	s, err := cd.Annotations().Sample(0)
	if err != nil {
		t.Fatal(err)
	}
	want0, _, err := cd.Annotations().Mask(&s, &s.Instances[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(tg.Masks) != 3 || !equalRLE(tg.Masks[0], want0) || tg.Masks[0].Area() == 0 {
		t.Fatalf("coco: %d masks, the first %v; want annot's %v", len(tg.Masks), tg.Masks, want0)
	}
	if m := tg.Masks[1]; m.Area() != 1 || m.H != 20 || m.W != 40 {
		t.Errorf("coco: the run-length mask is %v", m)
	}
	if m := tg.Masks[2]; m.Area() != 0 || m.H != 20 || m.W != 40 {
		t.Errorf("coco: no segmentation gave %v, want zeros of 40x20", m)
	}
	tg.Reset()
	if !tg.WantMasks || len(tg.Masks) != 0 {
		t.Errorf("Reset: WantMasks %v, %d masks", tg.WantMasks, len(tg.Masks))
	}
	err = cd.SourceTargets(0, 41, 20, &tg)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `instances.json: image 3 "a.jpg": field segmentation: the file says 40x20 and the image is 41x20`) {
		t.Errorf("coco, another size: %v", err)
	}

	lab := filepath.Join(dir, "labels", "train")
	if err := os.MkdirAll(lab, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(lab, "a.txt"), []byte("0 0.1 0.1 0.6 0.1 0.5 0.9 0.2 0.8\n"), 0o644)
	os.WriteFile(filepath.Join(lab, "b.txt"), []byte("0 0.5 0.5 0.2 0.2\n"), 0o644)
	yaml := filepath.Join(dir, "data.yaml")
	os.WriteFile(yaml, []byte("names: [thing]\n"), 0o644)
	yd, err := OpenYOLO(img, yaml)
	if err != nil {
		t.Fatal(err)
	}
	defer yd.Close()
	tg.Reset()
	if err := yd.SourceTargets(0, 40, 20, &tg); err != nil {
		t.Fatal(err)
	}
	xy := []float64{float64(float32(0.1) * 40), float64(float32(0.1) * 20), float64(float32(0.6) * 40), float64(float32(0.1) * 20),
		float64(float32(0.5) * 40), float64(float32(0.9) * 20), float64(float32(0.2) * 40), float64(float32(0.8) * 20)}
	want, err := annot.FromPolygon(xy, 20, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(tg.Masks) != 1 || !equalRLE(tg.Masks[0], want) || want.Area() == 0 {
		t.Errorf("yolo: masks %v, want %v", tg.Masks, want)
	}
	tg.Reset()
	err = yd.SourceTargets(1, 40, 20, &tg)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "labels/train/b.txt: instance 0: field polygon: a box line has no mask") {
		t.Errorf("yolo, a box line: %v", err)
	}
}

func equalRLE(a, b annot.RLE) bool {
	return a.H == b.H && a.W == b.W && slices.Equal(a.Counts, b.Counts)
}
