package main

import (
	"fmt"
	"image"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestPreviewBucket: stoker preview draws a bucket's samples as it does a
// local directory's (it said "no such file or directory" of an s3://
// URL), and a dataset none of whose samples decode is an error naming
// them, not an empty picture.
func TestPreviewBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker and versitygw processes")
	}
	ctx := processTest(t, 2*time.Minute)
	data := writeDataset(t, 8, 2, 0)
	s := s3Env(t)
	s.PutTree(t, "bkt", "if/", data)
	out := filepath.Join(t.TempDir(), "grid.png")
	if _, errOut, err := runStoker(ctx, nil, "preview", "--data", s.URL("bkt", "if/"), "--transform", "imagenet-eval", "-n", "4", "-o", out); err != nil {
		t.Fatalf("preview of s3://bkt/if/: %v\n%s", err, errOut)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 2*224 {
		t.Fatalf("preview wrote %v (%v), want a 2x2 grid of 224-pixel samples", img.Bounds(), err)
	}

	bad := t.TempDir()
	for _, name := range []string{"a/1.jpg", "b/2.jpg"} {
		os.MkdirAll(filepath.Join(bad, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(bad, name), []byte("not a JPEG"), 0o644)
	}
	_, errOut, err := runStoker(ctx, nil, "preview", "--data", bad, "-o", filepath.Join(t.TempDir(), "bad.png"))
	if err == nil || !strings.Contains(errOut, "none of the 2 samples could be made") || !strings.Contains(errOut, "a/1.jpg") {
		t.Errorf("preview of files that are not images: %v\n%s\nwant an error naming them", err, errOut)
	}
}

// TestPreviewNoSamples: -n 0 (or less) is an error saying so, exit 1, and
// no picture, not an empty grid written with exit 0.
func TestPreviewNoSamples(t *testing.T) {
	ctx := processTest(t, time.Minute)
	data := writeDataset(t, 4, 1, 0)
	for _, n := range []string{"0", "-3"} {
		out := filepath.Join(t.TempDir(), "grid.png")
		_, errOut, err := runStoker(ctx, nil, "preview", "--data", data, "-n", n, "-o", out)
		if err == nil || !strings.Contains(errOut, "-n "+n+": want at least 1 sample") {
			t.Errorf("preview -n %s: %v\n%s\nwant an error saying -n wants at least 1", n, err, errOut)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("preview -n %s wrote %s", n, out)
		}
	}
}

// TestPreviewViews: a preset of several views previews each sample as its
// views side by side.
func TestPreviewViews(t *testing.T) {
	ctx := processTest(t, 2*time.Minute)
	data := writeDataset(t, 4, 1, 0)
	out := filepath.Join(t.TempDir(), "grid.png")
	if _, errOut, err := runStoker(ctx, nil, "preview", "--data", data, "--transform", "dino", "-n", "1", "-o", out); err != nil {
		t.Fatalf("preview of dino: %v\n%s", err, errOut)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if want := 2*224 + 8*96; err != nil || img.Bounds().Dx() < want || img.Bounds().Dy() < 224 {
		t.Fatalf("preview wrote %v (%v), want one cell of dino's 10 views side by side (%d px wide)", img.Bounds(), err, want)
	}
}

// TestPreviewAnnotated: stoker preview of a COCO set (its instances
// JSON) and of a YOLO set (its data.yaml) draws each sample's boxes in
// its label's colour on the box's edges, and the COCO set's masks blended
// over the instances' pixels (those pixels differ from the picture drawn
// with --masks=false, towards the colour; the pixels of no instance and no
// box are the same in both). The targets are the pipeline's own for the
// same seed, epoch and samples.
func TestPreviewAnnotated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ctx := processTest(t, 3*time.Minute)
	dir := t.TempDir()
	if _, errOut, err := runStoker(ctx, nil, "mkdata", "--coco", "--yolo", "--out", dir, "--n", "4", "--max-side", "200"); err != nil {
		t.Fatalf("mkdata: %v\n%s", err, errOut)
	}
	images := filepath.Join(dir, "images", "train")
	for _, c := range []struct{ ann, transform string }{
		{filepath.Join(dir, "annotations", "instances.json"), "imagenet-eval"},
		{filepath.Join(dir, "data.yaml"), "imagenet-eval"},
	} {
		pics := map[bool]*image.RGBA{}
		for _, masks := range []bool{true, false} {
			out := filepath.Join(t.TempDir(), "p.png")
			if _, errOut, err := runStoker(ctx, nil, "preview", "--data", images, "--annotations", c.ann, "--transform", c.transform,
				"-n", "4", "--seed", "3", fmt.Sprintf("--masks=%v", masks), "-o", out); err != nil {
				t.Fatalf("preview --annotations %s: %v\n%s", c.ann, err, errOut)
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			rgba := image.NewRGBA(img.Bounds())
			draw.Draw(rgba, rgba.Bounds(), img, image.Point{}, draw.Src)
			pics[masks] = rgba
		}
		// The same samples' targets, made here.
		ds, err := dataset.OpenAnnotatedSource(ctx, images, c.ann)
		if err != nil {
			t.Fatal(err)
		}
		fset, err := dataset.NewFieldSet(ds, []string{transform.FieldTargets}, 64<<20, "test")
		if err != nil {
			t.Fatal(err)
		}
		fset.SetMasks(64 << 20)
		tr, err := transform.ParseTransform(c.transform, transform.HWC)
		if err != nil {
			t.Fatal(err)
		}
		ex := pipeline.NewExecutor(2)
		b := pipeline.Batch{FieldSet: fset}
		if err := ex.Fill(ctx, ds, tr, 3, 0, []int64{0, 1, 2, 3}, pipeline.PadFromBatch, &b); err != nil || b.N != 4 {
			t.Fatalf("%s: %d samples, %v %v", c.ann, b.N, err, b.Errors)
		}
		ex.Close()
		ds.Close()
		h, w := tr.Size()
		edges, blended := 0, 0
		for i := range b.N {
			x0, y0 := (i%2)*(w+4)+2, (i/2)*(h+16+4)+2
			tg, err := parseTargets(b.SampleFields(i)[fset.TargetsAt()].Data)
			if err != nil {
				t.Fatal(err)
			}
			for k, bx := range tg.boxes {
				x1, y1, y2 := int(bx[0]), int(bx[1]), int(bx[3])
				if int(bx[2])-x1 < 4 || y2-y1 < 4 || x1 < 0 || y1 < 0 {
					continue
				}
				if got, want := pics[true].RGBAAt(x0+x1, y0+(y1+y2)/2), labelColor(tg.labels[k]); got != want {
					t.Errorf("%s sample %d box %d %v: its left edge is %v, want its label's colour %v", c.ann, i, k, bx, got, want)
				}
				edges++
			}
			for _, runs := range tg.masks {
				pos, on := 0, false
				for _, r := range runs {
					if on && r > 0 {
						q := pos + int(r)/2
						x, y := x0+q%tg.w, y0+q/tg.w
						if pics[true].RGBAAt(x, y) != pics[false].RGBAAt(x, y) {
							blended++
						}
						break
					}
					pos += int(r)
					on = !on
				}
			}
		}
		if edges == 0 {
			t.Errorf("%s: no box drawn to check", c.ann)
		}
		if strings.HasSuffix(c.ann, ".json") && blended == 0 {
			t.Errorf("%s: no mask changed a pixel", c.ann)
		}
		if pics[true].RGBAAt(1, 1) != pics[false].RGBAAt(1, 1) {
			t.Errorf("%s: the grid's border differs with masks", c.ann)
		}
	}
}
