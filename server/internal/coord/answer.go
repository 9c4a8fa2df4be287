package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
)

// A lease's answer: a batch for the reorder buffer, or a failure blamed on
// the makers that failed it.

// blames is a lease's failure as its makers' failures, worst first: a
// batch in parts fails for each of its failed parts, each its maker's.
// As an error it is the worst.
type blames []blame

type blame struct {
	m   Maker
	err error
}

func (b blames) Error() string { return b[0].err.Error() }
func (b blames) Unwrap() error { return b[0].err }

// blamesOf is the makers to blame for failure err of a lease led by lead.
func blamesOf(err error, lead Maker) blames {
	var bl blames
	if errors.As(err, &bl) {
		return bl
	}
	return blames{{lead, err}}
}

// check verifies that a maker's batch has the shape its lease asks for, so
// that a confused peer cannot hand the trainer a malformed batch.
func (c *Coordinator) check(l *lease.Lease, b *pipeline.Batch) error {
	size := c.j.SampleBytes()
	switch {
	case b.N < 0 || b.N > len(l.Indices):
		return fmt.Errorf("batch %d: %d samples for a lease of %d", l.Number, b.N, len(l.Indices))
	case len(b.Data) != b.N*size || len(b.Labels) != b.N || len(b.Indices) != b.N:
		return fmt.Errorf("batch %d: %d bytes, %d labels, %d indices for %d samples of %d bytes", l.Number, len(b.Data), len(b.Labels), len(b.Indices), b.N, size)
	case c.j.Pads() && b.N != 0 && b.N != len(l.Indices):
		return fmt.Errorf("batch %d: %d samples, the pad policy keeps %d", l.Number, b.N, len(l.Indices))
	}
	return nil
}

// collect takes a maker's result: a batch for the reorder buffer, or a
// failure whose batch goes back to be leased again (unless its other
// lease, first or hedge, is still in flight). A result whose lease is not
// one of the batch's current ones, or for a batch already delivered, is
// dropped and its buffer reused: a batch is never delivered twice.
func (c *Coordinator) collect(ctx context.Context, r result) error {
	st := c.stat(r.by.lead())
	now := time.Now()
	st.end(now)
	r.by.ended()
	rec, other := c.leaseOf(r)
	e := c.epochOf(r.id.epoch)
	if rec == nil || e == nil || e.isDone(r.id.k) {
		c.env.Metrics.ResultsDropped.Inc()
		c.pool.release(r.b)
		return nil
	}
	if rec.hedge {
		delete(c.hedging.in, r.id)
	} else {
		delete(c.leases, r.id)
	}
	for _, m := range r.unchecked {
		if r.err == nil && c.env.Verifier.Why(m) != nil {
			// Made by a peer quarantined since (by this job or another):
			// not to be trusted unless checked byte for byte.
			r.err = blames{{m, fmt.Errorf("%w: made by a quarantined peer", ErrMismatch)}}
		}
	}
	if r.err == nil {
		if other != nil {
			c.outrun(r.id, other, now)
		}
		took := now.Sub(rec.issued)
		c.env.Metrics.BatchSeconds.WithLabelValues(c.j.Dataset()).Observe(took.Seconds())
		if !st.warm.IsZero() {
			// (A maker's first batch for the job is its start: a
			// connection, cold caches, a first decode.)
			c.hedging.made(took, rec.n)
		}
		st.done(now, rec, took)
		c.stages.madeBy(now, rec.maker, took, r.b.Times)
		c.ready[r.id] = r.b
		if len(r.unchecked) > 0 {
			c.unchecked[r.id] = r.unchecked
		}
		c.rated(r.rates)
		if c.env.Config.Affinity {
			c.env.Metrics.AffinitySamples.WithLabelValues("home").Add(float64(rec.home))
			c.env.Metrics.AffinitySamples.WithLabelValues("away").Add(float64(max(r.b.N-rec.home, 0)))
		}
		return nil
	}
	c.pool.release(r.b)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	switch {
	case rec.hedge:
		c.env.Metrics.Hedges.WithLabelValues("failed").Inc()
	case other != nil:
		// The hedge goes on, as the batch's lease now: one more attempt.
		delete(c.hedging.in, r.id)
		other.hedge = false
		c.leases[r.id] = other
		c.attempts[r.id]++
	default:
		c.requeue(r.id)
	}
	// A hedge's failure is its maker's, not an attempt of the batch's.
	attempt := 1
	if rec.hedge {
		attempt = 0
	}
	failed := blamesOf(r.err, rec.maker)
	counts := false
	for _, f := range failed {
		counts = c.blame(r.id, rec, other, f.m, f.err, now) || counts
	}
	if !counts {
		c.attempts[r.id] -= attempt
	}
	if other == nil && !rec.hedge && c.attempts[r.id] >= maxAttempts {
		return fmt.Errorf("%w: batch %d of epoch %d failed %d times; last, on %s: %w", ErrBatchFailed, r.id.k, r.id.epoch, maxAttempts, failed[0].m.Name(), r.err)
	}
	return nil
}

// blame counts a failure of lease rec of batch id (other: the batch's other
// lease in flight) against m, the maker that failed it with err. It
// reports whether the failure counts as an attempt of the batch's.
func (c *Coordinator) blame(id batchID, rec, other *leaseRec, m Maker, err error, now time.Time) bool {
	failures := c.env.Metrics.LeaseFailures
	if errors.Is(err, lease.ErrBusy) {
		// Taken by other jobs: no failure, no back-off; the maker's Free
		// says when to try it again.
		if rec.hedge && !rec.probe {
			c.hedging.refund() // turned away: it cost nothing
		}
		failures.WithLabelValues(m.Name(), "busy").Inc()
		c.stat(m).retryAt = time.Now().Add(20 * time.Millisecond) // a worker's own limit: do not ask again at once
		return false
	}
	if errors.Is(err, lease.ErrDraining) {
		// The worker is shutting down: it finished what it had and turns
		// new leases away. No failure of the job or the maker; the peer is
		// not Ready until it comes back, so the batch goes elsewhere.
		failures.WithLabelValues(m.Name(), "draining").Inc()
		return false
	}
	if errors.Is(err, errSamplesFailed) {
		// Not the maker's failure: the fail policy fills the batch from
		// all its samples, so one maker makes it again, whole.
		c.whole[id] = true
		return false
	}
	reason := "error"
	switch {
	case errors.Is(err, ErrMismatch):
		reason = "mismatch"
		c.env.Verifier.Quarantine(m, err)
		c.dropUnchecked()
	case errors.Is(err, lease.ErrRefused):
		reason = "refused"
		if c.refused[m] == nil {
			c.log.Warn("maker refused the job", "maker", m.Name(), "err", err)
		}
		c.refused[m] = err
	case errors.Is(err, context.DeadlineExceeded):
		reason = "timeout"
	}
	failures.WithLabelValues(m.Name(), reason).Inc()
	if reason != "refused" && reason != "mismatch" {
		c.stat(m).failed(now, rec.issued)
		msg := "lease failed, leasing the batch again"
		if other != nil {
			msg = "lease failed; the batch's other lease goes on"
		}
		c.log.Warn(msg, "maker", m.Name(), "epoch", id.epoch, "batch", id.k, "reason", reason, "hedge", rec.hedge, "by", rec.by, "err", err)
	}
	return reason != "mismatch" // the peer's lie, not the batch's failure
}

// dropUnchecked makes again every batch of a quarantined maker that was
// not checked byte for byte: those made and not yet delivered, and those
// still in flight (their results will be dropped) unless their other
// lease is on a maker not quarantined.
func (c *Coordinator) dropUnchecked() {
	for id, ms := range c.unchecked {
		if !slices.ContainsFunc(ms, func(m Maker) bool { return c.env.Verifier.Why(m) != nil }) {
			continue
		}
		delete(c.unchecked, id)
		if b, ok := c.ready[id]; ok {
			delete(c.ready, id)
			c.pool.release(b)
			c.attempts[id]--
			c.requeue(id)
		}
	}
	for id, h := range c.hedging.in {
		if c.env.Verifier.Why(h.maker) != nil {
			delete(c.hedging.in, id) // its result, when it comes, is dropped
		}
	}
	for id, rec := range c.leases {
		if c.env.Verifier.Why(rec.maker) == nil {
			continue
		}
		delete(c.leases, id) // its result, when it comes, is dropped
		if h := c.hedging.in[id]; h != nil {
			delete(c.hedging.in, id)
			h.hedge = false
			c.leases[id] = h // the hedge goes on, as the batch's lease
			continue
		}
		c.attempts[id]--
		c.requeue(id)
	}
}

// leaseOf is the lease result r answers, if it is one of its batch's
// current ones (nil otherwise), and the batch's other lease in flight.
func (c *Coordinator) leaseOf(r result) (rec, other *leaseRec) {
	first, hedge := c.leases[r.id], c.hedging.in[r.id]
	switch {
	case first != nil && first.id == r.lease:
		return first, hedge
	case hedge != nil && hedge.id == r.lease:
		return hedge, first
	}
	return nil, nil
}

// requeue puts a failed batch back, to be leased before any new one.
func (c *Coordinator) requeue(id batchID) {
	i, _ := slices.BinarySearchFunc(c.retry, id, func(a, b batchID) int {
		if a.epoch != b.epoch {
			return cmpU(a.epoch, b.epoch)
		}
		return a.k - b.k
	})
	c.retry = slices.Insert(c.retry, i, id)
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
