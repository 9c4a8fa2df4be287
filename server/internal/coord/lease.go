package coord

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
)

// Leases: which batch goes to which maker, under what deadline, and what
// comes of it. A result for a lease that moved on, or for a batch already
// delivered, is dropped: a batch is never delivered twice.

type leaseRec struct {
	id     uint64
	maker  Maker
	issued time.Time
	n      int // leases in flight on the maker when issued, this one included
}

type result struct {
	id    batchID
	lease uint64
	maker Maker
	b     *pipeline.Batch
	err   error
	// checked: every sample was compared byte for byte with one made here
	// (or the batch is the local executor's own).
	checked bool
}

// DefaultWindow is the least window a job starts with, and the least
// ceiling of an automatic window.
const DefaultWindow = 4

// MaxWindow bounds a job's window, configured or automatic.
const MaxWindow = 1024

// minWindow is the window's floor: one lease in flight.
const minWindow = 1

// window is how many leases the job may have in flight: what the
// controller set, within its bounds. It starts at two per ready maker (at
// least DefaultWindow).
func (c *Coordinator) window(ms []Maker) int {
	if c.win == 0 {
		c.win = max(DefaultWindow, 2*readyMakers(ms))
	}
	return min(max(c.win, minWindow), c.env.windowCeiling(ms))
}

// windowCeiling is the most leases a job may have in flight: the
// configured window, or four per ready maker (at least DefaultWindow).
func (e *Env) windowCeiling(ms []Maker) int {
	if w := e.Config.Window; w > 0 {
		return w
	}
	return min(max(DefaultWindow, 4*readyMakers(ms)), MaxWindow)
}

// PoolCeiling is the most buffers a job granted credits at once would hold
// with the makers ready now (its pool at the window's ceiling): what a
// stream's ring is sized by.
func (e *Env) PoolCeiling(credits int64) int {
	ms, _ := e.Makers.Snapshot()
	w := e.windowCeiling(ms)
	return w + int(min(credits, int64(w)))
}

func readyMakers(ms []Maker) int {
	n := 0
	for _, m := range ms {
		if m.Ready() {
			n++
		}
	}
	return n
}

// poolSize is how many batch buffers the job may hold: the window's
// leases, and as many made batches waiting for (or in) delivery as the
// trainer's first credits, at most the window again (PoolCeiling at the
// ceiling).
func (c *Coordinator) poolSize(window int) int {
	return window + int(min(c.st.Credits, int64(window)))
}

// lease issues leases while the window, the buffers and the makers allow.
// It returns when to try again if only a maker's back-off holds it up.
func (c *Coordinator) lease(ctx context.Context, wg *sync.WaitGroup, ms []Maker) (wake time.Time, err error) {
	window := c.window(ms)
	size := c.poolSize(window)
	for len(c.leases) < window {
		id, ok := c.nextToLease()
		if !ok {
			return wake, nil
		}
		b := c.pool.get(size)
		if b == nil && id == (batchID{c.cur.epoch, c.cur.next}) {
			// The batch delivery waits for gets a buffer even past the
			// pool: when its lease failed after later ones were made, and
			// the pool narrowed since (a peer went; shrink), the made
			// batches behind it can hold every buffer, and nothing else
			// would ever free one. shrink takes the extra back.
			b = c.pool.get(c.pool.buffers + 1)
		}
		if b == nil {
			return wake, nil
		}
		m, retryAt, err := c.choose(ms)
		if err != nil || m == nil {
			c.pool.release(b)
		}
		if err != nil {
			return wake, err
		}
		if m == nil {
			return c.noMaker(ms, retryAt)
		}
		c.noMakerSince = time.Time{}
		// Only now, with a buffer and a maker, is the batch taken off the
		// queue: nothing is skipped when either is missing.
		if len(c.retry) > 0 {
			c.retry = c.retry[1:]
		} else {
			c.cursor.k++
			c.advanceCursor()
		}
		c.start(ctx, wg, id, m, b)
	}
	return wake, nil
}

// noMaker handles a batch no maker can take now: when no maker is even
// ready for the job (none connected, every peer refusing the connection,
// each refusing the job), it warns every 10 s with each maker's reason,
// and fails the job with errNoMakerReady after noMakerLeaseTimeouts lease
// timeouts. It returns when to look again.
func (c *Coordinator) noMaker(ms []Maker, retryAt time.Time) (time.Time, error) {
	for _, m := range ms {
		if c.usable(m) {
			return retryAt, nil // busy, or backing off: it will take leases again
		}
	}
	now := time.Now()
	if c.noMakerSince.IsZero() {
		c.noMakerSince = now
	}
	limit := noMakerLeaseTimeouts * c.env.Config.LeaseTimeout
	why := c.whyNoMaker(ms)
	if waited := now.Sub(c.noMakerSince); waited >= limit {
		return time.Time{}, fmt.Errorf("%w: no maker could take this job's batches for %v (%d × --lease-timeout): %s",
			ErrNoMakerReady, waited.Round(time.Second), noMakerLeaseTimeouts, why)
	}
	if now.Sub(c.lastWarn) >= 10*time.Second {
		c.lastWarn = now
		c.log.Warn("no maker is ready for the job; waiting", "reasons", why, "fails_in", (limit - now.Sub(c.noMakerSince)).Round(time.Second))
	}
	wake := c.noMakerSince.Add(limit)
	if !retryAt.IsZero() && retryAt.Before(wake) {
		wake = retryAt
	}
	return wake, nil
}

// whyNoMaker says, maker by maker, why none is ready for the job.
func (c *Coordinator) whyNoMaker(ms []Maker) string {
	if len(ms) == 0 {
		return "this server makes no batches (--workers 0) and has no peer (--peers resolves to none, or none was given)"
	}
	var parts []string
	for _, m := range ms {
		why := "not connected"
		switch err := c.refused[m]; {
		case err != nil:
			why = "refused the job: " + err.Error()
		case c.env.Verifier.Why(m) != nil:
			why = "quarantined: " + c.env.Verifier.Why(m).Error()
		case m.Ready():
			why = "ready"
		default:
			if w, ok := m.(whyNot); ok {
				if err := w.Unavailable(); err != nil {
					why = err.Error()
				}
			}
		}
		parts = append(parts, m.Name()+": "+truncate(why, 512))
	}
	return strings.Join(parts, "; ")
}

// usable reports whether the job may lease to m now: ready, not refusing
// the job, not quarantined.
func (c *Coordinator) usable(m Maker) bool {
	return m.Ready() && c.refused[m] == nil && c.env.Verifier.Why(m) == nil
}

// choose picks the ready maker that would finish a new lease soonest:
// (leases in flight + 1) / measured rate. A maker not measured yet is
// taken to be as fast as the fastest, so a new peer is tried at once. nil
// when none can take a lease now, with when one's back-off ends;
// ErrNoMaker when every maker refused the job. A maker left out only
// because it is full is waited for: its next Freed wakes the job.
func (c *Coordinator) choose(ms []Maker) (Maker, time.Time, error) {
	now := time.Now()
	fastest := 0.0
	for _, m := range ms {
		if st := c.stats[m]; st != nil {
			fastest = math.Max(fastest, st.rate)
		}
	}
	if fastest == 0 {
		fastest = 1
	}
	var (
		best    Maker
		bestT   = math.Inf(1)
		wake    time.Time
		refused int
	)
	for _, m := range ms {
		if c.refused[m] != nil {
			refused++
			continue
		}
		if !m.Ready() || c.env.Verifier.Why(m) != nil {
			continue
		}
		st := c.stat(m)
		if now.Before(st.retryAt) {
			if wake.IsZero() || st.retryAt.Before(wake) {
				wake = st.retryAt
			}
			continue
		}
		if m.Free() <= 0 {
			c.env.Makers.waitFree(m, c.wake)
			if m.Free() <= 0 {
				continue
			}
		}
		rate := st.rate
		if rate == 0 {
			rate = fastest
		}
		if t := float64(st.inflight+1) / rate; t < bestT {
			best, bestT = m, t
		}
	}
	if best == nil && refused > 0 && refused == len(ms) {
		var errs []error
		for _, m := range ms {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name(), c.refused[m]))
		}
		return nil, wake, fmt.Errorf("%w: %w", ErrNoMaker, errors.Join(errs...))
	}
	return best, wake, nil
}

// start leases batch id to m: the maker works under the lease's deadline
// and reports to results.
func (c *Coordinator) start(ctx context.Context, wg *sync.WaitGroup, id batchID, m Maker, b *pipeline.Batch) {
	c.leaseID++
	st := c.stat(m)
	now := time.Now()
	st.begin(now)
	rec := &leaseRec{id: c.leaseID, maker: m, issued: now, n: st.inflight}
	c.leases[id] = rec
	c.attempts[id]++
	e := c.epochOf(id.epoch)
	l := &work.Lease{Epoch: id.epoch, Number: id.k, Indices: e.plan.Batch(id.k), Demand: c.demandNow()}
	local := m.Local()
	if !local {
		if l.Keep = c.env.Verifier.Pick(l.Indices); len(l.Keep) > 0 {
			l.Kept = make(map[int64][]byte, len(l.Keep))
		}
	}
	c.env.Metrics.Leases.WithLabelValues(m.Name()).Inc()
	timeout := c.env.Config.LeaseTimeout
	wg.Add(1)
	go func() {
		defer wg.Done()
		lctx, cancel := context.WithTimeout(ctx, timeout)
		err := m.Make(lctx, c.j, l, b)
		checked := local
		if err == nil {
			err = c.check(l, b)
		} else if errors.Is(lctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			// The lease ran out of time, whatever the maker said as it
			// gave up.
			err = fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
		}
		cancel()
		if err == nil && !checked {
			checked, err = c.env.Verifier.Verify(ctx, c.j, l, b)
		}
		c.results <- result{id: id, lease: rec.id, maker: m, b: b, err: err, checked: checked}
	}()
}

// check verifies that a maker's batch has the shape its lease asks for, so
// that a confused peer cannot hand the trainer a malformed batch.
func (c *Coordinator) check(l *work.Lease, b *pipeline.Batch) error {
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
// failure whose batch goes back to be leased again. A result whose lease
// is not the batch's current one, or for a batch already delivered, is
// dropped and its buffer reused: a batch is never delivered twice.
func (c *Coordinator) collect(ctx context.Context, r result) error {
	st := c.stat(r.maker)
	now := time.Now()
	st.end(now)
	rec, ok := c.leases[r.id]
	e := c.epochOf(r.id.epoch)
	if !ok || rec.id != r.lease || e == nil || e.isDone(r.id.k) {
		c.env.Metrics.ResultsDropped.Inc()
		c.pool.release(r.b)
		return nil
	}
	delete(c.leases, r.id)
	if r.err == nil && c.env.Verifier.Why(r.maker) != nil {
		// Made by a peer quarantined since (by this job or another): not
		// to be trusted unless checked byte for byte.
		if !r.checked {
			r.err = fmt.Errorf("%w: made by a quarantined peer", ErrMismatch)
		}
	}
	if r.err == nil {
		took := now.Sub(rec.issued)
		c.env.Metrics.BatchSeconds.WithLabelValues(c.j.Dataset()).Observe(took.Seconds())
		st.done(now, rec, took)
		c.stages.madeBy(now, r.maker, took, r.b.Times)
		c.ready[r.id] = r.b
		if !r.checked {
			c.unchecked[r.id] = r.maker
		}
		return nil
	}
	c.pool.release(r.b)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	c.requeue(r.id)
	failures := c.env.Metrics.LeaseFailures
	if errors.Is(r.err, work.ErrBusy) {
		// Taken by other jobs: no failure, no back-off; the maker's Free
		// says when to try it again.
		c.attempts[r.id]--
		failures.WithLabelValues(r.maker.Name(), "busy").Inc()
		st.retryAt = time.Now().Add(20 * time.Millisecond) // a worker's own limit: do not ask again at once
		return nil
	}
	if errors.Is(r.err, work.ErrDraining) {
		// The worker is shutting down: it finished what it had and turns
		// new leases away. No failure of the job or the maker; the peer is
		// not Ready until it comes back, so the batch goes elsewhere.
		c.attempts[r.id]--
		failures.WithLabelValues(r.maker.Name(), "draining").Inc()
		return nil
	}
	reason := "error"
	switch {
	case errors.Is(r.err, ErrMismatch):
		reason = "mismatch"
		c.attempts[r.id]-- // the peer's lie, not the batch's failure
		c.env.Verifier.Quarantine(r.maker, r.err)
		c.dropUnchecked()
	case errors.Is(r.err, work.ErrRefused):
		reason = "refused"
		if c.refused[r.maker] == nil {
			c.log.Warn("maker refused the job", "maker", r.maker.Name(), "err", r.err)
		}
		c.refused[r.maker] = r.err
	case errors.Is(r.err, context.DeadlineExceeded):
		reason = "timeout"
	}
	failures.WithLabelValues(r.maker.Name(), reason).Inc()
	if reason != "refused" && reason != "mismatch" {
		st.failed()
		c.log.Warn("lease failed, leasing the batch again", "maker", r.maker.Name(), "epoch", r.id.epoch,
			"batch", r.id.k, "reason", reason, "err", r.err)
	}
	if c.attempts[r.id] >= maxAttempts {
		return fmt.Errorf("%w: batch %d of epoch %d failed %d times; last, on %s: %w", ErrBatchFailed, r.id.k, r.id.epoch, maxAttempts, r.maker.Name(), r.err)
	}
	return nil
}

// dropUnchecked makes again every batch of a quarantined maker that was
// not checked byte for byte: those made and not yet delivered, and those
// still in flight (their results will be dropped).
func (c *Coordinator) dropUnchecked() {
	for id, m := range c.unchecked {
		if c.env.Verifier.Why(m) == nil {
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
	for id, rec := range c.leases {
		if c.env.Verifier.Why(rec.maker) != nil {
			delete(c.leases, id) // its result, when it comes, is dropped
			c.attempts[id]--
			c.requeue(id)
		}
	}
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
