package server

import (
	"math"
	"testing"

	"github.com/stoker-dev/stoker/pipeline"
)

func TestSharesRebalance(t *testing.T) {
	exec := pipeline.NewExecutor(1)
	defer exec.Close()
	a, b, c := exec.Queue("a"), exec.Queue("b"), exec.Queue("c")
	sh := newShares(-1, 0.02) // floor 1/(2·jobs)
	// a stalls on a GPU doing 3x b's work per sample; c does not stall;
	// b's work is unknown (counted as 1).
	sh.add(a, func() pipeline.JobDemand { return pipeline.JobDemand{Stall: 0.5, Work: 3} })
	sh.add(b, func() pipeline.JobDemand { return pipeline.JobDemand{Stall: 0.5} })
	sh.add(c, func() pipeline.JobDemand { return pipeline.JobDemand{Stall: 0, Work: 1} })
	sh.rebalance()
	wa, wb, wc := a.Weight(), b.Weight(), c.Weight()
	if math.Abs(wa+wb+wc-1) > 1e-9 || !(wa > wb && wb > wc) || wc < 1.0/6-1e-9 {
		t.Errorf("weights a %.3f b %.3f c %.3f: want a > b > c >= 1/6, summing to 1", wa, wb, wc)
	}
	sh.remove(a)
	sh.rebalance()
	if wb, wc := b.Weight(), c.Weight(); math.Abs(wb+wc-1) > 1e-9 || wb <= wc {
		t.Errorf("after a left: b %.3f c %.3f", wb, wc)
	}
}
