package coord

import (
	"math"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestMakingShares: a local batch's lease time is split in its samples'
// stage proportions, a peer's into its reported making and the rest
// (network), a peer that reports nothing counts whole as the peer's
// making; the shares add up to 1; batches older than the window drop out;
// a report that cannot be a time is ignored.
func TestMakingShares(t *testing.T) {
	local, peer, old := newMaker("local", 4), newMaker("p1:7070", 4), newMaker("p2:7070", 4)
	local.local = true
	t0 := time.Unix(1000, 0)
	s := stageLog{window: TelemetryWindow}
	// Out of the window by the time of the figures.
	s.madeBy(t0.Add(-10*time.Second), old, time.Hour, batch.StageTimes{})
	// 2 s local: samples' stages 1:1:2:0 of queue, read, decode, transform.
	s.madeBy(t0, local, 2*time.Second, batch.StageTimes{Queue: time.Second, Read: time.Second, Decode: 2 * time.Second})
	// 4 s on a peer that made it in 1 s: 3 s network.
	s.madeBy(t0, peer, 4*time.Second, batch.StageTimes{Read: time.Second, Wall: time.Second})
	// 2 s on a peer that reports a wall time longer than the lease: all
	// making, no negative network.
	s.madeBy(t0, peer, 2*time.Second, batch.StageTimes{Wall: 5 * time.Second})
	// 2 s on a peer that lies: a negative wall is no report.
	s.madeBy(t0, peer, 2*time.Second, batch.StageTimes{Wall: -time.Second, Read: -time.Second})
	got := s.shares(t0.Add(time.Second))
	ms := got.shares
	if ms == nil {
		t.Fatal("no shares")
	}
	const total = 10.0 // seconds of lease time in the window
	want := map[string][2]float64{
		"queue": {ms.Queue, 0.5 / total}, "read": {ms.Read, 0.5 / total}, "decode": {ms.Decode, 1 / total},
		"transform": {ms.Transform, 0}, "peer": {ms.Peer, (1 + 2 + 2) / total}, "network": {ms.Network, 3 / total},
	}
	sum := 0.0
	for stage, v := range want {
		sum += v[0]
		if !near(v[0], v[1]) {
			t.Errorf("%s share %.4f, want %.4f", stage, v[0], v[1])
		}
	}
	if !near(sum, 1) || ms.Batches != 4 || !near(ms.SecondsPerBatch, total/4) {
		t.Errorf("shares add to %v over %d batches, %.2f s each; want 1 over 4, 2.5 s", sum, ms.Batches, ms.SecondsPerBatch)
	}
	p := got.makers[peer]
	if p.batches != 3 || !near(p.meanLease(), 8.0/3) || !near(p.networkShare(), 3.0/6) {
		t.Errorf("peer: %d batches, %.3f s each, network %.3f; want 3, 2.667, 0.5 (3 s of the 6 s timed)", p.batches, p.meanLease(), p.networkShare())
	}
	if _, ok := got.makers[old]; ok {
		t.Error("a maker whose batch left the window is still counted")
	}
	empty := stageLog{window: TelemetryWindow}
	if s := empty.shares(t0); s.shares != nil {
		t.Errorf("shares with no batch: %v", s.shares)
	}
}

// TestCreditWaitRatio: the controller's intervals' credit waits over the
// window's span.
func TestCreditWaitRatio(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := stageLog{window: TelemetryWindow}
	s.creditWait(t0.Add(-5*time.Second), time.Hour) // out of the window
	for i := range 6 {
		s.creditWait(t0.Add(time.Duration(i)*controlEvery), controlEvery/4)
	}
	if got := s.creditWaitRatio(t0.Add(5*controlEvery), 3); !near(got, 0.25) {
		t.Errorf("credit wait ratio %v, want 0.25", got)
	}
}
