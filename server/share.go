package server

import (
	"math"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
)

// shareEvery is how often the executor's per-job weights are recomputed.
const shareEvery = 500 * time.Millisecond

// shares keeps the local executor's per-job queues weighted by where
// capacity buys the most GPU time (pipeline.StallShares): each queue's job
// demand is its input stall and its trainer's GPU seconds per sample, as
// the job's coordinator measured them, or as a remote coordinator sent them
// with its leases.
type shares struct {
	mu     sync.Mutex
	queues map[*pipeline.Queue]func() pipeline.JobDemand
	floor  float64
}

func newShares(floor float64) *shares {
	return &shares{queues: make(map[*pipeline.Queue]func() pipeline.JobDemand), floor: floor}
}

// add weighs q by demand from now on.
func (sh *shares) add(q *pipeline.Queue, demand func() pipeline.JobDemand) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.queues[q] = demand
}

// remove forgets q (its job ended).
func (sh *shares) remove(q *pipeline.Queue) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	delete(sh.queues, q)
}

// rebalance sets every queue's weight to its share.
func (sh *shares) rebalance() {
	sh.mu.Lock()
	qs := make([]*pipeline.Queue, 0, len(sh.queues))
	ds := make([]pipeline.JobDemand, 0, len(sh.queues))
	for q, demand := range sh.queues {
		d := demand()
		if !(d.Work > 0) || math.IsInf(d.Work, 0) {
			d.Work = 1 // unknown: every job's sample is worth the same
		}
		d.Stall = min(max(d.Stall, 0), 1)
		qs, ds = append(qs, q), append(ds, d)
	}
	sh.mu.Unlock()
	if len(qs) == 0 {
		return
	}
	for i, share := range pipeline.StallShares(ds, sh.floor) {
		qs[i].SetWeight(share)
	}
}

// run rebalances every shareEvery until stop is closed.
func (sh *shares) run(stop <-chan struct{}) {
	t := time.NewTicker(shareEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			sh.rebalance()
		case <-stop:
			return
		}
	}
}
