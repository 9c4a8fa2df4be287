package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline/batch"
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
func (c *Coordinator) check(l *lease.Lease, b *batch.Batch) error {
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

// A failure's kind: what the table and the coordinator make of it.
type failKind int

const (
	// failBusy: the maker turned the lease away, full (lease.ErrBusy).
	failBusy failKind = iota
	// failDraining: the maker is shutting down (lease.ErrDraining).
	failDraining
	// failSamples: a share of a batch came back with failed samples
	// (errSamplesFailed): the batch is made again whole.
	failSamples
	// failMismatch: a peer's batch did not match (ErrMismatch).
	failMismatch
	// failRefused: the maker refused the job (lease.ErrRefused).
	failRefused
	failTimeout
	failError
	// failJob: the job cannot go on (lease.ErrJobFailed): it ends with
	// this error, not after maxAttempts tries.
	failJob
)

// kindOf is failure err's kind.
func kindOf(err error) failKind {
	switch {
	case errors.Is(err, lease.ErrBusy):
		return failBusy
	case errors.Is(err, lease.ErrDraining):
		return failDraining
	case errors.Is(err, errSamplesFailed):
		return failSamples
	case errors.Is(err, ErrMismatch):
		return failMismatch
	case errors.Is(err, lease.ErrRefused):
		return failRefused
	case errors.Is(err, context.DeadlineExceeded):
		return failTimeout
	case errors.Is(err, lease.ErrJobFailed):
		return failJob
	}
	return failError
}

// counts reports whether a failure of kind k counts as an attempt of the
// batch's: not a maker turning a lease away, not a share with failed
// samples (no maker's failure), not a peer's lie (not the batch's).
func (k failKind) counts() bool { return k >= failRefused }

// collect takes a lease's answer (r) to the lease table: a batch for the
// reorder buffer, or a failure whose batch goes back to be leased again
// (unless its other lease, first or hedge, is still in flight), blamed on
// its makers. An answer whose lease is not one of the batch's current
// ones, or for a batch already delivered, is dropped and its buffer
// reused: a batch is never delivered twice.
func (c *Coordinator) collect(ctx context.Context, r result) error {
	lead := r.by.lead()
	st := c.stat(lead)
	now := time.Now()
	st.end(now)
	r.by.ended()
	o := c.table.answer(answer{id: r.id, lease: r.lease, b: r.b, err: r.err, lead: lead, unchecked: r.unchecked}, c.isQuarantined)
	switch {
	case o.dropped:
		c.env.Metrics.ResultsDropped.Inc()
		c.pool.release(r.b)
		return nil
	case o.made:
		c.madeBatch(r, o, now)
		return nil
	}
	c.pool.release(r.b)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if o.rec.hedge {
		c.env.Metrics.Hedges.WithLabelValues("failed").Inc()
	}
	for _, f := range o.blames {
		c.blame(r.id, o.rec, o.other, f, now)
	}
	return o.err
}

// madeBatch carries out what the table decided of batch r, made: its other
// lease, outrun, is cancelled, and the makers' stats, the hedge delay and
// the metrics count it.
func (c *Coordinator) madeBatch(r result, o outcome, now time.Time) {
	rec := o.rec
	if o.other != nil {
		c.outrun(r.id, o.other, now)
	}
	st := c.stat(rec.maker)
	took := now.Sub(rec.issued)
	c.env.Metrics.BatchSeconds.WithLabelValues(c.j.Dataset()).Observe(took.Seconds())
	if !st.warm.IsZero() {
		// (A maker's first batch for the job is its start: a connection,
		// cold caches, a first decode.)
		c.hedging.made(took, rec.n)
	}
	st.done(now, rec, took)
	c.ctl.stages.madeBy(now, rec.maker, took, r.b.Times)
	c.rated(r.rates)
	if c.env.Config.Affinity {
		c.env.Metrics.AffinitySamples.WithLabelValues("home").Add(float64(rec.home))
		c.env.Metrics.AffinitySamples.WithLabelValues("away").Add(float64(max(r.b.N-rec.home, 0)))
	}
}

// blame counts failure f of lease rec of batch id (other: the batch's
// other lease in flight) against its maker: a busy maker is asked again
// later, a liar quarantined, a refusal kept; a failure backs the maker off.
func (c *Coordinator) blame(id batchID, rec, other *leaseRec, f blame, now time.Time) {
	failures := c.env.Metrics.LeaseFailures
	m, err := f.m, f.err
	reason := "error"
	switch kindOf(err) {
	case failBusy:
		// Taken by other jobs: no failure, no back-off; the maker's Free
		// says when to try it again.
		if rec.hedge && !rec.probe {
			c.hedging.refund() // turned away: it cost nothing
		}
		failures.WithLabelValues(m.Name(), "busy").Inc()
		c.stat(m).retryAt = time.Now().Add(20 * time.Millisecond) // a worker's own limit: do not ask again at once
		return
	case failDraining:
		// The worker is shutting down: it finished what it had and turns
		// new leases away. No failure of the job or the maker; the peer is
		// not Ready until it comes back, so the batch goes elsewhere.
		failures.WithLabelValues(m.Name(), "draining").Inc()
		return
	case failSamples:
		// Not the maker's failure: the fail policy fills the batch from
		// all its samples, so one maker makes it again, whole.
		return
	case failMismatch:
		reason = "mismatch"
		c.env.Verifier.Quarantine(m, err)
		c.dropQuarantined()
	case failRefused:
		reason = "refused"
		if c.makers.refused[m] == nil {
			c.log.Warn("maker refused the job", "maker", m.Name(), "err", err)
		}
		c.makers.refused[m] = err
	case failTimeout:
		reason = "timeout"
	case failJob:
		// The job ends with this error (table.answer): not the maker's
		// failure, no back-off.
		failures.WithLabelValues(m.Name(), "job_failed").Inc()
		return
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
}

// isQuarantined reports whether m is quarantined (by this job or another).
func (c *Coordinator) isQuarantined(m Maker) bool { return c.env.Verifier.Why(m) != nil }

// dropQuarantined has the table make again the batches of quarantined
// makers not checked byte for byte (table.quarantined), and frees the
// buffers of those it dropped.
func (c *Coordinator) dropQuarantined() {
	for _, b := range c.table.quarantined(c.isQuarantined) {
		c.pool.release(b)
	}
}
