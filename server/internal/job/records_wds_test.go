package job

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestRecordsWebDataset: a job over WebDataset shards whose samples are
// records of several images (KEY.0.jpg, KEY.1.jpg, ..., KEY.json), made
// by the executor from real shards: every record served whole once an
// epoch, its images consecutive and in their order, each with its
// record's json and key, BatchHeader.records naming it, at most
// batch_size records a batch; on one rank, and on two together; by the
// global shuffle and by the block shuffle (a shard's records together).
func TestRecordsWebDataset(t *testing.T) {
	photos, err := filepath.Glob("../../../testdata/photos/*/*.jpg")
	if err != nil || len(photos) < 3 {
		t.Fatalf("the committed photos are missing: %v", err)
	}
	dir := t.TempDir()
	images := map[string]int{} // record key: its images
	for s := range 2 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("shard-%d.tar", s)))
		if err != nil {
			t.Fatal(err)
		}
		tw := tar.NewWriter(f)
		put := func(name string, data []byte) {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(data); err != nil {
				t.Fatal(err)
			}
		}
		for r := range 5 {
			key := fmt.Sprintf("s%d-r%d", s, r)
			images[key] = 1 + (s+r)%3
			for k := range images[key] {
				b, err := os.ReadFile(photos[(r+k)%len(photos)])
				if err != nil {
					t.Fatal(err)
				}
				put(fmt.Sprintf("%s.%d.jpg", key, k), b)
			}
			put(key+".json", fmt.Appendf(nil, `{"id": %q}`, key))
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := dataset.OpenWebDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	env := Env{Datasets: map[string]dataset.Dataset{"vlm": ds}, Names: []string{"vlm"}, MaxBatchBytes: 1 << 30}
	ex := pipeline.NewExecutor(2)
	defer ex.Close()
	for _, c := range []struct {
		world uint32
		block bool // the block shuffle: the shards' records in windows of one shard
	}{{1, false}, {2, false}, {1, true}, {2, true}} {
		world := c.world
		for epoch := range uint64(2) {
			seen := map[string]int{}
			for rank := range world {
				s := &pb.JobSpec{Dataset: "vlm", BatchSize: 3, Rank: rank, WorldSize: world, Shuffle: true, Seed: 5, Fields: []string{"json", "__key__"},
					Transform: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Resize", "size", []int{16, 16})}}}
				if c.block {
					s.ShuffleMode, s.ShuffleWindow = pb.ShuffleMode_SHUFFLE_MODE_BLOCK, 1
				}
				j, err := New(s, env, Origin{})
				if err != nil {
					t.Fatal(err)
				}
				if j.MaxSamples() != 9 {
					t.Fatalf("MaxSamples %d; want 9 (3 records of up to 3 images)", j.MaxSamples())
				}
				p := j.EpochPlan(epoch, 0)
				for k := range p.Batches() {
					b := pipeline.Batch{FieldSet: j.Fields()}
					if err := ex.Fill(t.Context(), ds, j.Transform(), s.GetSeed(), epoch, p.Batch(k), j.Policy(), &b); err != nil {
						t.Fatal(err)
					}
					h, err := j.Header(epoch, k, &b)
					if err != nil {
						t.Fatal(err)
					}
					recsOf, jsons, keys := h.GetRecords(), h.GetFields()[0].GetValues(), h.GetFields()[1].GetValues()
					if b.N != len(p.Batch(k)) || len(recsOf) != b.N || len(jsons) != b.N || len(b.Errors) > 0 {
						t.Fatalf("world %d rank %d batch %d: %d samples of %d planned, %d records, %d jsons, errors %v",
							world, rank, k, b.N, len(p.Batch(k)), len(recsOf), len(jsons), b.Errors)
					}
					inBatch := 0
					for i := 0; i < b.N; {
						key := string(keys[i])
						n := images[key]
						for x := range n {
							at := i + x
							if at >= b.N || recsOf[at] != recsOf[i] || recsOf[at] < 0 || string(keys[at]) != key ||
								ds.Name(int(b.Indices[at])) != fmt.Sprintf("shard-%c.tar/%s.%d.jpg", key[1], key, x) ||
								string(jsons[at]) != fmt.Sprintf(`{"id": %q}`, key) {
								t.Fatalf("world %d rank %d batch %d: record %s (%d images) is not whole and in order at %d: records %v, samples %v",
									world, rank, k, key, n, i, recsOf, b.Indices)
							}
						}
						seen[key]++
						inBatch++
						i += n
					}
					if inBatch > 3 {
						t.Fatalf("world %d rank %d batch %d: %d records; batch_size 3", world, rank, k, inBatch)
					}
				}
			}
			for key := range images {
				if seen[key] < 1 || (world == 1 && seen[key] != 1) {
					t.Errorf("world %d (block %v) epoch %d: record %s served %d times", world, c.block, epoch, key, seen[key])
				}
			}
		}
	}
}
