package server

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// seriesOf lists the metric series reg has, as "name{labels}".
func seriesOf(t testing.TB, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out = append(out, mf.GetName()+"{"+strings.Join(ls, ",")+"}")
		}
	}
	slices.Sort(out)
	return out
}

// heapAfterGC is the live heap, after two collections (the second frees
// what sync.Pools dropped in the first).
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestWorkChurn (issue 16): 1,000 jobs opened and closed by 8 coordinators
// against 4 shared workers. Every job's epoch is whole; afterwards the
// workers hold no job (stoker_work_jobs 0, nothing in the stall schedule),
// and the goroutines, the live heap and the workers' metric series are
// back to what they were after a warm-up of the same jobs: nothing grows
// with the jobs that went through.
func TestWorkChurn(t *testing.T) {
	const (
		coordinators = 8
		workers      = 4
		jobs         = 1000
		warmup       = 2 // jobs per coordinator before the baseline
	)
	root := makeDataset(t, []string{"a", "b"}, 4, false) // 8 small images: 2 batches of 4 per job
	ws, addrs := peers(t, root, workers)
	var cs []*testEnv
	for range coordinators {
		// Every peer sample re-made and compared (the verifier's executor
		// starts at its first use: in the warm-up).
		c := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addrs, VerifyFraction: 1})
		cs = append(cs, c)
	}
	for _, c := range cs {
		waitPeers(t, c, workers)
	}
	// run runs n jobs on each coordinator at once, job i with seed i.
	next := 0
	run := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, coordinators)
		for _, c := range cs {
			first := next
			next += n
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := first; i < first+n; i++ {
					open := smallJob("tiny", 4)
					open.Job.Seed = uint64(i)
					ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
					ep, err := readEpoch(c.feedStream(t, ctx, open))
					cancel()
					if err == nil && len(ep.batches) != 2 {
						err = fmt.Errorf("%d batches, want 2", len(ep.batches))
					}
					if err != nil {
						errs <- fmt.Errorf("job %d on %s: %w", i, c.addr, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	settled := func() {
		t.Helper()
		for _, w := range ws {
			waitUntil(t, "the workers' jobs ended", func() bool { return w.workJobs() == 0 && w.sharesHeld() == 0 })
		}
	}
	run(warmup)
	settled()
	goroutines, heap := runtime.NumGoroutine(), heapAfterGC()
	series := make([][]string, workers)
	for i, w := range ws {
		series[i] = seriesOf(t, w.reg)
	}

	start := time.Now()
	run((jobs - coordinators*warmup) / coordinators)
	t.Logf("%d jobs by %d coordinators on %d workers in %v", next, coordinators, workers, time.Since(start).Round(time.Millisecond))
	if next != jobs {
		t.Fatalf("%d jobs run, want %d", next, jobs)
	}
	settled()
	waitUntil(t, fmt.Sprintf("goroutines back to %d (now %d)", goroutines, runtime.NumGoroutine()), func() bool {
		return runtime.NumGoroutine() <= goroutines
	})
	// The live heap: bounded structures (HTTP/2 header tables, gRPC's
	// buffer pools) fill differently from run to run, by a few hundred
	// KiB; a job that left a KiB behind (a worker's state for a job is
	// several) would leave a MiB after a thousand.
	const slack = 1 << 20
	if after := heapAfterGC(); after > heap+slack {
		t.Errorf("live heap %d KiB after %d jobs, %d KiB before: more than %d KiB grew", after>>10, jobs, heap>>10, slack>>10)
	} else {
		t.Logf("live heap %d KiB after the jobs, %d KiB before", after>>10, heap>>10)
	}
	for i, w := range ws {
		// Only series of fixed label sets may appear (a lease outcome or
		// a refusal policy seen for the first time); none by job or by
		// coordinator.
		for _, s := range seriesOf(t, w.reg) {
			if !slices.Contains(series[i], s) && !strings.HasPrefix(s, "stoker_work_leases_total{") && !strings.HasPrefix(s, "stoker_refusals_total{") {
				t.Errorf("worker %d: a new series %s", i, s)
			}
		}
		if got := w.workJobs(); got != 0 {
			t.Errorf("worker %d: stoker_work_jobs %d", i, got)
		}
	}
}
