package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stoker-dev/stoker/internal/work"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestPacer: the executor under --bench-rate is a server of fixed service
// time: batches asked for together are done one every 1/rate; one asked
// for when idle is done 1/rate later (not at once); a cancelled batch last
// in line gives back the time it did not use.
func TestPacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &pacer{every: 100 * time.Millisecond}
		t0 := time.Now()
		var mu sync.Mutex
		var done []time.Duration
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := p.wait(context.Background()); err != nil {
					t.Error(err)
				}
				mu.Lock()
				done = append(done, time.Since(t0))
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(done)
		if want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}; !slices.Equal(done, want) {
			t.Errorf("three batches asked together done at %v, want %v", done, want)
		}

		// Idle for a while: the next is done one service time after it is
		// asked for, not at once, and not earlier for the idle time.
		time.Sleep(time.Second)
		t1 := time.Now()
		if err := p.wait(context.Background()); err != nil || time.Since(t1) != 100*time.Millisecond {
			t.Errorf("after idling: done after %v (%v), want 100ms", time.Since(t1), err)
		}

		// A batch cancelled 30 ms into its service, last in line: the next
		// starts then, not after the cancelled one's full time.
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- p.wait(ctx) }()
		time.Sleep(30 * time.Millisecond)
		cancel()
		if err := <-errc; err != context.Canceled {
			t.Errorf("cancelled wait: %v, want context.Canceled", err)
		}
		t2 := time.Now()
		if err := p.wait(context.Background()); err != nil || time.Since(t2) != 100*time.Millisecond {
			t.Errorf("after a cancelled batch: done after %v (%v), want 100ms", time.Since(t2), err)
		}
	})
}

// TestBenchReplayPeer: --bench-replay and --bench-rate apply to the
// batches a worker makes for a remote coordinator (Work streams) too, not
// only to its own trainers': each Work job replays its first batch.
func TestBenchReplayPeer(t *testing.T) {
	real := newEnv(t, Config{}).collect(t, smallJob("tiny", 2))
	ds := map[string]string{"tiny": makeDataset(t, []string{"a", "b", "c"}, 13, true)}
	worker := startServer(t, Config{Datasets: ds, Workers: 1, BenchReplay: true, BenchRate: 1000})
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
	e := newEnv(t, Config{BenchGPUIdleFile: path})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	waitStatus("stale file", func(js *pb.JobStatus) bool {
		return js.GetGpuIdleRatio() == -1 && js.GetStarvationSignal() == "trainer wait"
	})
}
