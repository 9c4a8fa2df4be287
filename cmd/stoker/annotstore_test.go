package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// TestIndexAnnotatedAndServe: `stoker mkdata --coco`'s set put in a real
// S3 server (versitygw); `stoker index URL --annotations URL` writes a
// COCO manifest beside the images, and a server of the bucket (images and
// annotations) opens from it, without listing, the very batches (pixels,
// labels, indices, targets) and fingerprint of a server of the same files
// on a disk; a server given the manifest with another annotations file
// refuses to start, saying so; a YOLO dataset on a disk is not indexed,
// saying why, and one in the bucket is, its manifest holding its label
// files, and served from it as from the disk.
func TestIndexAnnotatedAndServe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and versitygw processes")
	}
	ctx := processTest(t, 4*time.Minute)
	dir := t.TempDir()
	if out, errOut, err := runStoker(ctx, nil, "mkdata", "--coco", "--yolo", "--out", dir, "--n", "12"); err != nil {
		t.Fatalf("mkdata: %v\n%s%s", err, out, errOut)
	}
	s := s3Env(t)
	s.PutTree(t, "bkt", "det/", dir)
	images, ann := filepath.Join(dir, "images", "train"), filepath.Join(dir, "annotations", "instances.json")
	imagesURL, annURL := s.URL("bkt", "det/images/train"), s.URL("bkt", "det/annotations/instances.json")
	out := runIndexCmd(t, ctx, nil, imagesURL, "--annotations", annURL)
	if !strings.HasPrefix(out, "wrote s3://bkt/det/images/train/.stoker/manifest: coco, 12 samples in 12 objects, 5 classes") {
		t.Fatalf("stoker index --annotations said %q", out)
	}
	local := launchServe(t, serveConfig{name: "local", dataset: images, workers: 1, args: []string{"--annotations", "ds=" + ann}})
	bucket := launchServe(t, serveConfig{name: "bucket", dataset: imagesURL, workers: 1, args: []string{"--annotations", "ds=" + annURL}})
	local.waitReady(t, ctx)
	bucket.waitReady(t, ctx)
	if len(bucket.findLogs("COCO images opened from their manifest", nil)) != 1 {
		t.Errorf("the bucket's server did not open from the manifest beside the images")
	}
	sameServed(t, ctx, bucket, local)
	// The manifest named, with other annotations: refused at start.
	doc, err := os.ReadFile(ann)
	if err != nil {
		t.Fatal(err)
	}
	s.Put(t, "bkt", "det/annotations/other.json", append(doc, ' '))
	_, errOut, err := runStoker(ctx, nil, "serve", "--listen", "127.0.0.1:0", "--dataset", "ds="+imagesURL,
		"--annotations", "ds="+s.URL("bkt", "det/annotations/other.json"), "--manifest", "ds="+imagesURL+"/.stoker/manifest")
	if err == nil || !strings.Contains(errOut, "made with other annotations") {
		t.Errorf("serve with a manifest of other annotations: %v\n%s", err, errOut)
	}
	_, errOut, err = runStoker(ctx, nil, "index", images, "--annotations", filepath.Join(dir, "data.yaml"), "--out", filepath.Join(t.TempDir(), "m"))
	if err == nil || !strings.Contains(errOut, "a YOLO dataset on a disk is not indexed") {
		t.Errorf("index of a YOLO dataset on a disk: %v\n%s", err, errOut)
	}

	// The YOLO layout of the same set, indexed in its bucket: a server
	// opens it from the manifest (no label file read) and serves what a
	// server of the disk does.
	yaml := s.URL("bkt", "det/data.yaml")
	if out := runIndexCmd(t, ctx, nil, imagesURL, "--annotations", yaml); !strings.HasPrefix(out, "wrote s3://bkt/det/images/train/.stoker/manifest: yolo, 12 samples in 12 objects") {
		t.Fatalf("stoker index --annotations data.yaml said %q", out)
	}
	localYOLO := launchServe(t, serveConfig{name: "local-yolo", dataset: images, workers: 1, args: []string{"--annotations", "ds=" + filepath.Join(dir, "data.yaml")}})
	bucketYOLO := launchServe(t, serveConfig{name: "bucket-yolo", dataset: imagesURL, workers: 1, args: []string{"--annotations", "ds=" + yaml}})
	localYOLO.waitReady(t, ctx)
	bucketYOLO.waitReady(t, ctx)
	if len(bucketYOLO.findLogs("YOLO images and labels opened from their manifest", nil)) != 1 {
		t.Errorf("the YOLO bucket's server did not open from the manifest beside the images")
	}
	sameServed(t, ctx, bucketYOLO, localYOLO)
}

// sameServed checks that an epoch of a job with targets from got is the
// one from want: fingerprint, batches (pixels, labels, indices) and each
// sample's targets.
func sameServed(t *testing.T, ctx context.Context, got, want *serveProc) {
	t.Helper()
	spec := testJob(4, 3)
	spec.Targets = true
	w := consumeEpoch(t, ctx, want.addr, spec, consumeOpts{})
	g := consumeEpoch(t, ctx, got.addr, spec, consumeOpts{})
	if g.info.GetFingerprint() != w.info.GetFingerprint() || len(g.batches) != len(w.batches) || len(w.batches) != 3 {
		t.Fatalf("fingerprint %s, %d batches; the disk's %s, %d", g.info.GetFingerprint(), len(g.batches), w.info.GetFingerprint(), len(w.batches))
	}
	for k, b := range g.batches {
		wb := w.batches[k]
		gt, wt := b.hdr.GetTargets(), wb.hdr.GetTargets()
		if b.sum() != wb.sum() || len(b.hdr.GetErrors()) != 0 || gt == nil || len(gt.GetOffsets()) != 5 {
			t.Fatalf("batch %d differs from the disk's (targets %v, errors %v)", k, gt != nil, b.hdr.GetErrors())
		}
		if !proto.Equal(gt, wt) {
			t.Errorf("batch %d: targets differ from the disk's", k)
		}
	}
}
