package server

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/internal/storetest"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/source"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestTargetsFromBucket: a COCO dataset whose images and annotations file
// are in a bucket (S3, versitygw) serves the batches of the same files on
// a disk, byte for byte: pixels, targets moved through a rotation and
// the annotations' field, sample by sample.
func TestTargetsFromBucket(t *testing.T) {
	ann, _ := photosCOCO(t)
	doc, err := os.ReadFile(ann)
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "det")
	s.PutTree(t, "det", "photos/", "../testdata/photos")
	s.Put(t, "det", "annotations/instances.json", doc)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	job := smallJob("det", 8)
	job.Job.Targets = true
	job.Job.Fields = []string{"coco"}
	job.Job.Transform.Ops = append(job.Job.Transform.Ops,
		opspec.Wire("RandomRotation", "degrees", []float64{-30, 30}))
	local := startServer(t, Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 2})
	remote := startServer(t, Config{Datasets: map[string]string{"det": s.URL("det", "photos/")},
		Annotations: map[string]string{"det": s.URL("det", "annotations/instances.json")}, Workers: 2})
	want, got := local.collect(t, job), remote.collect(t, job)
	if len(got.batches) != len(want.batches) || len(got.batches) == 0 {
		t.Fatalf("%d batches from the bucket, %d from disk", len(got.batches), len(want.batches))
	}
	for k, b := range got.batches {
		w := want.batches[k]
		if !slices.Equal(b.hdr.GetIndices(), w.hdr.GetIndices()) || !bytes.Equal(b.data, w.data) || !sameFields(b.hdr, w.hdr) || len(b.hdr.GetErrors()) != 0 {
			t.Fatalf("batch %d: the bucket's differs from disk's (errors %v)", k, b.hdr.GetErrors())
		}
		fs := b.hdr.GetFields()
		if len(fs) != 2 || fs[0].GetName() != "coco" || fs[1].GetName() != "targets" || len(fs[1].GetValues()) != len(b.hdr.GetIndices()) {
			t.Fatalf("batch %d: fields %v", k, fs)
		}
	}
}

// cocoShard writes the COCO file ann's images (under ../testdata/photos)
// as one WebDataset shard in a new directory, in the file's sample order:
// key.jpg, and key.json its image's annotations as a sample's member
// holds them (docs/detection.md), category_id as the file gives it
// (the COCO dataset's labels, torchvision's wrapper's), so that the
// shard's targets are the COCO dataset's, byte for byte. bad names a sample (by index) whose box is made malformed (-1:
// none).
func cocoShard(t *testing.T, ann string, bad int) string {
	t.Helper()
	raw, err := os.ReadFile(ann)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Images []struct {
			ID            int64
			FileName      string `json:"file_name"`
			Width, Height int
		}
		Annotations []map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(doc.Images, func(a, b struct {
		ID            int64
		FileName      string `json:"file_name"`
		Width, Height int
	}) int {
		return int(a.ID - b.ID)
	})
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "shard-000000.tar"))
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	put := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	for i, im := range doc.Images {
		img, err := os.ReadFile(filepath.Join("../testdata/photos", im.FileName))
		if err != nil {
			t.Fatal(err)
		}
		anns := []map[string]any{}
		for _, a := range doc.Annotations {
			if int64(a["image_id"].(float64)) == im.ID {
				b := map[string]any{"bbox": a["bbox"], "category_id": int(a["category_id"].(float64)), "iscrowd": a["iscrowd"]}
				if seg, ok := a["segmentation"]; ok {
					b["segmentation"] = seg
				}
				if i == bad {
					b["bbox"] = []float64{0, 0, 1}
				}
				anns = append(anns, b)
			}
		}
		js, _ := json.Marshal(map[string]any{"image_id": im.ID, "width": im.Width, "height": im.Height, "annotations": anns})
		key := fmt.Sprintf("%06d", i)
		put(key+".jpg", img)
		put(key+".json", js)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestTargetsFromShards: WebDataset shards whose samples carry their
// annotations as a key.json member (--annotations NAME=.json), on a disk
// and in a bucket (with a manifest made by stoker index), serve the very
// pixels and targets of the COCO dataset they were written from, through
// a rotation; a sample whose member is malformed fails alone, naming the
// member and the field.
func TestTargetsFromShards(t *testing.T) {
	ann, _ := photosCOCO(t)
	shards := cocoShard(t, ann, -1)
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "det")
	s.PutTree(t, "det", "shards/", shards)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	st, err := source.Open(t.Context(), s.URL("det", "shards/"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := dataset.IndexStore(t.Context(), st, dataset.IndexOptions{})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var mb bytes.Buffer
	if err := m.Encode(&mb); err != nil {
		t.Fatal(err)
	}
	manifest := writeFile(t, "manifest", mb.String())
	job := smallJob("det", 8)
	job.Job.Targets = true
	job.Job.Transform.Ops = append(job.Job.Transform.Ops,
		opspec.Wire("RandomRotation", "degrees", []float64{-30, 30}))
	coco := startServer(t, Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 2})
	want := coco.collect(t, job)
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"disk", Config{Datasets: map[string]string{"det": shards}, Annotations: map[string]string{"det": ".json"}, Workers: 2}},
		{"bucket", Config{Datasets: map[string]string{"det": s.URL("det", "shards/")}, Annotations: map[string]string{"det": ".json"}, Workers: 2}},
		{"bucket-manifest", Config{Datasets: map[string]string{"det": s.URL("det", "shards/")}, Annotations: map[string]string{"det": ".json"},
			Manifests: map[string]string{"det": manifest}, Workers: 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := startServer(t, c.cfg).collect(t, job)
			if len(got.batches) != len(want.batches) || len(got.batches) == 0 {
				t.Fatalf("%d batches from the shards, %d from the COCO dataset", len(got.batches), len(want.batches))
			}
			for k, b := range got.batches {
				w := want.batches[k]
				if !slices.Equal(b.hdr.GetIndices(), w.hdr.GetIndices()) || !bytes.Equal(b.data, w.data) || !sameFields(b.hdr, w.hdr) || len(b.hdr.GetErrors()) != 0 {
					t.Fatalf("batch %d: the shards' differs from the COCO dataset's (errors %v)", k, b.hdr.GetErrors())
				}
			}
		})
	}

	// A malformed member: its sample alone fails, named.
	badShards := cocoShard(t, ann, 2)
	e := startServer(t, Config{Datasets: map[string]string{"det": badShards}, Annotations: map[string]string{"det": ".json"}, Workers: 2})
	job.Job.FailPolicy = pb.FailPolicy_FAIL_POLICY_DROP
	ep := e.collect(t, job)
	var errs []string
	n, total := 0, 0
	for _, b := range want.batches {
		total += len(b.hdr.GetIndices())
	}
	for _, b := range ep.batches {
		n += len(b.hdr.GetIndices())
		for _, se := range b.hdr.GetErrors() {
			errs = append(errs, fmt.Sprintf("%d %s: %s", se.GetIndex(), se.GetName(), se.GetReason()))
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "shard-000000.tar/000002.json: annotation 0: field bbox") || n != total-1 {
		t.Errorf("a malformed member: %d samples of %d, errors %q; want the others and one error naming shard-000000.tar/000002.json, annotation 0, field bbox", n, total, errs)
	}
}
