package main

import (
	"context"
	"fmt"
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

// TestConversationsServedFromBucket: a LLaVA/ShareGPT conversation file
// (records of one image and of two) over `stoker mkdata`'s photos, both
// put in a real S3 server (versitygw); `stoker index URL --annotations
// URL --sizes` writes its manifest beside the images, and a server of the
// bucket opens from it the very batches (pixels, records, each image's
// record's JSON) and fingerprint of a server of the same files on a disk.
func TestConversationsServedFromBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and versitygw processes")
	}
	ctx := processTest(t, 4*time.Minute)
	dir := t.TempDir()
	if out, errOut, err := runStoker(ctx, nil, "mkdata", "--coco", "--out", dir, "--n", "9"); err != nil {
		t.Fatalf("mkdata: %v\n%s%s", err, out, errOut)
	}
	images := filepath.Join(dir, "images", "train")
	var names []string
	err := filepath.WalkDir(images, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(images, p)
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil || len(names) != 9 {
		t.Fatalf("mkdata wrote %d images (%v)", len(names), err)
	}
	q := func(s string) string { return `"` + s + `"` }
	recs := []string{
		`{"id": 0, "image": ` + q(names[0]) + `, "conversations": [{"from": "human", "value": "<image>"}]}`,
		`{"images": [` + q(names[1]) + `, ` + q(names[2]) + `], "messages": [{"role": "user", "content": "<image><image>"}]}`,
	}
	for i := 3; i < 9; i++ {
		recs = append(recs, `{"id": `+fmt.Sprint(i)+`, "image": `+q(names[i])+`, "conversations": [{"from": "human", "value": "x"}]}`)
	}
	ann := filepath.Join(dir, "sft.json")
	if err := os.WriteFile(ann, []byte("["+strings.Join(recs, ",\n")+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := s3Env(t)
	s.PutTree(t, "bkt", "sft/", dir)
	imagesURL, annURL := s.URL("bkt", "sft/images/train"), s.URL("bkt", "sft/sft.json")
	if out := runIndexCmd(t, ctx, nil, imagesURL, "--annotations", annURL, "--sizes"); !strings.HasPrefix(out, "wrote s3://bkt/sft/images/train/.stoker/manifest: conversations, 9 samples in 9 objects") ||
		!strings.Contains(out, "9 of the images' sizes") {
		t.Fatalf("stoker index --annotations said %q", out)
	}
	local := launchServe(t, serveConfig{name: "local", dataset: images, workers: 1, args: []string{"--annotations", "ds=" + ann}})
	bucket := launchServe(t, serveConfig{name: "bucket", dataset: imagesURL, workers: 1, args: []string{"--annotations", "ds=" + annURL}})
	local.waitReady(t, ctx)
	bucket.waitReady(t, ctx)
	if len(bucket.findLogs("conversation images opened from their manifest", nil)) != 1 {
		t.Errorf("the bucket's server did not open from the manifest beside the images")
	}
	spec := testJob(3, 5)
	spec.Fields = []string{"json"}
	w := consumeEpoch(t, ctx, local.addr, spec, consumeOpts{})
	g := consumeEpoch(t, ctx, bucket.addr, spec, consumeOpts{})
	if g.info.GetFingerprint() != w.info.GetFingerprint() || len(g.batches) != len(w.batches) || len(w.batches) != 3 {
		t.Fatalf("fingerprint %s, %d batches; the disk's %s, %d (want 3: 8 records, 3 a batch)", g.info.GetFingerprint(), len(g.batches), w.info.GetFingerprint(), len(w.batches))
	}
	two := 0
	for k, b := range g.batches {
		wb := w.batches[k]
		if b.sum() != wb.sum() || len(b.hdr.GetErrors()) != 0 || !proto.Equal(b.hdr.GetFields()[0], wb.hdr.GetFields()[0]) ||
			fmt.Sprint(b.hdr.GetRecords()) != fmt.Sprint(wb.hdr.GetRecords()) {
			t.Fatalf("batch %d differs from the disk's (records %v, %v; errors %v)", k, b.hdr.GetRecords(), wb.hdr.GetRecords(), b.hdr.GetErrors())
		}
		for i, r := range b.hdr.GetRecords() {
			if r == 1 && i+1 < len(b.hdr.GetRecords()) && b.hdr.GetRecords()[i+1] == 1 {
				two++
			}
		}
	}
	if two != 1 {
		t.Errorf("the record of two images came whole %d times, want once", two)
	}
}
