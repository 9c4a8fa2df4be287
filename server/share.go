package server

import (
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
// with its leases, and the share of the samples it took lately.
type shares struct {
	mu     sync.Mutex
	queues map[*pipeline.Queue]func() pipeline.JobDemand
	made   map[*pipeline.Queue]uint64  // Made at the last rebalance
	used   map[*pipeline.Queue]float64 // smoothed share of the samples made
	floor  float64
	target float64
}

func newShares(floor, target float64) *shares {
	return &shares{
		queues: make(map[*pipeline.Queue]func() pipeline.JobDemand),
		made:   make(map[*pipeline.Queue]uint64), used: make(map[*pipeline.Queue]float64),
		floor: floor, target: target,
	}
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
	delete(sh.made, q)
	delete(sh.used, q)
}

// rebalance sets every queue's weight to its share.
func (sh *shares) rebalance() {
	sh.mu.Lock()
	qs := make([]*pipeline.Queue, 0, len(sh.queues))
	ds := make([]pipeline.JobDemand, 0, len(sh.queues))
	made := make([]uint64, 0, len(sh.queues))
	total := uint64(0)
	for q := range sh.queues {
		m := q.Made()
		made = append(made, m-sh.made[q])
		total += m - sh.made[q]
		sh.made[q] = m
		qs = append(qs, q)
	}
	for i, q := range qs {
		if total > 0 {
			// Smoothed over about two periods: use moves with the
			// shares, not with one period's noise.
			sh.used[q] = 0.5*sh.used[q] + 0.5*float64(made[i])/float64(total)
		}
		d := sh.queues[q]()
		d.Stall = min(max(d.Stall, 0), 1)
		d.Used = sh.used[q]
		ds = append(ds, d)
	}
	sh.mu.Unlock()
	if len(qs) == 0 {
		return
	}
	for i, share := range pipeline.StallShares(ds, sh.target, sh.floor) {
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
