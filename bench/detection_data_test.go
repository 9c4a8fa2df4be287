package bench

import (
	"context"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/annot"
)

// TestWriteDetectionSet: the COCO file reads without a malformed sample,
// every image is there at its size, and the YOLO labels say the same
// instances (less crowds) as the COCO file, normalized.
func TestWriteDetectionSet(t *testing.T) {
	dir := t.TempDir()
	set, err := WriteDetectionSet(context.Background(), dir, 12, 3, true, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := annot.OpenCOCO(set.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := annot.OpenYOLOConfig(set.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 12 || c.Annotations() != set.NumAnns || len(cfg.Names) != len(c.Categories()) {
		t.Fatalf("%d images, %d annotations, %d names", c.Len(), c.Annotations(), len(cfg.Names))
	}
	crowds, stars := 0, 0
	for i := range c.Len() {
		s, err := c.Sample(i)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(set.Images, s.Image.FileName))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := jpeg.DecodeConfig(f)
		f.Close()
		if err != nil || cf.Width != s.Image.Width || cf.Height != s.Image.Height {
			t.Fatalf("%s: %dx%d (%v), the file says %dx%d", s.Image.FileName, cf.Width, cf.Height, err, s.Image.Width, s.Image.Height)
		}
		ys, err := annot.ReadYOLOLabels(filepath.Join(set.Images, s.Image.FileName), cfg)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for j := range s.Instances {
			in := &s.Instances[j]
			if in.IsCrowd {
				crowds++
				continue
			}
			if len(in.Keypoints) > 0 {
				stars++
			}
			y := ys[k]
			k++
			if y.Class != in.Label {
				t.Fatalf("%s: YOLO class %d, COCO label %d", s.Image.FileName, y.Class, in.Label)
			}
			w, h := float64(s.Image.Width), float64(s.Image.Height)
			want := [4]float64{(in.BBox[0] + in.BBox[2]/2) / w, (in.BBox[1] + in.BBox[3]/2) / h, in.BBox[2] / w, in.BBox[3] / h}
			for q := range 4 {
				if math.Abs(float64(y.Box[q])-want[q]) > 1e-5 {
					t.Fatalf("%s: YOLO box %v, COCO's normalized %v", s.Image.FileName, y.Box, want)
				}
			}
		}
		if k != len(ys) {
			t.Fatalf("%s: %d YOLO lines, %d COCO instances not crowds", s.Image.FileName, len(ys), k)
		}
	}
	if crowds == 0 || stars == 0 {
		t.Fatalf("%d crowds and %d stars: want some of each", crowds, stars)
	}
}
