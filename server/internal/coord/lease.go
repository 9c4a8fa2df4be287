package coord

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
)

// Leases: which batch goes to which maker, under what deadline, and what
// comes of it. A result for a lease that moved on, or for a batch already
// delivered, is dropped: a batch is never delivered twice.

type leaseRec struct {
	id     uint64
	maker  Maker
	issued time.Time
	n      int  // leases in flight on the maker when issued, this one included
	hedge  bool // a second lease of a batch leased already (hedge.go)
	probe  bool // to a maker whose last lease failed (its back-off just ended), or its hedge
	cancel context.CancelFunc
	// parts: the batch leased in parts (affinity.go), maker the lead
	// whose stats the lease counts in; home is how many of its samples
	// are made at their home maker.
	parts []part
	home  int
}

type result struct {
	id    batchID
	lease uint64
	maker Maker
	b     *pipeline.Batch
	err   error
	// checked: every sample was compared byte for byte with one made here
	// (or the batch is the local executor's own); unchecked are the makers
	// of the samples that were not.
	checked   bool
	unchecked []Maker
	// parts: a lease in parts (affinity.go); failed are the parts that
	// failed, with their makers to blame (none: the lease's maker is).
	parts  []part
	took   []time.Duration
	failed []partFailure
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
		parts, home, full := c.affine(ms, id)
		if full != nil {
			c.pool.release(b)
			return wake, nil // Freed on it wakes the job
		}
		var m Maker
		if parts != nil {
			// The lead, whose stats the lease counts in: the parts'
			// makers in turn.
			m = parts[id.k%len(parts)].m
		} else {
			var retryAt time.Time
			var err error
			m, retryAt, err = c.choose(ms)
			if err != nil || m == nil {
				c.pool.release(b)
			}
			if err != nil {
				return wake, err
			}
			if m == nil {
				return c.noMaker(ms, retryAt)
			}
			if c.env.Config.Affinity {
				home = c.homeShare(ms, m, c.epochOf(id.epoch).plan.Batch(id.k))
			}
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
		c.start(ctx, wg, id, m, b, false, parts, home)
	}
	return wake, nil
}

// affine splits batch id into parts by cache affinity (affinity.go), when
// the job routes by it, the batch is not to be made whole and two makers
// or more can take parts; the parts are made in the batch's buffer, so
// they take no memory beyond it. full is a maker a part would go to that
// has no room now: the job waits for it (its Freed wakes the job), since
// another maker would make the part uncached.
func (c *Coordinator) affine(ms []Maker, id batchID) (parts []part, home int, full Maker) {
	if !c.env.Config.Affinity || c.whole[id] {
		return nil, 0, nil
	}
	parts, home = c.split(ms, c.epochOf(id.epoch).plan.Batch(id.k))
	if parts == nil {
		return nil, 0, nil
	}
	if f := fullPart(parts); f != nil {
		c.env.Makers.waitFree(f, c.wake)
		if f = fullPart(parts); f != nil {
			return nil, 0, f
		}
	}
	return parts, home, nil
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

// choose picks the ready maker (none of not) that would finish a new
// lease soonest: (leases in flight + 1) / measured rate. When a maker that
// is full (Free() == 0) would finish it waitFaster times sooner than the
// soonest with room, none is picked: the full one is waited for (its next
// Freed wakes the job), since the slower one would make the batch that
// much later and delivery wait for it; closer than that, rates measured on
// a loaded machine are too noisy to leave a maker idle for. A
// maker on trial (its rate not known: not measured yet, or not for a
// capacityWindow; or failing: its back-off just ended) is given one lease
// at a time while another is known and not failing, until it makes one: a
// new peer is tried at once, and a maker that never answers holds one
// lease, which a hedge soon covers, not a share of the window. One whose
// rate is not known is taken to be as slow as the slowest known; when none
// is known (the job's start), all count alike. nil when none can take a
// lease now, with when one's back-off ends; ErrNoMaker when every maker
// refused the job.
func (c *Coordinator) choose(ms []Maker, not ...Maker) (Maker, time.Time, error) {
	now := time.Now()
	slowest, healthy := math.Inf(1), 0
	for _, m := range ms {
		if st := c.stats[m]; st != nil && st.known(now) > 0 && c.usable(m) {
			slowest = math.Min(slowest, st.known(now))
			if !st.onTrial(now) {
				healthy++
			}
		}
	}
	var (
		best    Maker
		bestT   = math.Inf(1)
		fullT   = math.Inf(1) // the soonest a full maker would finish
		wake    time.Time
		refused int
	)
	for _, m := range ms {
		if c.refused[m] != nil {
			refused++
			continue
		}
		if slices.Contains(not, m) || !m.Ready() || c.env.Verifier.Why(m) != nil {
			continue
		}
		st := c.stat(m)
		if now.Before(st.retryAt) {
			if wake.IsZero() || st.retryAt.Before(wake) {
				wake = st.retryAt
			}
			continue
		}
		if st.onTrial(now) && st.inflight > 0 && healthy > 0 {
			continue // its one lease at a time
		}
		rate := st.known(now)
		if rate == 0 {
			rate = slowest
			if math.IsInf(rate, 1) {
				rate = 1
			}
		}
		t := float64(st.inflight+1) / rate
		if st.free(m) <= 0 {
			c.env.Makers.waitFree(m, c.wake)
			if st.free(m) <= 0 {
				fullT = math.Min(fullT, t)
				continue
			}
		}
		if t < bestT {
			best, bestT = m, t
		}
	}
	if best != nil && fullT*waitFaster < bestT {
		return nil, wake, nil // wait for the full one
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

// waitFaster is how many times sooner a full maker must finish a lease
// than the soonest maker with room for the lease to wait for it (choose).
const waitFaster = 2

// start leases batch id to m, or hedges it there (hedge.go): the maker
// works under the lease's deadline and reports to results.
func (c *Coordinator) start(ctx context.Context, wg *sync.WaitGroup, id batchID, m Maker, b *pipeline.Batch, hedge bool, parts []part, home int) {
	c.leaseID++
	st := c.stat(m)
	now := time.Now()
	st.begin(now)
	timeout := c.env.Config.LeaseTimeout
	lctx, cancel := context.WithTimeout(ctx, timeout)
	rec := &leaseRec{id: c.leaseID, maker: m, issued: now, n: st.inflight, hedge: hedge, probe: !hedge && st.fails > 0, cancel: cancel, parts: parts, home: home}
	for i := range parts {
		p := &parts[i]
		p.out = new(atomic.Bool)
		p.out.Store(true)
		if p.st.open.Add(1) == 1 {
			p.st.answered.Store(now.UnixNano()) // stuck counts from here
		}
		p.st.parts++
		p.st.starting.Add(1)
	}
	if hedge {
		c.hedging.in[id] = rec
	} else {
		c.leases[id] = rec
		c.attempts[id]++
		c.hedging.issued()
	}
	c.hedging.noteIssued(rec)
	e := c.epochOf(id.epoch)
	l := &lease.Lease{Epoch: id.epoch, Number: id.k, Indices: e.plan.Batch(id.k), Demand: c.demandNow()}
	trusted := m.Trusted()
	if !trusted && parts == nil {
		l.Keep = c.env.Verifier.Pick(m, len(l.Indices), c.j.BatchSize())
	}
	if parts == nil {
		c.env.Metrics.Leases.WithLabelValues(m.Name()).Inc()
		st.starting.Add(1)
	}
	for _, p := range parts {
		c.env.Metrics.Leases.WithLabelValues(p.m.Name()).Inc()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		if parts != nil {
			checked, unchecked, took, failed, err := c.makeParts(ctx, lctx, l, b, parts)
			c.results <- result{id: id, lease: rec.id, maker: m, b: b, err: err, checked: checked, unchecked: unchecked, parts: parts, took: took, failed: failed}
			return
		}
		st.starting.Add(-1) // Make counts it from here
		made, err := m.Make(lctx, c.j, l, b)
		checked := trusted
		switch {
		case err == nil:
			err = c.check(l, b)
		case ctx.Err() != nil:
		case errors.Is(lctx.Err(), context.DeadlineExceeded):
			// The lease ran out of time, whatever the maker said as it
			// gave up.
			err = fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
		}
		if err == nil && errors.Is(lctx.Err(), context.Canceled) {
			// Outrun by the batch's other lease (or the job ended): its
			// answer is dropped, and not worth checking.
			err = fmt.Errorf("lease of batch %d cancelled: %w", id.k, lctx.Err())
		}
		if err == nil && !checked {
			checked, err = c.env.Verifier.Verify(ctx, c.j, l, b, made.Kept)
		}
		var unchecked []Maker
		if err == nil && !checked {
			unchecked = []Maker{m}
		}
		c.results <- result{id: id, lease: rec.id, maker: m, b: b, err: err, checked: checked, unchecked: unchecked}
	}()
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
	st := c.stat(r.maker)
	now := time.Now()
	st.end(now)
	for _, p := range r.parts {
		p.st.parts--
	}
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
			r.err = fmt.Errorf("%w: made by a quarantined peer", ErrMismatch)
			r.failed = []partFailure{{m, r.err}}
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
		c.stages.madeBy(now, r.maker, took, r.b.Times)
		c.ready[r.id] = r.b
		if len(r.unchecked) > 0 {
			c.unchecked[r.id] = r.unchecked
		}
		for i, p := range r.parts {
			p.st.partMade(len(p.idx), r.took[i])
		}
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
	failed := r.failed
	if failed == nil {
		failed = []partFailure{{r.maker, r.err}}
	}
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
		c.log.Warn(msg, "maker", m.Name(), "epoch", id.epoch, "batch", id.k, "reason", reason, "hedge", rec.hedge, "parts", len(rec.parts), "err", err)
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
