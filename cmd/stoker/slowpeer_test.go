package main

// A slow peer beside a healthy one (issue 27, hole 4): real `stoker serve`
// processes, each worker's executor paced by --bench-rate so that its rate
// is a number the test sets whatever the machine: the healthy one at
// slowPeerRate batches a second, the slow one at a share of it (0.08;
// 0.02 where the test asserts that its leases are hedged).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	slowPeerRate  = 10.0 // the healthy worker's batches per second
	slowPeerShare = 0.08 // the slow worker's rate, as a share of it
	// slowPeerHedgedShare is the slow worker's share in
	// TestFaultSlowPeer/whole: a batch in 5 s. A whole lease is hedged
	// when its hedge delay (twice the p95 of the job's recent leases,
	// times the leases queued before it) comes before its maker answers.
	// On a loaded machine the healthy worker is CPU-bound below its pace
	// and a job's first leases are slow, which raises that p95: at 0.08
	// (1.25 s a batch) the slow worker once made its two first leases
	// before their hedges were due and, its rate then known, was given
	// no more, so nothing was hedged. At 0.02 its first leases are
	// outrun whatever the load.
	slowPeerHedgedShare = 0.02
	// slowPeerLeaseTimeout is the --lease-timeout of TestFaultSlowPeer/whole's
	// coordinator over both peers: past the slow peer's leases (5 s each
	// at its rate, queued at most four deep) and past any hedge delay, so
	// that its leases end by a hedge, never by a timeout.
	slowPeerLeaseTimeout = 30 * time.Second
)

// slowPeerCluster is the healthy worker, the slow one, and two
// coordinators (--workers 0): one over the healthy worker alone, one over
// both (with bothArgs).
type slowPeerCluster struct {
	data          string
	healthy, slow *serveProc
	alone, both   *serveProc
}

func startSlowPeerCluster(t testing.TB, ctx context.Context, samples int, share float64, bothArgs ...string) *slowPeerCluster {
	t.Helper()
	c := &slowPeerCluster{data: writeDataset(t, samples, faultClasses, 0)}
	rate := func(r float64) []string { return []string{"--bench-rate", fmt.Sprint(r)} }
	c.healthy = launchServe(t, serveConfig{name: "healthy peer", dataset: c.data, workers: 1, args: rate(slowPeerRate)})
	c.slow = launchServe(t, serveConfig{name: "slow peer", dataset: c.data, workers: 1, args: rate(share * slowPeerRate)})
	c.healthy.waitReady(t, ctx)
	c.slow.waitReady(t, ctx)
	c.alone = launchServe(t, serveConfig{name: "coordinator (healthy peer)", dataset: c.data, peers: peerList(c.healthy)})
	c.both = launchServe(t, serveConfig{name: "coordinator (both peers)", dataset: c.data, peers: peerList(c.healthy, c.slow), args: bothArgs})
	c.alone.waitReady(t, ctx)
	c.both.waitReady(t, ctx)
	waitPeersReady(t, ctx, c.alone, 1)
	waitPeersReady(t, ctx, c.both, 2)
	return c
}

// epochs runs one epoch on each coordinator, the healthy peer alone first,
// and returns the images per second each trainer got; watch, if not nil,
// runs while the second epoch does, until its context ends.
func (c *slowPeerCluster) epochs(t testing.TB, ctx context.Context, samples int, seed uint64, watch func(context.Context)) (alone, both float64) {
	t.Helper()
	spec := testJob(faultBatch, seed)
	a := consumeEpoch(t, ctx, c.alone.addr, spec, consumeOpts{throttle: 2 * time.Millisecond})
	checkEpoch(t, a, spec, samples)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if watch != nil {
		wg.Add(1)
		go func() { defer wg.Done(); watch(wctx) }()
	}
	b := consumeEpoch(t, ctx, c.both.addr, spec, consumeOpts{throttle: 2 * time.Millisecond})
	stop()
	wg.Wait()
	checkEpoch(t, b, spec, samples)
	return float64(samples) / a.took.Seconds(), float64(samples) / b.took.Seconds()
}

// TestFaultSlowPeer: beside a healthy worker, one at 0.08 of its speed
// (0.02 with whole batches: slowPeerHedgedShare).
// The trainer gets its epoch exactly once, and the healthy worker has a
// hand in nearly every batch. How the slow worker is kept from holding
// the trainer back depends on the routing:
//
//   - whole batches (--cache-affinity=false): the slow worker's leases are
//     hedged (it is sent cancellations) and counted as outrun, and the
//     healthy worker makes nearly every batch; `stoker status` marking it
//     backed off is logged when a poll sees it.
//   - cache affinity (the default): batches go in parts, and the slow
//     worker's share of the samples follows the rate its parts are made at
//     (a routing weight of 1/16 for 0.08), so its parts are small and come
//     in time: it has a part in fewer batches than the healthy worker, and
//     nothing needs hedging.
//
// The trainer's rate beside the slow worker, as a share of its rate with
// the healthy one alone, is logged (BenchmarkSlowPeer measures it: a test
// asserts no timing).
func TestFaultSlowPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	nb := faultSamples / faultBatch
	// healthyMade checks that the healthy worker had a hand in nearly
	// every batch of both coordinators' epochs (a whole batch, or a part).
	healthyMade := func(t *testing.T, ctx context.Context, c *slowPeerCluster) {
		t.Helper()
		made := c.healthy.metric(t, ctx, "stoker_work_leases_total", `outcome="done"`)
		if slowMade := c.slow.metric(t, ctx, "stoker_work_leases_total", `outcome="done"`); made < float64(2*nb)-float64(nb)/10 {
			t.Errorf("the healthy peer made %v leases, the slow one %v, of %d batches in two epochs", made, slowMade, 2*nb)
		}
	}

	t.Run("whole", func(t *testing.T) {
		ctx := processTest(t, 120*time.Second)
		// The coordinator's lease timeout is far past any hedge delay
		// here. A peer's lease reports no progress, so it times out one
		// timeout after its issue, and a lease hedges only when its delay
		// (twice the p95 of the job's recent leases, times the leases queued
		// before it on its maker) is under the timeout. At the harness's 2 s,
		// a loaded machine that slowed the healthy peer's first leases
		// pushed the slow peer's second queued lease (2.5 s at its rate)
		// past the timeout before its hedge was due: reason="timeout",
		// no hedge, and nothing this test asserts about hedges happened.
		c := startSlowPeerCluster(t, ctx, faultSamples, slowPeerHedgedShare, "--cache-affinity=false", "--lease-timeout", slowPeerLeaseTimeout.String())
		var (
			mu     sync.Mutex
			marked string
		)
		watch := func(ctx context.Context) {
			for ctx.Err() == nil {
				var buf strings.Builder
				if err := statusTo(&buf, []string{"--timeout", "5s", c.both.addr}); err == nil {
					for _, line := range strings.Split(buf.String(), "\n") {
						if i := strings.Index(line, c.slow.addr+" "); i >= 0 && strings.Contains(line[i:], "(backed off ") {
							mu.Lock()
							marked = line[i:]
							mu.Unlock()
							return
						}
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		alone, both := c.epochs(t, ctx, faultSamples, 30, watch)
		t.Logf("images/s: %.0f with the healthy peer alone, %.0f beside the slow one: %.2f of it (logged, not asserted: see BenchmarkSlowPeer)", alone, both, both/alone)
		ms := logLeases(t, ctx, c.both)
		slow := `maker="` + c.slow.addr + `"`
		if won := sumSeries(ms, "stoker_lease_hedges_total", `outcome="won"`); won == 0 {
			t.Error("no hedge made a batch of the slow peer's first")
		}
		if n := sumSeries(ms, "stoker_lease_failures_total", slow, `reason="slow"`); n == 0 {
			t.Error("the slow peer was never counted as outrun by a hedge")
		}
		if n := c.slow.metric(t, ctx, "stoker_work_leases_total", `outcome="cancelled"`); n == 0 {
			t.Error("the slow peer was sent no cancellation of a lease outrun by its hedge")
		}
		// How long the slow peer stays backed off depends on how many of
		// its leases were outrun in a row, and a first back-off is 100 ms:
		// on a loaded machine the status poll can miss it (a CPU hog on
		// both cores did). So the mark is logged when seen, not asserted
		// here: TestStatusBackedOff checks what status prints of a
		// backed-off maker, the coord tests when a maker is backed off,
		// and the counts above that this one was outrun.
		mu.Lock()
		if marked == "" {
			t.Logf("stoker status was not seen marking the slow peer %s backed off (its back-offs were shorter than a status poll here)", c.slow.addr)
		} else {
			t.Logf("stoker status: %s", marked)
		}
		mu.Unlock()
		healthyMade(t, ctx, c)
	})

	t.Run("affinity", func(t *testing.T) {
		ctx := processTest(t, 120*time.Second)
		c := startSlowPeerCluster(t, ctx, faultSamples, slowPeerShare)
		alone, both := c.epochs(t, ctx, faultSamples, 30, nil)
		t.Logf("images/s: %.0f with the healthy peer alone, %.0f beside the slow one: %.2f of it (logged, not asserted: see BenchmarkSlowPeer)", alone, both, both/alone)
		ms := logLeases(t, ctx, c.both)
		t.Logf("%s; %v hedges", affinityOf(ms), sumSeries(ms, "stoker_lease_hedges_total"))
		// Leased in parts at equal weights, each maker would have a part
		// in nearly every batch; the slow one's weight keeps it to a part
		// in about a third.
		slowParts := sumSeries(ms, "stoker_leases_total", `maker="`+c.slow.addr+`"`)
		healthyParts := sumSeries(ms, "stoker_leases_total", `maker="`+c.healthy.addr+`"`)
		t.Logf("parts of the %d batches: %v on the healthy peer, %v on the slow one", nb, healthyParts, slowParts)
		if slowParts >= healthyParts {
			t.Errorf("the slow peer had %v parts, the healthy one %v: its share of the samples did not follow its rate", slowParts, healthyParts)
		}
		healthyMade(t, ctx, c)
	})
}

// BenchmarkSlowPeer measures the trainer's images/s beside a worker at
// 0.08 of the healthy worker's speed, as a share of its images/s with the
// healthy worker alone (the ratio metric; issue 27 asks for >= 0.8; 1.000
// measured, 0.69 before: BENCHMARKS.md). Run:
// go test -run '^$' -bench BenchmarkSlowPeer -benchtime 3x ./cmd/stoker
func BenchmarkSlowPeer(b *testing.B) {
	const samples = 8 * 200 // 200 batches: 20 s at the healthy worker's rate
	ctx := processTest(b, 30*time.Minute)
	c := startSlowPeerCluster(b, ctx, samples, slowPeerShare)
	var sum float64
	n := 0
	for b.Loop() {
		alone, both := c.epochs(b, ctx, samples, uint64(40+n), nil)
		b.Logf("epoch pair %d: images/s %.0f alone, %.0f beside the slow peer: %.3f", n, alone, both, both/alone)
		sum += both / alone
		n++
	}
	b.ReportMetric(sum/float64(n), "ratio")
}
