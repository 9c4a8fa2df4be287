package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	_ "image/jpeg"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// photosCOCO writes a COCO annotations file over testdata/photos's JPEGs:
// image i has i%4 boxes (categories 1 and 3, the first of every third image
// a crowd). It returns the file and each image's count of boxes, by the
// sample's index (the images sorted by id).
func photosCOCO(t *testing.T) (string, []int) {
	t.Helper()
	photos, err := filepath.Glob("../testdata/photos/*/*.jpg")
	if err != nil || len(photos) == 0 {
		t.Fatalf("photos: %v", err)
	}
	slices.Sort(photos)
	type img struct {
		ID       int    `json:"id"`
		FileName string `json:"file_name"`
		Width    int    `json:"width"`
		Height   int    `json:"height"`
	}
	var images []img
	var anns []map[string]any
	var counts []int
	for i, p := range photos {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		cfg, _, err := image.DecodeConfig(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		rel, _ := filepath.Rel("../testdata/photos", p)
		images = append(images, img{ID: i + 1, FileName: filepath.ToSlash(rel), Width: cfg.Width, Height: cfg.Height})
		for k := range i % 4 {
			w, h := float64(cfg.Width), float64(cfg.Height)
			anns = append(anns, map[string]any{
				"id": len(anns) + 1, "image_id": i + 1, "category_id": 1 + 2*(k%2), "iscrowd": btoi(k == 0 && i%3 == 0),
				"bbox": []float64{w * 0.1 * float64(k+1), h * 0.07 * float64(k+2), w * 0.33, h * 0.41}, "area": 10.0,
			})
		}
		counts = append(counts, i%4)
	}
	doc := map[string]any{"images": images, "annotations": anns,
		"categories": []map[string]any{{"id": 1, "name": "a"}, {"id": 3, "name": "b"}}}
	path := writeJSON(t, "instances.json", doc)
	return path, counts
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// topology is a server of cfg alone (n 0) or a coordinator of n peers of
// cfg with no workers of its own, verifying every batch.
func topology(t *testing.T, cfg func() Config, n int) *testEnv {
	t.Helper()
	if n == 0 {
		return startServer(t, cfg())
	}
	var addrs []string
	for range n {
		addrs = append(addrs, startServer(t, cfg()).addr)
	}
	c := cfg()
	c.Peers, c.VerifyFraction, c.Workers = strings.Join(addrs, ","), 1, 0
	e := startServer(t, c)
	waitPeers(t, e, n)
	return e
}

// sameAsAlone: epoch ep of n verified peers (on e) is the lone server's
// alone, batch for batch (pixels, targets and every field), and no peer
// was quarantined: none gave other bytes than another.
func sameAsAlone(t *testing.T, e *testEnv, n int, ep, alone epoch) {
	t.Helper()
	if len(ep.batches) != len(alone.batches) {
		t.Fatalf("%d peers: %d batches, want %d", n, len(ep.batches), len(alone.batches))
	}
	for i, b := range ep.batches {
		if !sameFields(b.hdr, alone.batches[i].hdr) || !bytes.Equal(b.data, alone.batches[i].data) {
			t.Errorf("%d peers: batch %d differs from the lone server's", n, i)
		}
	}
	if q := testQuarantined(e); q != 0 {
		t.Errorf("%d peers: %d quarantined with every slot verified: a peer's targets differed from another's", n, q)
	}
}

// TestTargetsAnyTopology: a job with targets gets each sample's boxes and
// labels as the field "targets" (its layout: docs/detection.md), the
// canvas the output's, the boxes within it (rotated and sheared too), as
// many as the image has; the same bytes whether the server makes the
// batches alone or, making none itself, leases them to 3 peers with every
// slot verified.
func TestTargetsAnyTopology(t *testing.T) {
	ann, counts := photosCOCO(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	}
	job := smallJob("det", 8)
	job.Job.Targets = true
	job.Job.Transform.Ops = append(job.Job.Transform.Ops,
		opspec.Wire("RandomRotation", "degrees", []float64{-30, 30}),
		opspec.Wire("RandomAffine", "degrees", []float64{-10, 10}, "translate", []float64{0.1, 0.1},
			"scale", []float64{0.8, 1.2}, "shear", []float64{-5, 5}))
	var alone epoch
	for _, n := range []int{0, 3} {
		e := topology(t, cfg, n)
		ep := e.collect(t, job)
		seen, boxes := 0, 0
		for _, b := range ep.batches {
			h := b.hdr
			fs := h.GetFields()
			if len(fs) != 1 || fs[0].GetName() != "targets" || len(fs[0].GetMissing()) != 0 {
				t.Fatalf("%d peers: batch %d: fields %v", n, h.GetNumber(), fs)
			}
			for i, v := range fs[0].GetValues() {
				le := binary.LittleEndian
				k := int(le.Uint32(v[16:]))
				idx := h.GetIndices()[i]
				if le.Uint32(v) != 32 || le.Uint32(v[4:]) != 32 || int64(le.Uint64(v[8:])) != idx+1 || k != counts[idx] || len(v) != 24+25*k {
					t.Errorf("%d peers: sample %d: header % x, %d bytes; want 32x32, image %d, %d boxes", n, idx, v[:min(len(v), 24)], len(v), idx+1, counts[idx])
					continue
				}
				for c := range 4 * k {
					if x := math.Float32frombits(le.Uint32(v[24+4*c:])); !(x >= 0 && x <= 32) {
						t.Errorf("%d peers: sample %d: coordinate %d is %v, outside the 32x32 canvas", n, idx, c, x)
					}
				}
				for c := range k {
					// The category ids (1, 3), as torchvision's wrapper gives them.
					if l := int64(le.Uint64(v[24+16*k+8*c:])); l != int64(1+2*(c%2)) {
						t.Errorf("%d peers: sample %d: label %d is %d, want category %d", n, idx, c, l, 1+2*(c%2))
					}
				}
				seen++
				boxes += k
			}
		}
		if seen != len(counts) || boxes == 0 {
			t.Errorf("%d peers: %d samples, %d boxes; want %d samples", n, seen, boxes, len(counts))
		}
		if n == 0 {
			alone = ep
			continue
		}
		sameAsAlone(t, e, n, ep, alone)
	}
}

// TestTargetsRefused: targets on a dataset without annotations, with an op
// they do not support, or asked as a field, SanitizeBoundingBoxes in a
// job without targets, and SanitizeKeyPoints on a COCO file without
// keypoints, are refused at open, saying which.
func TestTargetsRefused(t *testing.T) {
	ann, _ := photosCOCO(t)
	e := startServer(t, Config{Datasets: map[string]string{"det": "../testdata/photos", "tiny": "../testdata/photos"},
		Annotations: map[string]string{"det": ann}, Workers: 1})
	rot := opspec.Wire("RandomRotation", "degrees", []float64{-10, 10})
	policy := opspec.Wire("TrivialAugmentWide")
	sanitize := opspec.Wire("SanitizeBoundingBoxes")
	for _, c := range []struct {
		name    string
		dataset string
		ops     []*pb.Op
		fields  []string
		want    string
	}{
		{"no annotations", "tiny", nil, nil, `dataset "tiny" has no annotations`},
		{"a policy", "det", []*pb.Op{rrcOp(32), rot, policy}, nil, "TrivialAugmentWide (op 2): targets do not support it yet"},
		{"as a field", "det", nil, []string{"targets"}, "targets=true"},
		{"sanitize without targets", "tiny", []*pb.Op{rrcOp(32), sanitize}, nil,
			"SanitizeBoundingBoxes (op 1) acts on targets, and the job asks for none"},
		// (it failed every sample: the file has no keypoints)
		{"keypoints the dataset has not", "det", []*pb.Op{rrcOp(32), opspec.Wire("RandomApply", "transforms", []*pb.Op{opspec.Wire("SanitizeKeyPoints")})}, nil,
			`RandomApply (op 1): SanitizeKeyPoints (op 0) acts on keypoints, and dataset "det"'s instances have none`},
	} {
		job := smallJob(c.dataset, 4)
		job.Job.Targets = c.name != "sanitize without targets"
		if c.ops != nil {
			job.Job.Transform.Ops = c.ops
		}
		job.Job.Fields = c.fields
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		_, err := readEpoch(e.feedStream(t, ctx, job))
		cancel()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT saying %q", c.name, err, c.want)
		}
	}
}

// TestDetrTargetsAnyTopology: the DETR recipes' ops (RandomIoUCrop drawing
// against each sample's boxes, which a peer reads as the server does),
// large-scale jitter's (FixedSizeCrop dropping the boxes it empties), the
// segmentation references' (RandomResize, PadIfSmaller, RandomCrop), and
// ultralytics' (RandomPerspective dropping those box_candidates rejects), make
// the same pixels and targets on a lone server and over 3 peers, every
// slot verified, none quarantined.
func TestDetrTargetsAnyTopology(t *testing.T) {
	ann, counts := photosCOCO(t)
	cfg := func() Config {
		return Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	}
	sanitize := opspec.Wire("SanitizeBoundingBoxes")
	cxcywh := opspec.Wire("ConvertBoundingBoxFormat", "format", "CXCYWH")
	for name, ops := range map[string][]*pb.Op{
		"detr": {
			opspec.Wire("RandomPhotometricDistort"),
			opspec.Wire("RandomZoomOut"),
			opspec.Wire("RandomIoUCrop"),
			sanitize, flipOp(nil),
			opspec.Wire("Resize", "size", []int{32, 32}),
			sanitize, cxcywh,
		},
		"lsj": {
			opspec.Wire("ScaleJitter", "target_size", []int{40, 40}),
			opspec.Wire("FixedSizeCrop", "size", 32, "fill", []float64{123, 117, 104}),
			flipOp(nil), sanitize, cxcywh,
		},
		"segref": { // the segmentation references' geometry: the crop of a drawn resize, padded where smaller
			opspec.Wire("RandomResize", "min_size", 20, "max_size", 60), flipOp(nil),
			withArgs(opspec.Wire("PadIfSmaller", "size", 32), typedFill([]float64{0}, 255)),
			opspec.Wire("RandomCrop", "size", 32), cxcywh,
		},
		"yolo": { // ultralytics' single-image ops (named: op_yolo.go), drawn from each sample's key
			namedOp("YOLOLoadImage", numArg("imgsz", 48)), namedOp("YOLOLetterBox", numArg("new_shape", 32)),
			namedOp("YOLORandomPerspective", numArg("degrees", 10), numArg("shear", 2), numArg("perspective", 0.0005)),
			namedOp("YOLORandomHSV", numArg("hgain", 0.015), numArg("sgain", 0.7), numArg("vgain", 0.4)),
			namedOp("YOLORandomFlip"), cxcywh,
		},
		"mosaic": { // ultralytics' Mosaic and MixUp: partners drawn from each sample's key, read by whichever maker makes it
			namedOp("YOLOMosaic", numArg("imgsz", 32)), namedOp("YOLORandomPerspective", numArg("size", 32)),
			namedOp("YOLOMixUp", numArg("p", 0.5)), namedOp("YOLORandomFlip"), cxcywh,
		},
	} {
		job := smallJob("det", 8)
		job.Job.Targets = true
		job.Job.Transform.Ops = ops
		var alone epoch
		for _, n := range []int{0, 3} {
			e := topology(t, cfg, n)
			ep := e.collect(t, job)
			seen := 0
			for _, b := range ep.batches {
				for _, v := range b.hdr.GetFields()[0].GetValues() {
					if le := binary.LittleEndian; le.Uint32(v) != 32 || le.Uint32(v[20:]) != 2 { // CXCYWH
						t.Errorf("%s, %d peers: header % x", name, n, v[:24])
					}
					seen++
				}
			}
			if seen != len(counts) {
				t.Errorf("%s, %d peers: %d samples, want %d", name, n, seen, len(counts))
			}
			if n == 0 {
				alone = ep
				continue
			}
			sameAsAlone(t, e, n, ep, alone)
		}
	}
}
