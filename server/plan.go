package server

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline"
)

// Plan is one rank's share of one epoch, cut into batches. It is a pure
// function of its inputs: every machine that computes the plan of the same
// (dataset size, seed, epoch, shuffle, rank, world size, batch size,
// drop_last) gets the same batches.
//
// The epoch's order is a permutation of 0..n-1 drawn from (seed, epoch) when
// shuffling, the identity otherwise. Rank r takes positions r, r+w, r+2w, …
// of that order, wrapping around to its start so that every rank gets
// ceil(n/w) samples (torch's DistributedSampler with drop_last=False): ranks
// never wait on each other, and when w divides n every index goes to exactly
// one rank once.
//
// Elastic resume: when a job of world size w consumed its first c batches of
// b samples on every rank (as in DDP, where ranks step together), it
// consumed exactly the first c*b*w positions of the epoch's order. A job
// restarted with another world size w' gives that count as Consumed: its
// ranks then split the remaining positions the same way (rank r' takes
// every w'-th of them, wrapping around within them), so every sample is
// consumed at least once in the epoch and the only repeats are the wrapped
// padding.
type Plan struct {
	share     []int64 // this rank's samples in order
	batchSize int
	batches   int
}

// PlanSpec is what a Plan is computed from.
type PlanSpec struct {
	Size      int // samples in the dataset, > 0
	Seed      uint64
	Epoch     uint64
	Shuffle   bool
	Rank      int // 0..World-1
	World     int // >= 1
	BatchSize int // >= 1
	DropLast  bool
	// Consumed is how many positions of the epoch's order were consumed
	// before the plan starts (elastic resume); 0 normally. At or past Size
	// the plan is empty.
	Consumed uint64
}

// NewPlan computes the plan of s. It panics on a spec that breaks the
// bounds stated on PlanSpec: the server validates requests first.
func NewPlan(s PlanSpec) Plan {
	if s.Size <= 0 || s.World < 1 || s.Rank < 0 || s.Rank >= s.World || s.BatchSize < 1 {
		panic("server: invalid PlanSpec")
	}
	order := make([]int, s.Size)
	if s.Shuffle {
		// Index MaxUint64 is no sample's index, so the permutation's stream
		// never coincides with a sample's augmentation stream.
		r := pipeline.Key{Seed: s.Seed, Epoch: s.Epoch, Index: math.MaxUint64}.Stream(0)
		r.Perm(order)
	} else {
		for i := range order {
			order[i] = i
		}
	}
	rest := order[min(s.Consumed, uint64(s.Size)):]
	if len(rest) == 0 {
		return Plan{batchSize: s.BatchSize}
	}
	m := (len(rest) + s.World - 1) / s.World
	share := make([]int64, m)
	for j := range share {
		pos := uint64(s.Rank) + uint64(j)*uint64(s.World)
		share[j] = int64(rest[pos%uint64(len(rest))])
	}
	batches := m / s.BatchSize
	if m%s.BatchSize != 0 {
		if s.DropLast {
			share = share[:batches*s.BatchSize]
		} else {
			batches++
		}
	}
	return Plan{share: share, batchSize: s.BatchSize, batches: batches}
}

// Batches is how many batches the rank gets.
func (p Plan) Batches() int { return p.batches }

// Samples is how many samples the rank gets (after drop_last).
func (p Plan) Samples() int { return len(p.share) }

// Batch returns the dataset indices of batch k, 0 <= k < Batches(). The
// slice is shared: do not modify it.
func (p Plan) Batch(k int) []int64 {
	lo := k * p.batchSize
	return p.share[lo:min(lo+p.batchSize, len(p.share))]
}
