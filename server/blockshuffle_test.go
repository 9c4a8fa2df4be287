package server

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/plan"
)

// shardSizes are the samples of each shard makeShards writes: 48 in all.
var shardSizes = []int{7, 12, 5, 9, 11, 4}

// makeShards writes WebDataset tar shards of small JPEGs (key.jpg and
// key.cls, 3 classes) into a temporary folder, shard-00.tar holding
// shardSizes[0] samples and so on.
func makeShards(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	i := 0
	for s, size := range shardSizes {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		add := func(name string, data []byte) {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(data); err != nil {
				t.Fatal(err)
			}
		}
		for range size {
			w, h := 48+(i*7)%32, 48+(i*13)%32
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			for y := range h {
				for x := range w {
					img.Set(x, y, color.RGBA{uint8(x*4 + i*9), uint8(y*4 + s*40), uint8((x*y + i*31) % 256), 255})
				}
			}
			var jb bytes.Buffer
			if err := jpeg.Encode(&jb, img, &jpeg.Options{Quality: 90}); err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("s%02d-%03d", s, i)
			add(key+".jpg", jb.Bytes())
			add(key+".cls", []byte(fmt.Sprint(i%3)))
			i++
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("shard-%02d.tar", s)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// blockJob is a block-shuffled job of rank of world over makeShards'
// "shards", window 2.
func blockJob(rank, world uint32, epoch uint64) *pb.OpenJob {
	o := smallJob("shards", 4)
	o.Job.Dataset, o.Job.Rank, o.Job.WorldSize = "shards", rank, world
	o.Job.ShuffleMode, o.Job.ShuffleWindow = pb.ShuffleMode_SHUFFLE_MODE_BLOCK, 2
	o.Epoch = epoch
	return o
}

// TestBlockShuffleJob runs block-shuffled epochs of a WebDataset on two
// ranks, on a server alone and on a coordinator whose one peer makes every
// batch: the same bytes either way, batch k as the plan has it, every
// sample exactly once per epoch across the ranks, another order in the
// next epoch, and batches that read at most two windows' shards.
func TestBlockShuffleJob(t *testing.T) {
	root := makeShards(t)
	datasets := map[string]string{"shards": root}
	alone := startServer(t, Config{Datasets: datasets, Workers: 2})
	worker := startServer(t, Config{Datasets: datasets, Workers: 1})
	coord := startServer(t, Config{Datasets: datasets, Peers: worker.addr})
	starts, of := shardsOf(shardSizes)
	n := len(of)
	var orders [2][]int64
	for e := range uint64(2) {
		seen := make([]int, n)
		for r := range uint32(2) {
			want := alone.collect(t, blockJob(r, 2, e))
			got := coord.collect(t, blockJob(r, 2, e))
			sameBatches(t, fmt.Sprintf("epoch %d rank %d: a peer vs one server", e, r), want.batches, got.batches)
			plan := plan.New(plan.Spec{Size: n, Seed: 42, Epoch: e, Shuffle: true, Rank: int(r), World: 2, BatchSize: 4, Window: 2, Shards: starts})
			if len(got.batches) != plan.Batches() || got.end.GetBatches() != uint64(plan.Batches()) {
				t.Fatalf("epoch %d rank %d: %d batches, want %d", e, r, len(got.batches), plan.Batches())
			}
			for k, b := range got.batches {
				idx := b.hdr.GetIndices()
				if !slices.Equal(idx, plan.Batch(k)) {
					t.Fatalf("epoch %d rank %d batch %d: indices %v, plan %v", e, r, k, idx, plan.Batch(k))
				}
				shards := map[int]bool{}
				for _, i := range idx {
					seen[i]++
					shards[of[i]] = true
				}
				if len(shards) > 2*2 {
					t.Errorf("epoch %d rank %d batch %d reads %d shards, want at most two windows of 2", e, r, k, len(shards))
				}
				orders[e] = append(orders[e], idx...)
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Errorf("epoch %d: index %d delivered %d times, want once", e, i, c)
			}
		}
	}
	if slices.Equal(orders[0], orders[1]) {
		t.Error("epochs 0 and 1 have the same order")
	}
}

// TestBlockShuffleElastic resumes a block-shuffled epoch that two ranks
// had taken two batches each of on four ranks, naming the epoch's first
// world size: every sample exactly once over both runs.
func TestBlockShuffleElastic(t *testing.T) {
	e := startServer(t, Config{Datasets: map[string]string{"shards": makeShards(t)}, Workers: 2})
	_, of := shardsOf(shardSizes)
	seen := make([]int, len(of))
	for r := range uint32(2) {
		for _, b := range e.collect(t, blockJob(r, 2, 0)).batches[:2] {
			for _, i := range b.hdr.GetIndices() {
				seen[i]++
			}
		}
	}
	for r := range uint32(4) {
		o := blockJob(r, 4, 0)
		o.Consumed, o.EpochWorldSize = 2*4*2, 2
		for _, b := range e.collect(t, o).batches {
			for _, i := range b.hdr.GetIndices() {
				seen[i]++
			}
		}
	}
	for i, c := range seen {
		if c != 1 {
			t.Errorf("index %d delivered %d times over the resume, want once", i, c)
		}
	}
}

// TestBlockShuffleRefused checks the block shuffle's bad requests: on an
// ImageFolder (whose samples are files of their own), a window past the
// bound, an unknown mode; and that shuffle=false ignores the mode.
func TestBlockShuffleRefused(t *testing.T) {
	e := startServer(t, Config{Datasets: map[string]string{"tiny": makeDataset(t, []string{"a", "b"}, 3, false), "shards": makeShards(t)}})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	spec := func(dataset string, change func(*pb.JobSpec)) *pb.JobSpec {
		s := blockJob(0, 1, 0).GetJob()
		s.Dataset = dataset
		change(s)
		return s
	}
	tests := []struct {
		name string
		spec *pb.JobSpec
		code codes.Code
		msg  string
	}{
		{"image folder", spec("tiny", func(*pb.JobSpec) {}), codes.InvalidArgument,
			`dataset "tiny" is not sharded (imagefolder): each sample is an object of its own, so the global shuffle reads no more objects than a block shuffle would`},
		{"window too large", spec("shards", func(s *pb.JobSpec) { s.ShuffleWindow = job.MaxShuffleWindow + 1 }), codes.InvalidArgument,
			"shuffle_window 1025: want 1..1024 shards (0: 4)"},
		{"unknown mode", spec("shards", func(s *pb.JobSpec) { s.ShuffleMode = 7 }), codes.InvalidArgument, "unknown shuffle_mode 7"},
		{"not shuffled", spec("tiny", func(s *pb.JobSpec) { s.Shuffle = false }), codes.OK, ""},
		{"largest window", spec("shards", func(s *pb.JobSpec) { s.ShuffleWindow = job.MaxShuffleWindow }), codes.OK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.client.DescribeJob(ctx, &pb.DescribeJobRequest{Job: tc.spec})
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Errorf("DescribeJob: %v; want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

// TestBlockShuffleStatus checks that Status names a running job's shuffle.
func TestBlockShuffleStatus(t *testing.T) {
	e := startServer(t, Config{Datasets: map[string]string{"shards": makeShards(t)}, Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	o := blockJob(0, 1, 0)
	o.Credits, o.Epochs = 1, 0
	stream := e.feedStream(t, ctx, o)
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	// The coordinator publishes its status twice a second.
	var jobs []*pb.JobStatus
	waitUntil(t, "the job in Status", func() bool {
		st, err := e.client.Status(ctx, &pb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		jobs = st.GetJobs()
		return len(jobs) == 1
	})
	if got := jobs[0].GetShuffle(); got != "block W=2" {
		t.Errorf("status shows shuffle %q, want %q", got, "block W=2")
	}
}

// shardsOf is the ShardStarts of shards of the given sizes, and the shard
// of each index.
func shardsOf(sizes []int) (starts, of []int) {
	for s, z := range sizes {
		starts = append(starts, len(of))
		of = append(of, slices.Repeat([]int{s}, z)...)
	}
	return starts, of
}
