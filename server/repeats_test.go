package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// repeatsJob is rank r of a world of 3 of a traced job of 3 repeats.
func repeatsJob(r uint32) *pb.OpenJob {
	o := smallJob("tiny", 8)
	o.Job.Repeats, o.Job.Rank, o.Job.WorldSize, o.Job.Trace = 3, r, 3, true
	return o
}

// TestRepeatsAnyTopology: a job of repeated augmentation (3 copies, 3
// ranks) gives every rank RASampler's share, each sample's 3 copies on 3
// ranks, each copy its own draw (its trace) and made once; the bytes are
// the same whether the server makes them alone, leases them to 1 peer, or
// in parts to 3 by cache affinity with every slot verified (a copy made
// with another copy's draw would not match).
func TestRepeatsAnyTopology(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 90, false) // 270 samples: 256 // 3 = 85 a rank
	var want [3]epoch
	for _, n := range []int{0, 1, 3} {
		var e *testEnv
		if n == 0 {
			e = startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
		} else {
			_, addrs := peers(t, root, n)
			e = startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addrs, VerifyFraction: 1})
			waitPeers(t, e, n)
		}
		var eps [3]epoch
		copies := map[int64][]string{} // a sample's copies' traces
		ranks := map[int64][]uint32{}
		for r := range uint32(3) {
			eps[r] = e.collect(t, repeatsJob(r))
			if got := eps[r].end.GetSamples(); got != 85 || eps[r].info.GetSamples() != 85 {
				t.Fatalf("%d peers, rank %d: %d samples (JobInfo %d), RASampler's floor(270 // 256 * 256 / 3) is 85", n, r, got, eps[r].info.GetSamples())
			}
			for _, b := range eps[r].batches {
				for i, idx := range b.hdr.GetIndices() {
					copies[idx] = append(copies[idx], b.hdr.GetTraces()[i])
					ranks[idx] = append(ranks[idx], r)
				}
			}
		}
		if len(copies) != 85 {
			t.Fatalf("%d peers: %d distinct samples over the ranks, want 85 (255 copies of 85)", n, len(copies))
		}
		for idx, tr := range copies {
			if len(tr) != 3 || tr[0] == tr[1] || tr[1] == tr[2] || tr[0] == tr[2] || fmt.Sprint(ranks[idx]) != "[0 1 2]" {
				t.Fatalf("%d peers: sample %d made %d times on ranks %v; want 3 copies on ranks 0, 1, 2, each its own draw:\n%s", n, idx, len(tr), ranks[idx], strings.Join(tr, "\n"))
			}
		}
		if n == 0 {
			want = eps
			continue
		}
		for r := range 3 {
			sameBatches(t, fmt.Sprintf("%d peers rank %d", n, r), want[r].batches, eps[r].batches)
		}
		if q := testQuarantined(e); q != 0 {
			t.Errorf("%d peers: %d quarantined with every slot verified: a copy was verified against another's draw", n, q)
		}
	}
}

// testQuarantined counts the coordinator's quarantined makers.
func testQuarantined(e *testEnv) int {
	ms, _ := e.srv.makers.Snapshot()
	n := 0
	for _, m := range ms {
		if e.srv.verify.Why(m) != nil {
			n++
		}
	}
	return n
}

// TestRepeatsRefused: repeats that cannot run are refused before anything
// is made, saying why.
func TestRepeatsRefused(t *testing.T) {
	root := makeDataset(t, []string{"a"}, 20, false)
	e := startServer(t, Config{Datasets: map[string]string{"tiny": root}})
	for _, c := range []struct {
		repeats uint32
		want    string
	}{
		{65, "repeats 65: want 1..64"},
		{3, "RASampler's epoch of a dataset of 20 samples over 1 ranks, floor(20 // 256 * 256 / 1) samples a rank, is empty"},
	} {
		o := smallJob("tiny", 4)
		o.Job.Repeats = c.repeats
		_, err := readEpoch(e.feedStream(t, context.Background(), o))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.want) {
			t.Errorf("repeats %d: %v, want INVALID_ARGUMENT saying %q", c.repeats, err, c.want)
		}
	}
}

// TestRepeatsCopiesDiffer: the copies of a sample are its own draws of the
// transform, unlike a job without repeats' (which is copy 0).
func TestRepeatsCopiesDiffer(t *testing.T) {
	root := makeDataset(t, []string{"a", "b"}, 130, false)
	e := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
	o := smallJob("tiny", 6)
	o.Job.Shuffle, o.Job.Repeats = false, 2
	ep := e.collect(t, o)
	b := ep.batches[0]
	if idx := b.hdr.GetIndices(); idx[0] != 0 || idx[1] != 0 || idx[2] != 1 {
		t.Fatalf("indices %v: want each sample twice in a row (world 1)", idx)
	}
	size := len(b.data) / len(b.hdr.GetIndices())
	if bytes.Equal(b.data[:size], b.data[size:2*size]) {
		t.Error("sample 0's two copies are the same bytes: not their own draws")
	}
}

// TestRepeatsUnderFailures: with a peer that fails every other lease it is
// given, each rank of a job of repeats still gets every copy once, the
// bytes a lone server makes: a failed lease is leased again with its
// copies.
func TestRepeatsUnderFailures(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 90, false)
	var asked atomic.Int64
	flaky := func(_ dataset.Dataset, _ int, make MakeFunc) MakeFunc {
		return func(ctx context.Context, epoch uint64, indices []int64, place []int, b *pipeline.Batch) error {
			if asked.Add(1)%2 == 1 {
				return errors.New("injected failure")
			}
			return make(ctx, epoch, indices, place, b)
		}
	}
	bad := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, Making: flaky})
	_, good := peers(t, root, 1)
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: bad.addr + "," + good})
	waitPeers(t, coord, 2)
	alone := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
	for r := range uint32(3) {
		want := alone.collect(t, repeatsJob(r))
		got := coord.collect(t, repeatsJob(r))
		sameBatches(t, fmt.Sprintf("rank %d with a flaky peer", r), want.batches, got.batches)
	}
	if asked.Load() < 2 {
		t.Fatalf("the flaky peer was asked %d times: no failure was met", asked.Load())
	}
	t.Logf("the flaky peer was asked %d times", asked.Load())
}
