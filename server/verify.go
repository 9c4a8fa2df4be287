package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/server/internal/coord"
)

// Peers are verified, not trusted. An authenticated peer can still hand
// back wrong batches (a bug, another decoder, a lie): the coordinator checks
// every peer batch's labels and indices against its own plan and dataset,
// and re-makes a random fraction of its samples itself and compares bytes
// (batch k is a pure function of (job, epoch, k), so it can). A peer whose
// batch does not match is quarantined: no job leases to it again while it
// stays in the peer set, and its batches not yet delivered that were not
// checked byte for byte are made again elsewhere.

// maxPeerReason bounds a peer's reason for a sample's failure, as it is
// passed on to the trainer.
const maxPeerReason = 256

// errMismatch marks a peer batch that is not what the plan and the dataset
// say it must be: the coordinator quarantines its peer.
var errMismatch = coord.ErrMismatch

// verifier re-makes samples of peers' batches on this server's executor (or
// on one of its own with one goroutine when this server decodes nothing),
// and keeps the server's quarantine: the coordinators' coord.Verifier.
type verifier struct {
	fraction float64
	log      *slog.Logger

	mu   sync.Mutex
	exec *pipeline.Executor // the server's, or own (closed by close)
	own  bool
	q    *pipeline.Queue
	// quarantined: makers whose batches did not match, and why.
	quarantined map[coord.Maker]error
	poke        func() // wakes the coordinators
}

func newVerifier(fraction float64, exec *pipeline.Executor, log *slog.Logger, poke func()) *verifier {
	return &verifier{fraction: fraction, exec: exec, log: log, quarantined: make(map[coord.Maker]error), poke: poke}
}

// queue is the executor queue samples are re-made on, opened at first use.
func (v *verifier) queue() *pipeline.Queue {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.q == nil {
		if v.exec == nil {
			v.exec, v.own = pipeline.NewExecutor(1), true
		}
		v.q = v.exec.Queue("verify")
	}
	return v.q
}

func (v *verifier) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.q != nil {
		v.q.Close()
	}
	if v.own {
		v.exec.Close()
	}
}

var _ coord.Verifier = (*verifier)(nil)

// Quarantine takes m out of every job's makers, for reason.
func (v *verifier) Quarantine(m coord.Maker, reason error) {
	v.mu.Lock()
	_, already := v.quarantined[m]
	if !already {
		v.quarantined[m] = reason
	}
	v.mu.Unlock()
	if !already {
		v.log.Error("peer quarantined: its batch did not match what this coordinator makes; no job leases to it while it stays in the peer set",
			"maker", m.Name(), "err", reason)
		v.poke()
	}
}

// Why is m's quarantine's reason, nil when it is not quarantined.
func (v *verifier) Why(m coord.Maker) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.quarantined[m]
}

// forget drops what is kept of a maker that left the peer set.
func (v *verifier) forget(m coord.Maker) {
	v.mu.Lock()
	delete(v.quarantined, m)
	v.mu.Unlock()
}

// Pick chooses the samples of a lease to a peer that its batch is
// verified by, byte for byte: each distinct index with probability
// fraction. They are chosen before the batch comes, so that the peer
// keeps their pixels aside as they arrive (work.Lease.Keep): the batch
// itself may be made in a ring slot its trainer can write.
func (v *verifier) Pick(indices []int64) []int64 {
	if v.fraction <= 0 {
		return nil
	}
	var keep []int64
	for _, idx := range indices {
		if (v.fraction >= 1 || rand.Float64() < v.fraction) && !slices.Contains(keep, idx) {
			keep = append(keep, idx)
		}
	}
	return keep
}

// Verify checks a peer's batch b for lease l of job j: its indices and
// labels exactly as the plan, the dataset and the fail policy make them
// given the failures it reports; each failure it reports fails here too;
// and the samples picked for the lease (l.Keep), re-made here, byte for
// byte with the pixels kept aside as they came (l.Kept). pixels reports
// whether every sample was compared byte for byte.
func (v *verifier) Verify(ctx context.Context, cj coord.Job, l *work.Lease, b *pipeline.Batch) (pixels bool, err error) {
	j := jobOf(cj)
	if err := expectIndices(j, l, b); err != nil {
		return false, err
	}
	// What the trainer is told of a failure comes from here: the sample's
	// name from this dataset, the peer's reason kept short.
	for i := range b.Errors {
		b.Errors[i].Name = j.ds.Name(int(b.Errors[i].Index))
		b.Errors[i].Reason = truncate(b.Errors[i].Reason, maxPeerReason)
	}
	var claimed []int64
	for _, e := range b.Errors {
		claimed = append(claimed, e.Index)
	}
	// Samples to re-make: every failure the peer reports (rare), and the
	// samples picked that it made (the others it reports failed).
	var check []int64
	for _, idx := range l.Keep {
		if l.Kept[idx] != nil {
			check = append(check, idx)
		}
	}
	pixels = v.fraction >= 1
	if len(check) == 0 && len(claimed) == 0 {
		return pixels, nil
	}
	idx := append(slices.Clone(check), claimed...)
	var mine pipeline.Batch
	// Drop policy: each sample's bytes at a known place, failures left out.
	if err := v.queue().Fill(ctx, j.ds, j.t, j.spec.GetSeed(), l.Epoch, idx, pipeline.Drop, &mine); err != nil {
		return false, fmt.Errorf("re-making samples to verify: %w", err)
	}
	failedHere := make(map[int64]bool)
	for _, e := range mine.Errors {
		failedHere[e.Index] = true
	}
	for _, i := range claimed {
		if !failedHere[i] {
			return false, fmt.Errorf("%w: batch %d of epoch %d: the peer says sample %d failed; it decodes here", errMismatch, l.Number, l.Epoch, i)
		}
	}
	size := j.t.SampleBytes()
	k := 0 // mine's sample for the next good one
	for _, want := range check {
		if failedHere[want] {
			return false, fmt.Errorf("%w: batch %d of epoch %d: sample %d fails here, the peer made it", errMismatch, l.Number, l.Epoch, want)
		}
		if !bytes.Equal(l.Kept[want], mine.Data[k*size:(k+1)*size]) {
			return false, fmt.Errorf("%w: batch %d of epoch %d: sample %d's pixels differ from the ones made here", errMismatch, l.Number, l.Epoch, want)
		}
		k++
	}
	return pixels, nil
}

// expectIndices checks b's indices and labels against what lease l must
// give under j's fail policy, given the failures b reports (in the lease's
// order, as pipeline reports them): the plan's indices with the failed
// ones left out (Drop), or replaced in turn by the batch's good ones
// (PadFromBatch); each label the dataset's.
func expectIndices(j *job, l *work.Lease, b *pipeline.Batch) error {
	failed := make([]bool, len(l.Indices))
	p := 0
	for _, e := range b.Errors {
		for p < len(l.Indices) && l.Indices[p] != e.Index {
			p++
		}
		if p == len(l.Indices) {
			return fmt.Errorf("%w: batch %d of epoch %d: a failure of sample %d, which the lease does not name (or out of order)", errMismatch, l.Number, l.Epoch, e.Index)
		}
		failed[p] = true
		p++
	}
	var good []int64
	for i, idx := range l.Indices {
		if !failed[i] {
			good = append(good, idx)
		}
	}
	want := good
	if j.policy == pipeline.PadFromBatch && len(good) > 0 {
		want = make([]int64, 0, len(l.Indices))
		k := 0
		for i, idx := range l.Indices {
			if failed[i] {
				idx = good[k%len(good)]
				k++
			}
			want = append(want, idx)
		}
	}
	if !slices.Equal(b.Indices, want) {
		return fmt.Errorf("%w: batch %d of epoch %d: indices %v, the plan gives %v", errMismatch, l.Number, l.Epoch, truncInts(b.Indices), truncInts(want))
	}
	for i, idx := range want {
		if lab := j.ds.Label(int(idx)); b.Labels[i] != lab {
			return fmt.Errorf("%w: batch %d of epoch %d: sample %d labelled %d, the dataset says %d", errMismatch, l.Number, l.Epoch, idx, b.Labels[i], lab)
		}
	}
	return nil
}

// truncInts shortens a list of indices for a message.
func truncInts(xs []int64) string {
	if len(xs) <= 8 {
		return fmt.Sprint(xs)
	}
	return fmt.Sprint(xs[:8])[:len(fmt.Sprint(xs[:8]))-1] + fmt.Sprintf(" …(%d in all)]", len(xs))
}
