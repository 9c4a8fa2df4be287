package bench

import (
	"context"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/transform"
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

// TestDetectionSetSized: mkdata --coco --max-side 640 --instances 7 writes
// COCO's sizes (the longer side 640, the shorter 0.6 to 0.9 of it) and
// about its density; and `stoker bench pipeline --annotations` counts the
// targets of its batches as the wire encodes them: 24 bytes a sample and,
// the stars carrying 5 keypoints, 25 + 5 x 9 an instance (AppendTargets).
func TestDetectionSetSized(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	set, err := WriteDetectionSetSized(context.Background(), dir, n, 1, false, "", DetectionSize{MaxSide: 640, Instances: 7})
	if err != nil {
		t.Fatal(err)
	}
	c, err := annot.OpenCOCO(set.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Len() {
		s, err := c.Sample(i)
		if err != nil {
			t.Fatal(err)
		}
		long, short := max(s.Image.Width, s.Image.Height), min(s.Image.Width, s.Image.Height)
		if long != 640 || short < 384 || short > 576 {
			t.Fatalf("%s: %dx%d, want 640 by 384 to 576", s.Image.FileName, s.Image.Width, s.Image.Height)
		}
	}
	if per := float64(set.NumAnns) / n; per < 4 || per > 10 {
		t.Fatalf("%.1f annotations an image, want about 7", per)
	}
	ds, err := dataset.OpenAnnotated(set.Images, set.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	fs, err := dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 1<<20, "bench")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transform.ParseTransform("detr", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	ex := pipeline.NewExecutor(1)
	defer ex.Close()
	r := benchPipeline(ex, nil, nil, ds, fs, tr, 8, 2, 0)
	if r.Epoch1.Errors+r.Later.Errors != 0 || r.Targets == nil {
		t.Fatalf("errors %d and %d, targets %v", r.Epoch1.Errors, r.Later.Errors, r.Targets)
	}
	tg := r.Targets
	if tg.Samples != 2*n || tg.InstancesPerSample <= 0 || tg.ImageBytesPerSample != 3*640*640 {
		t.Fatalf("targets %+v: want %d samples with instances, %d bytes of pixels each", tg, 2*n, 3*640*640)
	}
	if want := 24 + 70*tg.InstancesPerSample; math.Abs(tg.BytesPerSample-want) > 1e-9 {
		t.Fatalf("%.3f bytes a sample of targets for %.3f instances: want 24 + 70 an instance, %.3f", tg.BytesPerSample, tg.InstancesPerSample, want)
	}
	if want := tg.BytesPerSample / (tg.BytesPerSample + tg.ImageBytesPerSample); math.Abs(tg.Share-want) > 1e-12 {
		t.Fatalf("share %g, want %g", tg.Share, want)
	}
}
