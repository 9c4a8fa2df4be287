package main

// Fault tests: a coordinator (`stoker serve --workers 0`) leasing one
// epoch's batches to peer `stoker serve` processes that die, hang, come
// late or have other data. Every test checks the epoch a trainer receives:
// batches 0..B-1 exactly once in order, every sample exactly once, and no
// wait longer than the lease timeout plus 5 s.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/localnet"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// The fault tests' dataset and job: 40 batches of 8.
const (
	faultSamples = 320
	faultClasses = 4
	faultBatch   = 8
)

// faultCluster is a coordinator with --workers 0 over n peers, all
// connected.
type faultCluster struct {
	data  string
	coord *serveProc
	peers []*serveProc
}

func startFaultCluster(t *testing.T, ctx context.Context, n int) *faultCluster {
	t.Helper()
	c := &faultCluster{data: writeDataset(t, faultSamples, faultClasses, 0)}
	c.peers = startPeers(t, ctx, n, c.data)
	c.coord = startServe(t, ctx, serveConfig{name: "coordinator", dataset: c.data, peers: peerList(c.peers...)})
	waitPeersReady(t, ctx, c.coord, n)
	return c
}

// logLeases logs how many leases the coordinator gave each maker and how
// many failed, by reason.
func logLeases(t *testing.T, ctx context.Context, coord *serveProc) map[string]float64 {
	t.Helper()
	ms, err := coord.metrics(ctx)
	if err != nil {
		t.Fatalf("coordinator metrics: %v", err)
	}
	var lines []string
	for series, v := range ms {
		if strings.HasPrefix(series, "stoker_leases_total{") || strings.HasPrefix(series, "stoker_lease_failures_total{") ||
			strings.HasPrefix(series, "stoker_results_dropped_total") || strings.HasPrefix(series, "stoker_lease_hedges_total{") {
			lines = append(lines, fmt.Sprintf("%s %v", series, v))
		}
	}
	slices.Sort(lines)
	t.Logf("coordinator: %s", strings.Join(lines, "; "))
	var warns []string
	for _, r := range coord.logRecords() {
		if r["level"] != "INFO" {
			delete(r, "time")
			warns = append(warns, fmt.Sprint(r))
		}
	}
	if len(warns) > 20 {
		warns = append(warns[:20], fmt.Sprintf("… %d more", len(warns)-20))
	}
	if len(warns) > 0 {
		t.Logf("coordinator warnings:\n%s", strings.Join(warns, "\n"))
	}
	return ms
}

// The trainers of the fault tests take batches with a short pause only:
// making batches is then what limits the epoch, so every peer has leases
// in flight when a fault strikes (a slow trainer would find the window
// made ahead, and the fault would hit an idle peer).

// TestFaultKillPeer kills -9 one of three peers when 30%, 50% and 90% of
// the epoch was received (the busiest peer then): its leases in flight
// fail and go to the others.
func TestFaultKillPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	for _, frac := range []float64{0.3, 0.5, 0.9} {
		t.Run(fmt.Sprintf("at%d%%", int(frac*100)), func(t *testing.T) {
			ctx := processTest(t, 5*time.Minute)
			c := startFaultCluster(t, ctx, 3)
			spec := testJob(faultBatch, 7)
			nb := faultSamples / faultBatch
			killAt := int(frac * float64(nb))
			var victim *serveProc
			res := consumeEpoch(t, ctx, c.coord.addr, spec, consumeOpts{
				throttle: 2 * time.Millisecond,
				after: func(n int) {
					if n != killAt {
						return
					}
					// The busiest peer, so that leases are in flight on it.
					inflight := leasesInFlight(t, ctx, c.coord, c.peers)
					i := slices.Index(inflight, slices.Max(inflight))
					victim = c.peers[i]
					victim.kill()
					t.Logf("killed %s after %d of %d batches, with %v leases in flight (all peers: %v)", victim.addr, n, nb, inflight[i], inflight)
				},
			})
			if victim == nil {
				t.Fatalf("the epoch ended before batch %d: no peer was killed", killAt)
			}
			checkEpoch(t, res, spec, faultSamples)
			ms := logLeases(t, ctx, c.coord)
			t.Logf("%v leases of the killed peer failed", sumSeries(ms, "stoker_lease_failures_total", `maker="`+victim.addr+`"`))
			for _, p := range c.peers {
				if sumSeries(ms, "stoker_leases_total", `maker="`+p.addr+`"`) == 0 {
					t.Errorf("peer %s got no leases", p.addr)
				}
			}
		})
	}
}

// leasesInFlight is, for each peer, the leases the coordinator gave it
// that it has not answered yet (or whose answers are on their way): those
// leased, less those its Peer turned away as busy without sending them,
// less those the worker ended (made, failed, or cancelled: a hedge's
// loser).
func leasesInFlight(t *testing.T, ctx context.Context, coord *serveProc, peers []*serveProc) []float64 {
	t.Helper()
	ms, err := coord.metrics(ctx)
	if err != nil {
		t.Fatalf("coordinator metrics: %v", err)
	}
	out := make([]float64, len(peers))
	for i, p := range peers {
		maker := `maker="` + p.addr + `"`
		out[i] = sumSeries(ms, "stoker_leases_total", maker) - sumSeries(ms, "stoker_lease_failures_total", maker, `reason="busy"`) -
			p.metric(t, ctx, "stoker_work_leases_total")
	}
	return out
}

// TestFaultStoppedPeer SIGSTOPs one of three peers mid-epoch: its
// connection stays up but nothing answers, so its leases are hedged or
// time out, and go to the others.
func TestFaultStoppedPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 5*time.Minute)
	c := startFaultCluster(t, ctx, 3)
	spec := testJob(faultBatch, 8)
	nb := faultSamples / faultBatch
	var victim *serveProc
	res := consumeEpoch(t, ctx, c.coord.addr, spec, consumeOpts{
		throttle: 2 * time.Millisecond,
		after: func(n int) {
			if n == nb/3 {
				inflight := leasesInFlight(t, ctx, c.coord, c.peers)
				i := slices.Index(inflight, slices.Max(inflight))
				victim = c.peers[i]
				victim.stop(t)
				t.Logf("stopped %s after %d of %d batches, with %v leases in flight (all peers: %v)", victim.addr, n, nb, inflight[i], inflight)
			}
		},
	})
	if victim == nil {
		t.Fatalf("the epoch ended before batch %d: no peer was stopped", nb/3)
	}
	checkEpoch(t, res, spec, faultSamples)
	ms := logLeases(t, ctx, c.coord)
	// Its leases in flight time out, or are outrun by their hedges first.
	if sumSeries(ms, "stoker_lease_failures_total", `maker="`+victim.addr+`"`, `reason="timeout"`)+
		sumSeries(ms, "stoker_lease_failures_total", `maker="`+victim.addr+`"`, `reason="slow"`) == 0 {
		t.Errorf("no lease of the stopped peer %s timed out or was outrun by its hedge: the fault was not exercised", victim.addr)
	}
}

// TestFaultLatePeer starts a coordinator with --peers A,B while B is not
// running, and B mid-epoch: B must get leases, and the epoch completes
// exactly once.
func TestFaultLatePeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	ctx := processTest(t, 5*time.Minute)
	data := writeDataset(t, faultSamples, faultClasses, 0)
	a := startPeers(t, ctx, 1, data)[0]
	port, err := localnet.FreePortOn("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	bAddr := fmt.Sprintf("127.0.0.1:%d", port)
	coord := startServe(t, ctx, serveConfig{name: "coordinator", dataset: data, peers: a.addr + "," + bAddr})
	waitPeersReady(t, ctx, coord, 1)
	spec := testJob(faultBatch, 9)
	nb := faultSamples / faultBatch
	var b *serveProc
	var joined time.Duration
	res := consumeEpoch(t, ctx, coord.addr, spec, consumeOpts{
		throttle: 2 * time.Millisecond,
		after: func(n int) {
			if n != nb/4 {
				return
			}
			b = startServe(t, ctx, serveConfig{name: "late peer", listen: bAddr, dataset: data, workers: 1})
			t.Logf("started %s after %d of %d batches", b.addr, n, nb)
			// The trainer holds still until the coordinator connected to B
			// (gRPC's reconnection back-off decides when), so that batches
			// remain for B.
			joined = waitFor(t, ctx, hangGuard, "the coordinator connects to the late peer", func() bool {
				ms, err := coord.metrics(ctx)
				return err == nil && sumSeries(ms, "stoker_peers_ready") == 2
			})
			t.Logf("the coordinator connected to %s %v after it started", b.addr, joined.Round(time.Millisecond))
		},
	})
	checkEpoch(t, res, spec, faultSamples)
	logLeases(t, ctx, coord)
	if b == nil {
		t.Fatal("the late peer was never started")
	}
	if got := b.metric(t, ctx, "stoker_work_leases_total", `outcome="done"`); got == 0 {
		t.Errorf("the late peer %s made no batch", b.addr)
	} else {
		t.Logf("the late peer made %v batches", got)
	}
}

// TestFaultFingerprintMismatch adds a peer whose dataset "ds" has other
// files: it refuses the job, the coordinator says so naming both
// fingerprints, and the other peers make the epoch.
func TestFaultFingerprintMismatch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 5*time.Minute)
	data := writeDataset(t, faultSamples, faultClasses, 0)
	other := writeDataset(t, faultSamples, faultClasses, 1)
	good := startPeers(t, ctx, 2, data)
	bad := startServe(t, ctx, serveConfig{name: "peer with other data", dataset: other, workers: 1})
	fpGood, fpBad := fingerprintOf(t, ctx, good[0].addr), fingerprintOf(t, ctx, bad.addr)
	if fpGood == fpBad {
		t.Fatalf("both datasets have fingerprint %s", fpGood)
	}
	// The odd peer first, so that it is tried early.
	coord := startServe(t, ctx, serveConfig{name: "coordinator", dataset: data, peers: peerList(bad, good[0], good[1])})
	waitPeersReady(t, ctx, coord, 3)
	spec := testJob(faultBatch, 10)
	res := consumeEpoch(t, ctx, coord.addr, spec, consumeOpts{throttle: 2 * time.Millisecond})
	checkEpoch(t, res, spec, faultSamples)
	ms := logLeases(t, ctx, coord)

	if got := sumSeries(ms, "stoker_lease_failures_total", `maker="`+bad.addr+`"`, `reason="refused"`); got == 0 {
		t.Errorf("no refused lease for %s in the coordinator's metrics", bad.addr)
	}
	refusals := coord.findLogs("maker refused the job", map[string]string{"maker": bad.addr})
	if len(refusals) == 0 {
		t.Fatalf("the coordinator logged no refusal by %s", bad.addr)
	}
	want := fmt.Sprintf("the job expects fingerprint %s, this server has %s", fpGood, fpBad)
	if msg, _ := refusals[0]["err"].(string); !strings.Contains(msg, want) {
		t.Errorf("the coordinator's refusal says %q, want it to contain %q", msg, want)
	} else {
		t.Logf("coordinator: %s", msg)
	}
	if len(refusals) > 1 {
		t.Errorf("the refusal was logged %d times, want once", len(refusals))
	}
	if n := bad.metric(t, ctx, "stoker_work_leases_total", `outcome="done"`); n != 0 {
		t.Errorf("the peer with other data made %v batches", n)
	}
	for _, p := range good {
		if sumSeries(ms, "stoker_leases_total", `maker="`+p.addr+`"`) == 0 {
			t.Errorf("peer %s got no leases", p.addr)
		}
	}
}

// fingerprintOf is the fingerprint of dataset "ds" on the server at addr.
func fingerprintOf(t *testing.T, ctx context.Context, addr string) string {
	t.Helper()
	conn, err := openConn(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := stokerv1.NewFeedServiceClient(conn).ListDatasets(ctx, &stokerv1.ListDatasetsRequest{})
	if err != nil || len(resp.GetDatasets()) != 1 {
		t.Fatalf("ListDatasets on %s: %v, %v", addr, resp, err)
	}
	return resp.GetDatasets()[0].GetFingerprint()
}

// TestFaultSameBytes runs the same job on one server alone and on a
// coordinator with --workers 0 and three peers: every batch must be
// byte-identical (pixels, labels, indices).
func TestFaultSameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 5*time.Minute)
	c := startFaultCluster(t, ctx, 3)
	alone := startServe(t, ctx, serveConfig{name: "alone", dataset: c.data, workers: 2})
	spec := testJob(faultBatch, 11)
	single := consumeEpoch(t, ctx, alone.addr, spec, consumeOpts{})
	dist := consumeEpoch(t, ctx, c.coord.addr, spec, consumeOpts{})
	checkEpoch(t, single, spec, faultSamples)
	checkEpoch(t, dist, spec, faultSamples)
	ms := logLeases(t, ctx, c.coord)
	for _, p := range c.peers {
		if sumSeries(ms, "stoker_leases_total", `maker="`+p.addr+`"`) == 0 {
			t.Errorf("peer %s got no leases", p.addr)
		}
	}
	if len(single.batches) != len(dist.batches) {
		t.Fatalf("%d batches alone, %d distributed", len(single.batches), len(dist.batches))
	}
	differ := 0
	for i := range single.batches {
		if single.batches[i].sum() != dist.batches[i].sum() {
			if differ++; differ <= 5 {
				t.Errorf("batch %d differs: alone %x, distributed %x", i, single.batches[i].sum(), dist.batches[i].sum())
			}
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d batches differ", differ, len(single.batches))
	}
}

// TestFaultConcurrentJobs runs four trainers at once on a coordinator with
// --workers 0 and three peers: the jobs share each peer's Work stream, and
// no peer may have to turn a lease away for want of room (a lease the
// coordinator should not have sent), and every trainer gets its epoch
// exactly once.
func TestFaultConcurrentJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 5*time.Minute)
	c := startFaultCluster(t, ctx, 3)
	const jobs = 4
	var (
		wg   sync.WaitGroup
		res  [jobs]epochResult
		errs [jobs]error
	)
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = runEpoch(ctx, c.coord.addr, testJob(faultBatch, uint64(20+i)), consumeOpts{throttle: 2 * time.Millisecond})
		}()
	}
	wg.Wait()
	for i := range jobs {
		if errs[i] != nil {
			t.Errorf("job %d: %v", i, errs[i])
			continue
		}
		t.Run(fmt.Sprintf("job%d", i), func(t *testing.T) { checkEpoch(t, res[i], testJob(faultBatch, uint64(20+i)), faultSamples) })
	}
	logLeases(t, ctx, c.coord)
	n := 0
	for _, r := range c.coord.findLogs("lease failed, leasing the batch again", nil) {
		if err, _ := r["err"].(string); strings.Contains(err, "ResourceExhausted") {
			if n++; n <= 3 {
				t.Errorf("a peer turned a lease away: %s: %s", r["maker"], err)
			}
		}
	}
	if n > 3 {
		t.Errorf("… %d leases turned away in all", n)
	}
}
