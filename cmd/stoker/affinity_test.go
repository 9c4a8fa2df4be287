package main

// Cache affinity (server/internal/coord/affinity.go) through faults, with
// real processes: a coordinator with --workers 0 leases each batch in
// parts, one per home maker among its samples, and copies the parts into
// the batch. Whatever the routing, and whichever peer dies, the trainer
// must get every sample exactly once and the bytes one server alone makes:
// a sample's pixels are a function of seed, epoch and index only.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// affinityCount is a coordinator's stoker_affinity_samples_total: the
// samples of the batches it delivered, made at their home maker or away,
// and whether the series exist at all.
type affinityCount struct {
	home, away float64
	present    bool
}

func affinityOf(ms map[string]float64) affinityCount {
	var a affinityCount
	for series := range ms {
		if strings.HasPrefix(series, "stoker_affinity_samples_total{") {
			a.present = true
		}
	}
	a.home = sumSeries(ms, "stoker_affinity_samples_total", `made="home"`)
	a.away = sumSeries(ms, "stoker_affinity_samples_total", `made="away"`)
	return a
}

func (a affinityCount) minus(b affinityCount) affinityCount {
	return affinityCount{home: a.home - b.home, away: a.away - b.away, present: a.present}
}

func (a affinityCount) String() string {
	if !a.present {
		return "no stoker_affinity_samples_total series"
	}
	return fmt.Sprintf("%v samples made at home, %v away", a.home, a.away)
}

// scrape is the coordinator's metrics now, failing the test if it cannot
// be read.
func scrape(t *testing.T, ctx context.Context, p *serveProc) map[string]float64 {
	t.Helper()
	ms, err := p.metrics(ctx)
	if err != nil {
		t.Fatalf("%s metrics: %v", p.name, err)
	}
	return ms
}

// sameBatches fails the test for every batch of got whose bytes (pixels,
// labels, indices) are not those of want's batch of the same number.
func sameBatches(t *testing.T, wantName string, want epochResult, gotName string, got epochResult) {
	t.Helper()
	sums := make(map[uint64][32]byte, len(want.batches))
	for _, b := range want.batches {
		sums[b.hdr.GetNumber()] = b.sum()
	}
	differ := 0
	for _, b := range got.batches {
		k := b.hdr.GetNumber()
		w, ok := sums[k]
		if !ok {
			t.Errorf("epoch %d: batch %d %s has no batch %s to compare with", got.epoch, k, gotName, wantName)
			continue
		}
		if s := b.sum(); s != w {
			if differ++; differ <= 5 {
				t.Errorf("epoch %d: batch %d differs: %s %x, %s %x", got.epoch, k, wantName, w, gotName, s)
			}
		}
	}
	if differ > 0 {
		t.Errorf("epoch %d: %d of %d batches %s differ from %s", got.epoch, differ, len(got.batches), gotName, wantName)
	}
}

// failuresOf is maker's lease failures in ms, other than turned away
// (busy, draining: no failure of the maker's).
func failuresOf(ms map[string]float64, maker string) float64 {
	m := `maker="` + maker + `"`
	return sumSeries(ms, "stoker_lease_failures_total", m) -
		sumSeries(ms, "stoker_lease_failures_total", m, `reason="busy"`) -
		sumSeries(ms, "stoker_lease_failures_total", m, `reason="draining"`)
}

// TestFaultKillPeerAffinity kills -9 the busiest of three peers mid-epoch
// while batches are leased in parts by cache affinity (the default), then
// runs the next epoch on the two that are left. Both epochs must be the
// one server alone makes, batch for batch and byte for byte, each sample
// exactly once; the killed peer's parts fail whole leases, which are made
// again with its samples routed to the next maker of their ranking.
func TestFaultKillPeerAffinity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 8*time.Minute)
	data := writeDataset(t, faultSamples, faultClasses, 0)
	spec := testJob(faultBatch, 14)
	nb := faultSamples / faultBatch

	// The reference: one server making its own batches, epochs 0 and 1.
	alone := startServe(t, ctx, serveConfig{name: "alone", dataset: data, workers: 2})
	var ref [2]epochResult
	for e := range ref {
		ref[e] = consumeEpoch(t, ctx, alone.addr, spec, consumeOpts{epoch: uint64(e)})
		checkEpoch(t, ref[e], spec, faultSamples)
	}
	alone.kill()
	if t.Failed() {
		t.FailNow()
	}

	for _, frac := range []float64{0.3, 0.7} {
		t.Run(fmt.Sprintf("at%d%%", int(frac*100)), func(t *testing.T) {
			// Paced (--bench-rate, the bytes unchanged), so that the
			// killed peer still holds parts as it dies: unpaced, a part
			// takes a few ms and the kill often finds it idle.
			peers := startPeers(t, ctx, 3, data, "--bench-rate", "20")
			coord := startServe(t, ctx, serveConfig{name: "coordinator", dataset: data, peers: peerList(peers...)})
			waitPeersReady(t, ctx, coord, 3)

			// Epoch 0, the busiest peer killed at frac of it.
			killAt := int(frac * float64(nb))
			var (
				victim   *serveProc
				inflight float64
				atKill   map[string]float64
			)
			res0 := consumeEpoch(t, ctx, coord.addr, spec, consumeOpts{
				throttle: 2 * time.Millisecond,
				after: func(n int) {
					if n != killAt {
						return
					}
					atKill = scrape(t, ctx, coord)
					all := leasesInFlight(t, ctx, coord, peers)
					i := slices.Index(all, slices.Max(all))
					victim, inflight = peers[i], all[i]
					victim.kill()
					t.Logf("killed %s after %d of %d batches, with %v leases in flight (all peers: %v)", victim.addr, n, nb, inflight, all)
				},
			})
			if victim == nil {
				t.Fatalf("the epoch ended before batch %d: no peer was killed", killAt)
			}
			checkEpoch(t, res0, spec, faultSamples)
			sameBatches(t, "alone", ref[0], "with a peer killed", res0)
			ms0 := logLeases(t, ctx, coord)

			// Before the kill the batches were leased in parts: nearly
			// every sample made at home. Whole batches, each to one of
			// three makers, would make about a third of them there.
			before := affinityOf(atKill)
			t.Logf("before the kill: %v", before)
			if before.home <= before.away {
				t.Errorf("before the kill, %v: the batches were not leased in parts by affinity", before)
			}
			// Every sample of the epoch counted once, at home or away
			// (away: routed past a home backing off or stuck, or in a
			// batch made whole by a hedge).
			a0 := affinityOf(ms0)
			t.Logf("epoch 0: %v", a0)
			if a0.home+a0.away != faultSamples {
				t.Errorf("epoch 0: %v, want %d in all", a0, faultSamples)
			}
			// The killed peer's parts in flight failed their leases (the
			// peer may have had none left in flight as it died: the
			// in-flight count is a scrape, not a lock).
			if f := failuresOf(ms0, victim.addr) - failuresOf(atKill, victim.addr); f > 0 {
				t.Logf("%v leases of the killed peer failed after the kill", f)
			} else {
				t.Logf("no lease of the killed peer failed after the kill (%v in flight by the metrics as it was killed): it was idle as it died, and the fault hit no lease in flight", inflight)
			}

			// Epoch 1, on the two peers left: the batches in parts again,
			// each sample at its home among them but where a batch was made
			// whole on one maker (a hedge, a survivor backing off after a
			// failure) or a survivor was taken for stuck a while (no part
			// answered for a hedge's delay: a hiccup of a loaded machine),
			// which no metric counts. So most, not all, at home.
			var survivors []*serveProc
			for _, p := range peers {
				if p != victim {
					survivors = append(survivors, p)
				}
			}
			res1 := consumeEpoch(t, ctx, coord.addr, spec, consumeOpts{epoch: 1, throttle: 2 * time.Millisecond})
			checkEpoch(t, res1, spec, faultSamples)
			sameBatches(t, "alone", ref[1], "after the kill", res1)
			ms1 := logLeases(t, ctx, coord)
			d := affinityOf(ms1).minus(affinityOf(ms0))
			hedges := sumSeries(ms1, "stoker_lease_hedges_total") - sumSeries(ms0, "stoker_lease_hedges_total")
			failures, leases := 0.0, 0.0
			for _, p := range survivors {
				failures += failuresOf(ms1, p.addr) - failuresOf(ms0, p.addr)
				leases += sumSeries(ms1, "stoker_leases_total", `maker="`+p.addr+`"`) - sumSeries(ms0, "stoker_leases_total", `maker="`+p.addr+`"`)
			}
			t.Logf("epoch 1: %v; %v leases to the survivors for %d batches, %v hedges, %v lease failures", d, leases, nb, hedges, failures)
			if d.home+d.away != faultSamples {
				t.Errorf("epoch 1: %v, want %d in all", d, faultSamples)
			}
			// Whole batches, each to one of two makers, would make about
			// half the samples at home, in about one lease a batch; in
			// parts nearly all, in about two.
			if d.home <= d.away || leases <= float64(nb) {
				t.Errorf("epoch 1: %v in %v leases for %d batches: the survivors' batches were not leased in parts by affinity", d, leases, nb)
			}
			if n := sumSeries(ms1, "stoker_leases_total", `maker="`+victim.addr+`"`) - sumSeries(ms0, "stoker_leases_total", `maker="`+victim.addr+`"`); n != 0 {
				t.Errorf("epoch 1: %v leases to the killed peer %s", n, victim.addr)
			}
			for _, p := range survivors {
				if n := sumSeries(ms1, "stoker_leases_total", `maker="`+p.addr+`"`) - sumSeries(ms0, "stoker_leases_total", `maker="`+p.addr+`"`); n == 0 {
					t.Errorf("epoch 1: no lease to the survivor %s", p.addr)
				}
			}
		})
	}
}

// TestFaultAffinityOffSameBytes runs one epoch of the same job on two
// coordinators over the same three peers, one routing by cache affinity
// (the default) and one with --cache-affinity=false: the switch changes
// how batches are leased (in parts, or whole), never their bytes.
func TestFaultAffinityOffSameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 5*time.Minute)
	data := writeDataset(t, faultSamples, faultClasses, 0)
	peers := startPeers(t, ctx, 3, data)
	on := startServe(t, ctx, serveConfig{name: "coordinator (affinity on)", dataset: data, peers: peerList(peers...)})
	off := startServe(t, ctx, serveConfig{name: "coordinator (--cache-affinity=false)", dataset: data, peers: peerList(peers...),
		args: []string{"--cache-affinity=false"}})
	waitPeersReady(t, ctx, on, 3)
	waitPeersReady(t, ctx, off, 3)
	spec := testJob(faultBatch, 15)

	resOn := consumeEpoch(t, ctx, on.addr, spec, consumeOpts{})
	resOff := consumeEpoch(t, ctx, off.addr, spec, consumeOpts{})
	checkEpoch(t, resOn, spec, faultSamples)
	checkEpoch(t, resOff, spec, faultSamples)
	sameBatches(t, "affinity on", resOn, "affinity off", resOff)

	msOn, msOff := logLeases(t, ctx, on), logLeases(t, ctx, off)
	aOn, aOff := affinityOf(msOn), affinityOf(msOff)
	t.Logf("affinity on: %v; off: %v", aOn, aOff)
	if aOn.home+aOn.away != faultSamples || aOn.home <= aOn.away {
		t.Errorf("affinity on: %v, want %d in all, most at home", aOn, faultSamples)
	}
	if aOff.home != 0 || aOff.away != 0 {
		t.Errorf("--cache-affinity=false: %v, want none counted", aOff)
	}
	// In parts, a batch of 8 samples over 3 homes is about 3 leases;
	// whole, one (and a few more for hedges and retries).
	leasesOn, leasesOff := sumSeries(msOn, "stoker_leases_total"), sumSeries(msOff, "stoker_leases_total")
	t.Logf("%v leases with affinity on, %v off, for %d batches", leasesOn, leasesOff, len(resOn.batches))
	if leasesOn <= leasesOff {
		t.Errorf("%v leases with affinity on, %v off: the switch changed nothing in the routing", leasesOn, leasesOff)
	}
}
