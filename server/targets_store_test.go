package server

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/storetest"
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
		&pb.Op{Op: &pb.Op_RandomRotation{RandomRotation: &pb.RandomRotation{Degrees: &pb.Range{Min: -30, Max: 30}}}})
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
