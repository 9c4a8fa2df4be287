package makers

import (
	"math"
	"testing"

	"github.com/stoker-dev/stoker/pipeline"
)

// row is a shareRow for weights alone: a queue's kind, client, demand as
// said, measured wait and use.
func row(work bool, client string, d pipeline.JobDemand, measured, used float64) shareRow {
	return shareRow{e: &shareEntry{work: work, client: client}, d: d, measured: measured, used: used}
}

func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// TestSharesFeedJobs: this server's own jobs are weighed by the stall
// schedule on their coordinators' demand, as before Work jobs were kept
// apart: a stalls on a GPU doing 3x b's work per sample; c does not
// stall; b's work is unknown (counted as 1).
func TestSharesFeedJobs(t *testing.T) {
	sh := NewShares(-1, 0.02, 0, nil) // floor 1/(2·jobs)
	w := sh.weights([]shareRow{
		row(false, "", pipeline.JobDemand{Stall: 0.5, Work: 3}, 0, 0),
		row(false, "", pipeline.JobDemand{Stall: 0.5}, 0, 0),
		row(false, "", pipeline.JobDemand{Stall: 0, Work: 1}, 0, 0),
	})
	if math.Abs(sum(w)-1) > 1e-9 || !(w[0] > w[1] && w[1] > w[2]) || w[2] < 1.0/6-1e-9 {
		t.Errorf("weights a %.3f b %.3f c %.3f: want a > b > c >= 1/6, summing to 1", w[0], w[1], w[2])
	}
}

// TestSharesWorkJobs: Work jobs are weighed apart from Feed jobs, and by
// what was measured of them. 16 jobs of one client host claiming the
// most urgency there is (stall 1, 10 GPU seconds a sample) weigh, all
// together, as much as one job of another host claiming none; a claim
// above what was measured of a job counts as the measure.
func TestSharesWorkJobs(t *testing.T) {
	loud := pipeline.JobDemand{Stall: 1, Work: 10}
	rows := []shareRow{row(false, "", pipeline.JobDemand{Stall: 0.5, Work: 0.001}, 0, 0)}
	for range 16 {
		rows = append(rows, row(true, "10.0.0.1", loud, 1, 0))
	}
	rows = append(rows, row(true, "10.0.0.2", pipeline.JobDemand{}, 1, 0))
	for _, ws := range []float64{0, 0.25, 1} {
		sh := NewShares(-1, 0.02, ws, nil)
		w := sh.weights(rows)
		feed, hostA, hostB := w[0], sum(w[1:17]), w[17]
		wantFeed, wantWork := 1-ws, ws
		if ws == 0 || ws == 1 {
			// The executor's classes keep the kinds apart: each kind's
			// weights are its own, and the Work queues are the
			// background ones at 0, the Feed queue at 1.
			wantFeed, wantWork = 1, 1
			if sh.background(true) != (ws == 0) || sh.background(false) != (ws == 1) {
				t.Errorf("work share %v: background Work %v, Feed %v", ws, sh.background(true), sh.background(false))
			}
		}
		if math.Abs(feed-wantFeed) > 1e-9 || math.Abs(hostA+hostB-wantWork) > 1e-9 {
			t.Errorf("work share %v: Feed %.3f, Work %.3f; want %.3f and %.3f", ws, feed, hostA+hostB, wantFeed, wantWork)
		}
		if math.Abs(hostA-hostB) > 1e-9 {
			t.Errorf("work share %v: 16 loud jobs of one host %.3f, one quiet job of another %.3f: want equal", ws, hostA, hostB)
		}
	}

	// Within one host, claims divide its share, each capped by what was
	// measured: a job that says it stalls but whose samples never waited
	// here counts as not stalled (it keeps what it uses, with headroom).
	sh := NewShares(-1, 0.02, 0, nil)
	w := sh.weights([]shareRow{
		row(true, "10.0.0.1", pipeline.JobDemand{Stall: 1, Work: 1}, 0, 0.1),
		row(true, "10.0.0.1", pipeline.JobDemand{Stall: 1, Work: 1}, 1, 0.9),
	})
	// Believed, both would stall and split 1:1; measured, the first is
	// fed (its 0.1 of use with headroom is under the floor, 1/4).
	if math.Abs(w[0]-0.25) > 1e-9 || math.Abs(w[1]-0.75) > 1e-9 {
		t.Errorf("a job claiming stall 1 that never waited %.3f, one that waited all the time %.3f: want 0.25 and 0.75", w[0], w[1])
	}
}

// TestSharesJobWeight: a job's own cpu_weight multiplies its share, when
// it wakes and at every rebalance: two alike stalled jobs of weights 3
// and 1 share 3:1.
func TestSharesJobWeight(t *testing.T) {
	ex := pipeline.NewExecutor(1)
	defer ex.Close()
	sh := NewShares(-1, 0.02, 0, nil)
	qa, qb := ex.Queue("a"), ex.Queue("b")
	demand := func() pipeline.JobDemand { return pipeline.JobDemand{Stall: 0.5, Work: 1} }
	sh.add(qa, demand, false, "", 3)
	if qa.Weight() != 3 {
		t.Errorf("alone, after add: weight %v, want 3", qa.Weight())
	}
	sh.add(qb, demand, false, "", 0) // 0: 1
	sh.Rebalance()
	if r := qa.Weight() / qb.Weight(); math.Abs(r-3) > 1e-9 {
		t.Errorf("after a rebalance: weights %v and %v, want 3:1", qa.Weight(), qb.Weight())
	}
}

// TestSharesFeedClients: Feed jobs are shared by client first. A client
// of 8 starved jobs weighs, all together, as much as another client's
// one starved job (its jobs split its half alike); a client of one job
// weighs as that job did before clients were counted; and jobs of no
// client ("") are each a client of their own.
func TestSharesFeedClients(t *testing.T) {
	starved := pipeline.JobDemand{Stall: 1}
	rows := []shareRow{row(false, "conn 127.0.0.1:5001", starved, 0, 0.5)}
	for range 8 {
		rows = append(rows, row(false, "conn 127.0.0.1:5002", starved, 0, 0.5/8))
	}
	sh := NewShares(-1, 0.02, 0, nil)
	w := sh.weights(rows)
	if math.Abs(w[0]-0.5) > 1e-9 || math.Abs(sum(w[1:])-0.5) > 1e-9 {
		t.Errorf("one job of a client %.3f, 8 jobs of another %.3f in all: want 0.5 and 0.5", w[0], sum(w[1:]))
	}
	for k := 2; k < len(w); k++ {
		if math.Abs(w[k]-w[1]) > 1e-9 {
			t.Errorf("the 8 jobs' weights %v: want them alike", w[1:])
			break
		}
	}

	// The same 9 jobs with no client: 9 clients, each 1/9.
	for i := range rows {
		rows[i].e.client = ""
	}
	for i, x := range sh.weights(rows) {
		if math.Abs(x-1.0/9) > 1e-9 {
			t.Errorf("job %d of no client: weight %.3f, want 1/9", i, x)
		}
	}

	// A client's jobs divide its share by the stall schedule, as jobs
	// did before: of client b's two, the stalled one with 3x the other's
	// work gets most of b's half; a client's work is its jobs' mean (2
	// for b, as much as a's one job says), so a keeps its half.
	w = sh.weights([]shareRow{
		row(false, "a", pipeline.JobDemand{Stall: 0.5, Work: 2}, 0, 0),
		row(false, "b", pipeline.JobDemand{Stall: 0.5, Work: 1}, 0, 0),
		row(false, "b", pipeline.JobDemand{Stall: 0.5, Work: 3}, 0, 0),
	})
	if math.Abs(w[0]-0.5) > 1e-9 || math.Abs(w[1]+w[2]-0.5) > 1e-9 || !(w[2] > w[1]) {
		t.Errorf("a %.3f, b's %.3f and %.3f: want a 0.5, b's summing to 0.5, the one of more work more", w[0], w[1], w[2])
	}

	// A job whose trainer reports no stall (its reports come when a
	// batch reaches it, so a starved one reports late) but whose samples
	// waited for a core all the period is stalled: it is not weighed
	// down to what it got.
	w = sh.weights([]shareRow{
		row(false, "a", pipeline.JobDemand{}, 1, 0.1),
		row(false, "b", pipeline.JobDemand{Stall: 1}, 0, 0.9),
	})
	if math.Abs(w[0]-0.5) > 1e-9 {
		t.Errorf("a job that waited for a core all along, saying no stall: %.3f, want 0.5", w[0])
	}
}
