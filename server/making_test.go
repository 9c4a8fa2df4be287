package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/bench/making"
	"github.com/stoker-dev/stoker/internal/gpu"
	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Config.Making and Config.GPU, as stoker serve's benchmark flags set
// them (--bench-replay, --bench-rate, --bench-gpu-idle-file).

// benchMaking is Config.Making for --bench-replay and --bench-rate, as
// stoker serve sets it.
func benchMaking(t testing.TB, replay bool, rate float64) func(dataset.Dataset, int, MakeFunc) MakeFunc {
	t.Helper()
	m, err := making.New(replay, rate)
	if err != nil {
		t.Fatal(err)
	}
	return func(ds dataset.Dataset, batchSize int, make MakeFunc) MakeFunc {
		return MakeFunc(m.Wrap(ds, batchSize, making.MakeFunc(make)))
	}
}

// TestBenchReplay: under --bench-replay the first batch made is made once
// and every later batch carries its pixels, with the real plan's indices.
func TestBenchReplay(t *testing.T) {
	real := newEnv(t, Config{}).collect(t, smallJob("tiny", 2))
	got := newEnv(t, Config{Making: benchMaking(t, true, 0)}).collect(t, smallJob("tiny", 2))
	if len(got.batches) != len(real.batches) || len(got.batches) != 20 {
		t.Fatalf("%d batches, want %d (20)", len(got.batches), len(real.batches))
	}
	distinct := map[string]bool{}
	for k, b := range got.batches {
		// (A real batch with a bad sample names the good one padding it.)
		if len(real.batches[k].hdr.GetErrors()) == 0 && !slices.Equal(b.hdr.GetIndices(), real.batches[k].hdr.GetIndices()) {
			t.Errorf("batch %d: indices %v, want the plan's %v", k, b.hdr.GetIndices(), real.batches[k].hdr.GetIndices())
		}
		distinct[string(b.data)] = true
	}
	// Those leased before the first was made are real; the rest replay it.
	if len(distinct) > DefaultWindow+1 {
		t.Errorf("%d distinct batches of 20, want at most the window's %d + 1", len(distinct), DefaultWindow)
	}
	if last := got.batches[19].data; !bytes.Equal(last, got.batches[18].data) {
		t.Error("the last two batches differ: not replayed")
	}
}

// TestBenchReplayPeer: --bench-replay and --bench-rate apply to the
// batches a worker makes for a remote coordinator (Work streams) too, not
// only to its own trainers': each Work job replays its first batch.
func TestBenchReplayPeer(t *testing.T) {
	real := newEnv(t, Config{}).collect(t, smallJob("tiny", 2))
	ds := map[string]string{"tiny": makeDataset(t, []string{"a", "b", "c"}, 13, true)}
	worker := startServer(t, Config{Datasets: ds, Workers: 1, Making: benchMaking(t, true, 1000)})
	// Replayed pixels are not the plan's: the coordinator checks the
	// peer's indices and labels, not its pixels.
	coord := startServer(t, Config{Datasets: ds, Peers: worker.addr, VerifyFraction: -1})
	got := coord.collect(t, smallJob("tiny", 2))
	if len(got.batches) != len(real.batches) || len(got.batches) != 20 {
		t.Fatalf("%d batches, want %d (20)", len(got.batches), len(real.batches))
	}
	distinct := map[string]bool{}
	for k, b := range got.batches {
		if len(real.batches[k].hdr.GetErrors()) == 0 && (!slices.Equal(b.hdr.GetIndices(), real.batches[k].hdr.GetIndices()) ||
			!slices.Equal(b.hdr.GetLabels(), real.batches[k].hdr.GetLabels())) {
			t.Errorf("batch %d: indices %v labels %v, want the plan's %v %v", k, b.hdr.GetIndices(), b.hdr.GetLabels(),
				real.batches[k].hdr.GetIndices(), real.batches[k].hdr.GetLabels())
		}
		distinct[string(b.data)] = true
	}
	// Those leased before the first was made are real; the rest replay it.
	if max := work.MaxLeases(1) + 1; len(distinct) > max {
		t.Errorf("%d distinct batches of 20, want at most a Work stream's %d leases + 1", len(distinct), max-1)
	}
	if last := got.batches[19].data; !bytes.Equal(last, got.batches[18].data) {
		t.Error("the last two batches differ: not replayed on the worker")
	}
}

// TestBenchGPUIdleFile: with --bench-gpu-idle-file the server's GPU idle
// ratio is the file's, and the advice rests on it (signal "gpu"); a file
// that goes stale turns the signal back to the trainer's wait.
func TestBenchGPUIdleFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idle")
	if err := os.WriteFile(path, []byte("0.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The file stays fresh for as long as the test may take on a loaded
	// machine (the default age, gpu.FileMaxAge, is internal/gpu's test).
	e := newEnv(t, Config{GPU: gpu.NewFileMonitor(path, hangGuard)})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	open := smallJob("tiny", 2)
	open.Epochs, open.Credits = 0, 1 // endless, and stays open: one batch granted
	stream := e.feedStream(t, ctx, open)
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	// waitStatus waits for the job's published status to satisfy ok.
	waitStatus := func(what string, ok func(*pb.JobStatus) bool) {
		t.Helper()
		var last *pb.JobStatus
		for ctx.Err() == nil {
			resp, err := e.srv.Status(ctx, &pb.StatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetJobs()) == 1 {
				if last = resp.GetJobs()[0]; ok(last) {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: last status %v", what, last)
	}
	waitStatus("idle from the file", func(js *pb.JobStatus) bool {
		return js.GetGpuIdleRatio() == 0.4 && js.GetStarvationSignal() == "gpu"
	})
	// Stale: written long ago.
	old := time.Now().Add(-2 * hangGuard)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	waitStatus("stale file", func(js *pb.JobStatus) bool {
		return js.GetGpuIdleRatio() == -1 && js.GetStarvationSignal() == "trainer wait"
	})
}
