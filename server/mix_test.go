package server

import (
	"bytes"
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/storetest"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// mixJob is a job over a mix of "big" and "small" with their sources.
func mixJob(samples uint64) *pb.OpenJob {
	o := smallJob("", 16)
	o.Job.Mix = []*pb.MixPart{{Dataset: "big", Weight: 0.7}, {Dataset: "small", Weight: 0.3}}
	o.Job.MixSamples = samples
	o.Job.Fields = []string{"__source__", "path"}
	return o
}

// TestMixAnyTopology: a mix of two ImageFolders gives each its quota of
// an epoch, every sample's __source__ and path its own dataset's, and the
// same indices, fields and pixels alone and through 2 peers (which build
// the same mix from the forwarded spec and are verified slot by slot).
func TestMixAnyTopology(t *testing.T) {
	big := makeDataset(t, []string{"a", "b", "c"}, 20, false) // 60
	small := makeDataset(t, []string{"x", "y"}, 5, false)     // 10
	sets := map[string]string{"big": big, "small": small}
	var want epoch
	for _, n := range []int{0, 2} {
		e := serveWithPeers(t, sets, n)
		ep := e.collect(t, mixJob(200))
		if ep.info.GetSamples() != 200 || ep.info.GetDatasetSize() != 200 {
			t.Fatalf("%d peers: JobInfo samples %d, dataset_size %d: want the mix's 200", n, ep.info.GetSamples(), ep.info.GetDatasetSize())
		}
		count := map[string]int{}
		for _, b := range ep.batches {
			src, path := b.hdr.GetFields()[0], b.hdr.GetFields()[1]
			for i, idx := range b.hdr.GetIndices() {
				s := string(src.GetValues()[i])
				count[s]++
				wantSrc := "big"
				if idx >= 60 {
					wantSrc = "small"
				}
				if s != wantSrc {
					t.Fatalf("%d peers: sample %d's __source__ %q, want %q", n, idx, s, wantSrc)
				}
				if p := string(path.GetValues()[i]); p == "" || (wantSrc == "small") != (p[0] == 'x' || p[0] == 'y') {
					t.Fatalf("%d peers: sample %d of %s has path %q", n, idx, s, p)
				}
			}
		}
		if count["big"] != 140 || count["small"] != 60 {
			t.Fatalf("%d peers: drew %v, want big 140 and small 60 (0.7 and 0.3 of 200)", n, count)
		}
		if n == 0 {
			want = ep
			continue
		}
		for k, b := range ep.batches {
			w := want.batches[k]
			if !slices.Equal(b.hdr.GetIndices(), w.hdr.GetIndices()) || !bytes.Equal(b.data, w.data) {
				t.Fatalf("%d peers: batch %d differs from the lone server's", n, k)
			}
		}
	}
}

// TestMixRefused: each mistake in a mix is INVALID_ARGUMENT naming it.
func TestMixRefused(t *testing.T) {
	big := makeDataset(t, []string{"a"}, 4, false)
	e := startServer(t, Config{Datasets: map[string]string{"big": big, "small": big}, Workers: 1})
	cases := []struct {
		name string
		edit func(*pb.JobSpec)
		want string
	}{
		{"unknown", func(j *pb.JobSpec) { j.Mix[1].Dataset = "laion" }, `unknown dataset "laion"`},
		{"zero weight", func(j *pb.JobSpec) { j.Mix[1].Weight = 0 }, `dataset "small" has weight 0`},
		{"negative weight", func(j *pb.JobSpec) { j.Mix[0].Weight = -1 }, `dataset "big" has weight -1`},
		{"NaN weight", func(j *pb.JobSpec) { j.Mix[0].Weight = math.NaN() }, `weight NaN`},
		{"twice", func(j *pb.JobSpec) { j.Mix[1].Dataset = "big" }, `named twice`},
		{"and a dataset", func(j *pb.JobSpec) { j.Dataset = "big" }, `name one dataset`},
		{"no shuffle", func(j *pb.JobSpec) { j.Shuffle = false }, `needs shuffle=True`},
		{"block, unsharded", func(j *pb.JobSpec) { j.ShuffleMode = pb.ShuffleMode_SHUFFLE_MODE_BLOCK }, `dataset "big" of the mix is not sharded`},
		{"repeats", func(j *pb.JobSpec) { j.Repeats = 3 }, `repeats with a mix`},
		{"too long", func(j *pb.JobSpec) { j.MixSamples = 1 << 41 }, `mix_samples`},
	}
	for _, c := range cases {
		o := mixJob(0)
		c.edit(o.Job)
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		_, err := readEpoch(e.feedStream(t, ctx, o))
		cancel()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT saying %q", c.name, err, c.want)
		}
	}
}

// TestMixBlockShuffle: under the block shuffle a mix draws whole shards by
// weight (shard-level mixing): of two datasets of 6 shards each, weights 3
// and 1 draw 9 and 3 shards; the first goes round once and a half (every
// shard once, then 3 of them again), the second takes 3 whole shards;
// every drawn shard's samples come whole, as many times as it was drawn;
// the epoch is their samples; and the bytes are the same alone and
// through 2 verified peers; 2 ranks together draw the epoch.
func TestMixBlockShuffle(t *testing.T) {
	shards := makeShards(t)
	sets := map[string]string{"a": shards, "b": shards}
	starts := []int{0}
	for _, n := range shardSizes {
		starts = append(starts, starts[len(starts)-1]+n)
	}
	shardOf := func(i int) int { // a local index's shard
		for s := range shardSizes {
			if i < starts[s+1] {
				return s
			}
		}
		t.Fatalf("index %d past the shards", i)
		return -1
	}
	job := func(rank, world uint32) *pb.OpenJob {
		o := smallJob("", 4)
		o.Job.Mix = []*pb.MixPart{{Dataset: "a", Weight: 3}, {Dataset: "b", Weight: 1}}
		o.Job.ShuffleMode, o.Job.ShuffleWindow = pb.ShuffleMode_SHUFFLE_MODE_BLOCK, 2
		o.Job.Rank, o.Job.WorldSize = rank, world
		return o
	}
	var want epoch
	for _, n := range []int{0, 2} {
		e := serveWithPeers(t, sets, n)
		ep := e.collect(t, job(0, 1))
		times := [2]map[int]int{{}, {}} // per dataset, sample -> times drawn
		total := 0
		for _, b := range ep.batches {
			for _, idx := range b.hdr.GetIndices() {
				part, i := 0, int(idx)
				if i >= starts[len(starts)-1] {
					part, i = 1, i-starts[len(starts)-1]
				}
				times[part][i]++
				total++
			}
		}
		if uint64(total) != ep.info.GetDatasetSize() || uint64(total) != ep.info.GetSamples() {
			t.Fatalf("%d peers: %d samples, JobInfo dataset_size %d and samples %d", n, total, ep.info.GetDatasetSize(), ep.info.GetSamples())
		}
		for part, wantDraws := range []int{9, 3} {
			draws := map[int]int{} // shard -> times drawn
			for i, k := range times[part] {
				s := shardOf(i)
				if d, ok := draws[s]; ok && d != k {
					t.Fatalf("%d peers: dataset %d shard %d's samples drawn %d and %d times: not whole", n, part, s, d, k)
				}
				draws[s] = k
			}
			got := 0
			for s, k := range draws {
				got += k
				for i := starts[s]; i < starts[s+1]; i++ {
					if times[part][i] != k {
						t.Fatalf("%d peers: dataset %d shard %d: sample %d drawn %d times, its shard %d", n, part, s, i, times[part][i], k)
					}
				}
			}
			if got != wantDraws || (part == 0 && len(draws) != 6) {
				t.Fatalf("%d peers: dataset %d: %d shard draws over %d shards %v, want %d", n, part, got, len(draws), draws, wantDraws)
			}
		}
		if n == 0 {
			want = ep
			var split []int64
			for r := range uint32(2) {
				for _, b := range e.collect(t, job(r, 2)).batches {
					split = append(split, b.hdr.GetIndices()...)
				}
			}
			var all []int64
			for _, b := range ep.batches {
				all = append(all, b.hdr.GetIndices()...)
			}
			// Each rank takes ceil(n/2) positions (DistributedSampler's
			// padding wraps to the order's start): all of one rank's, and
			// one more at most.
			if len(split) != 2*((len(all)+1)/2) || !subMultiset(all, split) {
				t.Fatalf("2 ranks drew %d samples, not the one rank's %d (padded to even)", len(split), len(all))
			}
			continue
		}
		for k, b := range ep.batches {
			w := want.batches[k]
			if !slices.Equal(b.hdr.GetIndices(), w.hdr.GetIndices()) || !bytes.Equal(b.data, w.data) {
				t.Fatalf("%d peers: batch %d differs from the lone server's", n, k)
			}
		}
	}
}

// subMultiset says whether every element of a is in b as often.
func subMultiset(a, b []int64) bool {
	m := map[int64]int{}
	for _, x := range b {
		m[x]++
	}
	for _, x := range a {
		if m[x]--; m[x] < 0 {
			return false
		}
	}
	return true
}

// TestMixLocalAndRemote: a mix of a local ImageFolder and one in an S3
// bucket (versitygw on loopback) gives the same epoch, index for index
// and byte for byte, as the mix of the same folder twice from disk: where
// a dataset lives changes nothing of a mix.
func TestMixLocalAndRemote(t *testing.T) {
	big := makeDataset(t, []string{"a", "b", "c"}, 20, false)
	small := makeDataset(t, []string{"x", "y"}, 5, false)
	s := storetest.StartS3(t, t.TempDir())
	s.CreateBucket(t, "mix")
	s.PutTree(t, "mix", "small/", small)
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	local := startServer(t, Config{Datasets: map[string]string{"big": big, "small": small}, Workers: 2})
	remote := startServer(t, Config{Datasets: map[string]string{"big": big, "small": s.URL("mix", "small/")}, Workers: 2})
	want, got := local.collect(t, mixJob(200)), remote.collect(t, mixJob(200))
	if len(got.batches) != len(want.batches) || len(got.batches) == 0 {
		t.Fatalf("%d batches from the bucket's mix, %d from disk's", len(got.batches), len(want.batches))
	}
	for k, b := range got.batches {
		w := want.batches[k]
		if !slices.Equal(b.hdr.GetIndices(), w.hdr.GetIndices()) || !bytes.Equal(b.data, w.data) || len(b.hdr.GetErrors()) != 0 {
			t.Fatalf("batch %d: the bucket's mix differs from disk's (errors %v)", k, b.hdr.GetErrors())
		}
	}
}

// serveWithPeers starts a server of sets that makes batches itself (n 0)
// or leases them to n peers of the same datasets, verifying every slot.
func serveWithPeers(t *testing.T, sets map[string]string, n int) *testEnv {
	t.Helper()
	if n == 0 {
		return startServer(t, Config{Datasets: sets, Workers: 2})
	}
	var addrs []string
	for range n {
		addrs = append(addrs, startServer(t, Config{Datasets: sets, Workers: 1}).addr)
	}
	e := startServer(t, Config{Datasets: sets, Peers: strings.Join(addrs, ","), VerifyFraction: 1})
	waitPeers(t, e, n)
	return e
}
