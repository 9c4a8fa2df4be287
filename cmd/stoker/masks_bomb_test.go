package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// masksBomb writes issue 66's masks job's data: 2000 x 2000 photos (the
// issue's four), each with polygon instances (its 1,024) covering the whole image, into a
// directory of its own with its COCO file. With lie, the annotations'
// boxes say each instance is 100 x 100 pixels (the polygons still cover the
// image): what the cost model believes at open is not what the masks
// cost. It returns the images' directory and the annotations file.
func masksBomb(t *testing.T, lie bool, images, instances int) (dir, ann string) {
	t.Helper()
	const side = 2000
	dir = t.TempDir()
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	for y := range side {
		for x := range side {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x + y), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 50}); err != nil {
		t.Fatal(err)
	}
	type im struct {
		ID       int    `json:"id"`
		FileName string `json:"file_name"`
		Width    int    `json:"width"`
		Height   int    `json:"height"`
	}
	type an struct {
		ID           int         `json:"id"`
		ImageID      int         `json:"image_id"`
		CategoryID   int         `json:"category_id"`
		BBox         []float64   `json:"bbox"`
		Area         float64     `json:"area"`
		IsCrowd      int         `json:"iscrowd"`
		Segmentation [][]float64 `json:"segmentation"`
	}
	doc := struct {
		Images      []im             `json:"images"`
		Annotations []an             `json:"annotations"`
		Categories  []map[string]any `json:"categories"`
	}{Categories: []map[string]any{{"id": 1, "name": "thing"}}}
	box := []float64{0, 0, side, side}
	if lie {
		box = []float64{0, 0, 100, 100} // large enough to outlive SanitizeBoundingBoxes at any jitter
	}
	for i := range images {
		name := fmt.Sprintf("big-%02d.jpg", i)
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		doc.Images = append(doc.Images, im{ID: i + 1, FileName: name, Width: side, Height: side})
		for k := range instances {
			d := float64(k % 7)
			poly := []float64{d, d, side - d, d, side - d, side - d, d, side - d}
			doc.Annotations = append(doc.Annotations, an{ID: i*instances + k + 1, ImageID: i + 1, CategoryID: 1, BBox: box, Area: box[2] * box[3], Segmentation: [][]float64{poly}})
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	ann = filepath.Join(t.TempDir(), "instances_big.json")
	if err := os.WriteFile(ann, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ann
}

// masksJob is the masks job: the lsj preset, boxes, labels and an
// instance mask each, batch 2.
func masksJob() *stokerv1.JobSpec {
	return &stokerv1.JobSpec{Dataset: "ds", Transform: &stokerv1.TransformSpec{Preset: "lsj"}, BatchSize: 2, Seed: 5,
		Targets: true, TargetFields: []string{"boxes", "labels", "masks"}}
}

// TestMasksBombRefusedOrFailed: issue 66's masks job (four 2000 x 2000
// images of 1,024 polygon instances each, lsj and masks) on a real
// `stoker serve` at its default limits. With the annotations' boxes as
// the polygons are, the job is refused at open (RESOURCE_EXHAUSTED)
// naming the instance masks' work and the image, before anything is
// decoded. With boxes that lie (100 x 100 each), it opens, and each sample
// fails at the bound its masks' work is held to (targets.MaxInstancePixels),
// the job ending with the samples' errors naming the images and the
// bound; under a lease timeout of a minute no lease timed out: the
// samples failed by their bound, not by the clock.
func TestMasksBombRefusedOrFailed(t *testing.T) {
	parallelTest(t)
	ctx := processTest(t, 3*time.Minute)

	dir, ann := masksBomb(t, false, 4, 1024)
	p := startServe(t, ctx, serveConfig{name: "serve", dataset: dir, workers: 2, args: []string{"--annotations", "ds=" + ann}})
	_, err := openFeed(ctx, p.addr, masksJob(), 0, 4)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "instance masks") || !strings.Contains(err.Error(), "big-") || !strings.Contains(err.Error(), "1024 instances") {
		t.Fatalf("the masks job: %v; want RESOURCE_EXHAUSTED naming the instance masks' work, the image and its instances", err)
	}
	t.Logf("honest boxes: %v", err)

	dir, ann = masksBomb(t, true, 4, 1024)
	q := startServe(t, ctx, serveConfig{name: "serve-lied-to", dataset: dir, workers: 2, args: []string{"--annotations", "ds=" + ann, "--lease-timeout", "60s"}})
	r, err := openFeed(ctx, q.addr, masksJob(), 0, 4)
	if err != nil {
		t.Fatalf("the masks job with lying boxes: %v; want it opened (the boxes say 100 x 100 each)", err)
	}
	defer r.Close()
	for {
		if _, err = r.Next(); err != nil {
			break
		}
	}
	if status.Code(err) != codes.DataLoss && !strings.Contains(err.Error(), "DataLoss") || !strings.Contains(err.Error(), "instance masks' work") || !strings.Contains(err.Error(), "big-") {
		t.Fatalf("the masks job with lying boxes: %v; want the job failed by its samples' errors, naming the masks' bound and an image", err)
	}
	t.Logf("lying boxes: %v", err)
	if n := q.metric(t, ctx, "stoker_lease_failures_total", `reason="timeout"`); n != 0 {
		t.Errorf("%v leases timed out: want every sample failed by its bound", n)
	}
}

// TestSIGTERMDuringMasks: a real SIGTERM to a `stoker serve` (--grace 5s)
// whose workers are inside the masks job's samples (16 images of 48
// whole-image instances whose boxes lie, so that it opens and each
// sample's masks work, just under their bound, runs long;
// --lease-timeout a minute, so no lease ends them first): it exits 0
// within its grace and 5 s, its mask kernels asked to stop before each
// instance.
func TestSIGTERMDuringMasks(t *testing.T) {
	parallelTest(t)
	ctx := processTest(t, 3*time.Minute)
	dir, ann := masksBomb(t, true, 16, 48)
	const grace = 5 * time.Second
	p := startServe(t, ctx, serveConfig{name: "serve", dataset: dir, workers: 2, args: []string{"--annotations", "ds=" + ann, "--lease-timeout", "60s", "--grace", grace.String()}})
	r, err := openFeed(ctx, p.addr, masksJob(), 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	waitFor(t, ctx, time.Minute, "a worker in the masks job's samples", func() bool {
		return p.metric(t, ctx, "stoker_samples_running") >= 1
	})
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Fatalf("exit after SIGTERM: %v, want 0", p.waitErr)
		}
	case <-time.After(grace + 5*time.Second):
		t.Fatalf("still running %v after SIGTERM (grace %v), inside the masks", grace+5*time.Second, grace)
	}
	t.Logf("exited %v after SIGTERM (grace %v)", time.Since(sent).Round(time.Millisecond), grace)
}
