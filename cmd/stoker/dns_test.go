package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/localnet"
)

// startTestDNS is a DNS server on loopback answering for name, stopped
// when the test ends.
func startTestDNS(t *testing.T, name string) *localnet.DNS {
	t.Helper()
	d, err := localnet.StartDNS(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// TestDNSDiscovery runs a coordinator whose peers are the A records of
// "workers." on a test DNS server, re-resolved every 100 ms, and changes
// the records mid-epoch: .2 alone, then .3 added, .2 removed (then killed),
// .4 added. The epoch completes exactly once, and each peer gets leases
// while it is listed, and only then.
func TestDNSDiscovery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	port, err := localnet.FreePortOn(ips...)
	if err != nil {
		t.Skipf("cannot listen on one port of %v (Linux routes 127/8 to lo; this machine does not): %v", ips, err)
	}
	ctx := processTest(t, 5*time.Minute)
	const samples, batch = 512, 8
	nb := samples / batch
	data := writeDataset(t, samples, faultClasses, 0)

	ps := make(map[string]*serveProc)
	for _, ip := range ips {
		ps[ip] = launchServe(t, serveConfig{name: "peer " + ip, listen: fmt.Sprintf("%s:%d", ip, port), dataset: data, workers: 1})
	}
	for _, ip := range ips {
		ps[ip].waitReady(t, ctx)
	}
	addr := func(ip string) string { return fmt.Sprintf("%s:%d", ip, port) }

	d := startTestDNS(t, "workers")
	d.Set(ips[0])
	coord := startServe(t, ctx, serveConfig{
		name: "coordinator", dataset: data, peerRefresh: 100 * time.Millisecond,
		peers: fmt.Sprintf("dns://%s/workers:%d", d.Addr(), port),
	})
	waitPeersReady(t, ctx, coord, 1)

	// leasesTo is what the coordinator leased to ip so far.
	leasesTo := func(ip string) float64 {
		return coord.metric(t, ctx, "stoker_leases_total", `maker="`+addr(ip)+`"`)
	}
	// failuresOf is how many leases to ip failed: not those turned away
	// before they were sent (busy, or draining: one chosen just as ip left
	// the set is turned away, and made elsewhere, rather than sent on a
	// stream its retirement closes).
	failuresOf := func(ip string) float64 {
		ms, err := coord.metrics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return sumSeries(ms, "stoker_lease_failures_total", `maker="`+addr(ip)+`"`) -
			sumSeries(ms, "stoker_lease_failures_total", `maker="`+addr(ip)+`"`, `reason="busy"`) -
			sumSeries(ms, "stoker_lease_failures_total", `maker="`+addr(ip)+`"`, `reason="draining"`)
	}
	// waitMember waits until the coordinator's peers are exactly ips.
	waitMember := func(ips ...string) {
		t.Helper()
		took := waitFor(t, ctx, hangGuard, fmt.Sprintf("the coordinator's peers become %v", ips), func() bool {
			ms, err := coord.metrics(ctx)
			if err != nil || sumSeries(ms, "stoker_peers_ready") != float64(len(ips)) {
				return false
			}
			added := make(map[string]int)
			for _, r := range coord.logRecords() {
				a, _ := r["addr"].(string)
				switch r["msg"] {
				case "peer added":
					added[a]++
				case "peer removed":
					added[a]--
				}
			}
			var have, want []string
			for a, n := range added {
				if n > 0 {
					have = append(have, a)
				}
			}
			for _, ip := range ips {
				want = append(want, addr(ip))
			}
			slices.Sort(have)
			return slices.Equal(have, want)
		})
		t.Logf("the coordinator's peers are %v after %v", ips, took.Round(time.Millisecond))
	}

	var (
		before3, before4 float64 // leases to .3 and .4 before they were listed
		made2            float64 // batches .2 made
		removed          = make(chan struct{})
	)
	spec := testJob(batch, 12)
	res := consumeEpoch(t, ctx, coord.addr, spec, consumeOpts{
		throttle: 2 * time.Millisecond,
		after: func(n int) {
			switch n {
			case nb / 8:
				before3 = leasesTo(ips[1])
				d.Set(ips[0], ips[1])
				t.Logf("after %d of %d batches: workers. is %v", n, nb, ips[:2])
				waitMember(ips[0], ips[1])
			case 3 * nb / 8:
				// .2 leaves DNS while the trainer goes on consuming, so that
				// it holds leases when the coordinator drops it.
				failed2 := failuresOf(ips[0])
				d.Set(ips[1])
				t.Logf("after %d of %d batches: workers. is %v", n, nb, ips[1:2])
				go func() {
					defer close(removed)
					// It finishes what it holds, then is closed: no lease of
					// it fails (and is made again elsewhere).
					waitFor(t, ctx, hangGuard, "the coordinator retires "+addr(ips[0]), func() bool {
						return len(coord.findLogs("peer retired", map[string]string{"addr": addr(ips[0])})) > 0
					})
					r := coord.findLogs("peer retired", map[string]string{"addr": addr(ips[0])})[0]
					held, _ := r["in_flight_at_removal"].(float64)
					u, _ := r["unfinished"].(float64)
					t.Logf("%s left DNS with %v leases in flight; %v unfinished when closed", addr(ips[0]), held, u)
					// (Its series go soon after it was closed: a count can
					// only drop to 0, never grow.)
					if f := failuresOf(ips[0]); u != 0 || f > failed2 {
						t.Errorf("%s: %v leases unfinished when closed, %v failed", addr(ips[0]), u, f-failed2)
					}
					made2 = ps[ips[0]].metric(t, ctx, "stoker_work_leases_total", `outcome="done"`)
					ps[ips[0]].kill()
					t.Logf("killed %s, which made %v batches", addr(ips[0]), made2)
				}()
			case nb / 2:
				<-removed
				waitMember(ips[1])
				before4 = leasesTo(ips[2])
				d.Set(ips[1], ips[2])
				t.Logf("after %d of %d batches: workers. is %v", n, nb, ips[1:])
				waitMember(ips[1], ips[2])
			}
		},
	})
	checkEpoch(t, res, spec, samples)
	logLeases(t, ctx, coord)
	t.Logf("the test DNS server answered %d queries for workers.", d.Queries())

	if made2 == 0 {
		t.Errorf("%s made no batch while it was listed", addr(ips[0]))
	}
	// A peer that left takes its series with it (DNS churn must not grow
	// them); a lease after its removal would have made it again.
	waitFor(t, ctx, hangGuard, "the series of "+addr(ips[0])+" gone", func() bool {
		ms, err := coord.metrics(ctx)
		return err == nil && sumSeries(ms, "stoker_leases_total", `maker="`+addr(ips[0])+`"`) == 0 &&
			sumSeries(ms, "stoker_lease_failures_total", `maker="`+addr(ips[0])+`"`) == 0
	})
	if before3 != 0 || before4 != 0 {
		t.Errorf("leases before the peers were listed: %v to .3, %v to .4", before3, before4)
	}
	for _, ip := range ips[1:] {
		if n := ps[ip].metric(t, ctx, "stoker_work_leases_total", `outcome="done"`); n == 0 {
			t.Errorf("%s made no batch while it was listed", addr(ip))
		} else {
			t.Logf("%s made %v batches", addr(ip), n)
		}
	}
}
