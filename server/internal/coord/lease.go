package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/internal/peer"
	"github.com/stoker-dev/stoker/pipeline"
)

// Leases: which batch goes to which maker, under what deadline, and what
// comes of it. A result for a lease that moved on, or for a batch already
// delivered, is dropped: a batch is never delivered twice.

type leaseRec struct {
	id     uint64
	maker  maker
	issued time.Time
	n      int // leases in flight on the maker when issued, this one included
}

type result struct {
	id    batchID
	lease uint64
	maker maker
	b     *pipeline.Batch
	err   error
	// checked: every sample was compared byte for byte with one made here
	// (or the batch is the local executor's own).
	checked bool
}

// window is how many leases the job may have in flight: what the
// controller set, within its bounds. It starts at two per ready maker (at
// least DefaultWindow).
func (c *coordinator) window(ms []maker) int {
	lo, hi := c.bounds(ms)
	if c.win == 0 {
		c.win = max(DefaultWindow, 2*readyMakers(ms))
	}
	return min(max(c.win, lo), hi)
}

// bounds are the window's floor and ceiling: 1, and the configured window
// or four per ready maker (at least DefaultWindow).
func (c *coordinator) bounds(ms []maker) (lo, hi int) {
	return 1, c.env.windowCeiling(ms)
}

func (e *coordEnv) windowCeiling(ms []maker) int {
	if w := e.cfg.Window; w > 0 {
		return w
	}
	return min(max(DefaultWindow, 4*readyMakers(ms)), maxWindow)
}

// poolCeiling is the most buffers a job granted credits at once would hold
// with the makers ready now (pool at the window's ceiling).
func (e *coordEnv) poolCeiling(credits int64) int {
	ms, _ := e.makers.snapshot()
	w := e.windowCeiling(ms)
	return w + int(min(credits, int64(w)))
}

func readyMakers(ms []maker) int {
	n := 0
	for _, m := range ms {
		if m.Ready() {
			n++
		}
	}
	return n
}

// pool is how many batch buffers the job may hold: the window's leases,
// and as many made batches waiting for (or in) delivery as the trainer's
// first credits, at most the window again (poolCeiling at the ceiling).
func (c *coordinator) pool(window int) int {
	return window + int(min(c.st.Credits, int64(window)))
}

// lease issues leases while the window, the buffers and the makers allow.
// It returns when to try again if only a maker's back-off holds it up.
func (c *coordinator) lease(ctx context.Context, wg *sync.WaitGroup, ms []maker) (wake time.Time, err error) {
	window := c.window(ms)
	pool := c.pool(window)
	for len(c.leases) < window {
		id, ok := c.nextToLease()
		if !ok {
			return wake, nil
		}
		b := c.buffer(pool)
		if b == nil && id == (batchID{c.cur.epoch, c.cur.next}) {
			// The batch delivery waits for gets a buffer even past the
			// pool: when its lease failed after later ones were made, and
			// the pool narrowed since (a peer went; shrinkPool), the made
			// batches behind it can hold every buffer, and nothing else
			// would ever free one. shrinkPool takes the extra back.
			b = c.buffer(c.buffers + 1)
		}
		if b == nil {
			return wake, nil
		}
		m, retryAt, err := c.choose(ms)
		if err != nil || m == nil {
			c.release(b)
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
func (c *coordinator) noMaker(ms []maker, retryAt time.Time) (time.Time, error) {
	for _, m := range ms {
		if c.usable(m) {
			return retryAt, nil // busy, or backing off: it will take leases again
		}
	}
	now := time.Now()
	if c.noMakerSince.IsZero() {
		c.noMakerSince = now
	}
	limit := noMakerLeaseTimeouts * c.env.cfg.LeaseTimeout
	why := c.whyNoMaker(ms)
	if waited := now.Sub(c.noMakerSince); waited >= limit {
		return time.Time{}, fmt.Errorf("%w: no maker could take this job's batches for %v (%d × --lease-timeout): %s",
			errNoMakerReady, waited.Round(time.Second), noMakerLeaseTimeouts, why)
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
func (c *coordinator) whyNoMaker(ms []maker) string {
	if len(ms) == 0 {
		return "this server makes no batches (--workers 0) and has no peer (--peers resolves to none, or none was given)"
	}
	var parts []string
	for _, m := range ms {
		why := "not connected"
		switch err := c.refused[m]; {
		case err != nil:
			why = "refused the job: " + err.Error()
		case c.env.verify.why(m) != nil:
			why = "quarantined: " + c.env.verify.why(m).Error()
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
func (c *coordinator) usable(m maker) bool {
	return m.Ready() && c.refused[m] == nil && c.env.verify.why(m) == nil
}

// buffer returns a free batch buffer, or a new one while the job has fewer
// than pool, ready for a lease: in a slot of the trainer's ring, or in
// memory of its own if, past the two reserved at the job's start, the
// stream's memory has room in the budget (inslot.go); nil when there is
// none.
func (c *coordinator) buffer(pool int) *pipeline.Batch {
	var b *pipeline.Batch
	if n := len(c.free); n > 0 {
		b = c.free[n-1]
		c.free = c.free[:n-1]
	} else if c.buffers < pool {
		c.buffers++
		b = new(pipeline.Batch)
	} else {
		return nil
	}
	if !c.prepare(b) {
		return nil
	}
	return b
}

// choose picks the ready maker that would finish a new lease soonest:
// (leases in flight + 1) / measured rate. A maker not measured yet is
// taken to be as fast as the fastest, so a new peer is tried at once. nil
// when none can take a lease now, with when one's back-off ends;
// errNoMaker when every maker refused the job.
func (c *coordinator) choose(ms []maker) (maker, time.Time, error) {
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
		best    maker
		bestT   = math.Inf(1)
		wake    time.Time
		refused int
	)
	for _, m := range ms {
		if c.refused[m] != nil {
			refused++
			continue
		}
		if !m.Ready() || c.env.verify.why(m) != nil {
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
			continue
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
		return nil, wake, fmt.Errorf("%w: %w", errNoMaker, errors.Join(errs...))
	}
	return best, wake, nil
}

// start leases batch id to m: the maker works under the lease's deadline
// and reports to results.
func (c *coordinator) start(ctx context.Context, wg *sync.WaitGroup, id batchID, m maker, b *pipeline.Batch) {
	c.leaseID++
	st := c.stat(m)
	now := time.Now()
	st.begin(now)
	rec := &leaseRec{id: c.leaseID, maker: m, issued: now, n: st.inflight}
	c.leases[id] = rec
	c.attempts[id]++
	e := c.epochOf(id.epoch)
	l := &batchLease{job: c.j, Epoch: id.epoch, Number: id.k, Indices: e.plan.Batch(id.k), Demand: c.demandNow()}
	_, local := m.(*localMaker)
	if !local {
		if l.Keep = c.env.verify.pick(l.Indices); len(l.Keep) > 0 {
			l.Kept = make(map[int64][]byte, len(l.Keep))
		}
	}
	c.env.m.leases.WithLabelValues(m.Name()).Inc()
	timeout := c.env.cfg.LeaseTimeout
	wg.Add(1)
	go func() {
		defer wg.Done()
		lctx, cancel := context.WithTimeout(ctx, timeout)
		err := m.Make(lctx, l, b)
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
			checked, err = c.env.verify.verify(ctx, c.j, l, b)
		}
		c.results <- result{id: id, lease: rec.id, maker: m, b: b, err: err, checked: checked}
	}()
}

// check verifies that a maker's batch has the shape its lease asks for, so
// that a confused peer cannot hand the trainer a malformed batch.
func (c *coordinator) check(l *batchLease, b *pipeline.Batch) error {
	size := c.j.t.SampleBytes()
	switch {
	case b.N < 0 || b.N > len(l.Indices):
		return fmt.Errorf("batch %d: %d samples for a lease of %d", l.Number, b.N, len(l.Indices))
	case len(b.Data) != b.N*size || len(b.Labels) != b.N || len(b.Indices) != b.N:
		return fmt.Errorf("batch %d: %d bytes, %d labels, %d indices for %d samples of %d bytes", l.Number, len(b.Data), len(b.Labels), len(b.Indices), b.N, size)
	case c.j.policy == pipeline.PadFromBatch && b.N != 0 && b.N != len(l.Indices):
		return fmt.Errorf("batch %d: %d samples, the pad policy keeps %d", l.Number, b.N, len(l.Indices))
	}
	return nil
}

// collect takes a maker's result: a batch for the reorder buffer, or a
// failure whose batch goes back to be leased again. A result whose lease
// is not the batch's current one, or for a batch already delivered, is
// dropped and its buffer reused: a batch is never delivered twice.
func (c *coordinator) collect(ctx context.Context, r result) error {
	st := c.stat(r.maker)
	now := time.Now()
	st.end(now)
	rec, ok := c.leases[r.id]
	e := c.epochOf(r.id.epoch)
	if !ok || rec.id != r.lease || e == nil || e.isDone(r.id.k) {
		c.env.m.resultsDropped.Inc()
		c.release(r.b)
		return nil
	}
	delete(c.leases, r.id)
	if r.err == nil && c.env.verify.why(r.maker) != nil {
		// Made by a peer quarantined since (by this job or another): not
		// to be trusted unless checked byte for byte.
		if !r.checked {
			r.err = fmt.Errorf("%w: made by a quarantined peer", errMismatch)
		}
	}
	if r.err == nil {
		took := now.Sub(rec.issued)
		c.env.m.batchSeconds.WithLabelValues(c.j.name).Observe(took.Seconds())
		st.done(now, rec, took)
		c.ready[r.id] = r.b
		if !r.checked {
			c.unchecked[r.id] = r.maker
		}
		return nil
	}
	c.release(r.b)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	c.requeue(r.id)
	failures := c.env.m.leaseFailures
	if errors.Is(r.err, peer.ErrBusy) {
		// Taken by other jobs: no failure, no back-off; the maker's Free
		// says when to try it again.
		c.attempts[r.id]--
		failures.WithLabelValues(r.maker.Name(), "busy").Inc()
		st.retryAt = time.Now().Add(20 * time.Millisecond) // a worker's own limit: do not ask again at once
		return nil
	}
	if errors.Is(r.err, peer.ErrDraining) {
		// The worker is shutting down: it finished what it had and turns
		// new leases away. No failure of the job or the maker; the peer is
		// not Ready until it comes back, so the batch goes elsewhere.
		c.attempts[r.id]--
		failures.WithLabelValues(r.maker.Name(), "draining").Inc()
		return nil
	}
	reason := "error"
	switch {
	case errors.Is(r.err, errMismatch):
		reason = "mismatch"
		c.attempts[r.id]-- // the peer's lie, not the batch's failure
		c.env.verify.quarantine(r.maker, r.err)
		c.dropUnchecked()
	case errors.Is(r.err, peer.ErrRefused):
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
		return fmt.Errorf("%w: batch %d of epoch %d failed %d times; last, on %s: %w", errBatchFailed, r.id.k, r.id.epoch, maxAttempts, r.maker.Name(), r.err)
	}
	return nil
}

// dropUnchecked makes again every batch of a quarantined maker that was
// not checked byte for byte: those made and not yet delivered, and those
// still in flight (their results will be dropped).
func (c *coordinator) dropUnchecked() {
	for id, m := range c.unchecked {
		if c.env.verify.why(m) == nil {
			continue
		}
		delete(c.unchecked, id)
		if b, ok := c.ready[id]; ok {
			delete(c.ready, id)
			c.release(b)
			c.attempts[id]--
			c.requeue(id)
		}
	}
	for id, rec := range c.leases {
		if c.env.verify.why(rec.maker) != nil {
			delete(c.leases, id) // its result, when it comes, is dropped
			c.attempts[id]--
			c.requeue(id)
		}
	}
}

// requeue puts a failed batch back, to be leased before any new one.
func (c *coordinator) requeue(id batchID) {
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
