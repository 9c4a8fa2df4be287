package coord

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline/batch"
)

// Leases: which batch goes to which maker, under what deadline, and what
// comes of it. A result for a lease that moved on, or for a batch already
// delivered, is dropped: a batch is never delivered twice.

// leaseRec is one lease in flight.
type leaseRec struct {
	id uint64
	// maker is the maker whose stats the lease counts in (by's lead); by
	// is what makes it.
	maker  Maker
	by     lessee
	issued time.Time
	n      int  // leases in flight on the maker when issued, this one included
	hedge  bool // a second lease of a batch leased already (hedge.go)
	probe  bool // to a maker whose last lease failed (its back-off just ended), or its hedge
	cancel context.CancelFunc
	// home is how many of its samples are made at their home maker
	// (cache affinity, router.go).
	home int
}

// A lessee is what a lease is given to: one maker (whole), or a batch
// split among its samples' homes by cache affinity, each share a lease of
// its own to its maker (router.go). start gives every lease to its lessee
// the same way.
type lessee interface {
	// lead is the maker whose stats the lease counts in.
	lead() Maker
	// waitsFor is the makers the lease waits for now: its hedge goes to
	// another, and counts them slow when it outruns the lease.
	waitsFor() []Maker
	// issued counts lease l in its makers' load as it is issued at now,
	// on the coordinator's goroutine, and sets what l asks of them.
	issued(now time.Time, l *lease.Lease)
	// make makes l into b and vets what came back (its shape; a maker's
	// that is not trusted, by the Verifier), on the lease's goroutine:
	// ctx is the job's, lctx the lease's. After it returns, nothing
	// touches b.
	make(ctx, lctx context.Context, l *lease.Lease, b *batch.Batch) made
	// ended takes the lease out of its makers' load as its answer is
	// collected, on the coordinator's goroutine.
	ended()
}

// made is a lessee's answer.
type made struct {
	// err is why the batch was not made; blames, when the makers to blame
	// are others than the lease's lead (a batch split among makers).
	err error
	// unchecked are the makers of samples not compared byte for byte with
	// ones made here (a peer's, picked out by the Verifier's rate).
	unchecked []Maker
	// rates are how fast its makers made their samples, when they made a
	// share of the batch each (routing weights, router.go).
	rates []sampleRate
}

// sampleRate is n samples of a batch made by m in took.
type sampleRate struct {
	m    Maker
	n    int
	took time.Duration
}

type result struct {
	id    batchID
	lease uint64
	by    lessee
	b     *batch.Batch
	made
}

// lease issues leases while the window, the buffers and the makers allow.
// It returns when to try again if only a maker's back-off holds it up.
func (c *Coordinator) lease(ctx context.Context, wg *sync.WaitGroup, ms []Maker) (wake time.Time, err error) {
	window := c.window(ms)
	size := c.poolSize(window)
	for c.table.inFlight() < window {
		id, ok := c.table.toLease()
		if !ok {
			return wake, nil
		}
		b := c.pool.get(size)
		if b == nil && id == c.table.awaited() {
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
		by, home, wait := c.byAffinity(ms, id)
		if wait != nil {
			// The decision is to wait for wait's room: the job waits
			// (its Freed wakes the job), and decides again, so that
			// room freed just before is not missed.
			c.env.Makers.waitFree(wait, c.wake)
			if by, home, wait = c.byAffinity(ms, id); wait != nil {
				c.pool.release(b)
				return wake, nil
			}
		}
		if by == nil {
			ch := c.chooseWaiting(ms)
			if ch.err != nil || ch.m == nil {
				c.pool.release(b)
			}
			if ch.err != nil {
				return wake, ch.err
			}
			if ch.m == nil {
				return c.noMaker(ms, ch.retryAt)
			}
			by = c.wholeTo(ch.m)
			if c.env.Config.Affinity {
				home = c.routeNow(ms, time.Now()).HomeShare(ch.m, c.table.batch(id))
			}
		}
		c.makers.noMakerSince = time.Time{}
		// Only now, with a buffer and a maker, is the batch taken off the
		// queue (start: table.issue): nothing is skipped when either is
		// missing.
		c.start(ctx, wg, id, by, b, false, home)
	}
	return wake, nil
}

// start leases batch id to by, or hedges it there (hedge.go): its makers
// work under the lease's deadline and report to results.
func (c *Coordinator) start(ctx context.Context, wg *sync.WaitGroup, id batchID, by lessee, b *batch.Batch, hedge bool, home int) {
	m := by.lead()
	st := c.stat(m)
	now := time.Now()
	st.begin(now)
	lctx, cancel := watchLease(ctx, c.env.Config.LeaseTimeout)
	rec := &leaseRec{maker: m, by: by, issued: now, n: st.inflight, probe: !hedge && st.fails > 0, cancel: cancel, home: home}
	if hedge {
		c.table.hedge(id, rec)
	} else {
		c.table.issue(id, rec)
		c.hedging.issued()
	}
	c.hedging.noteIssued(rec)
	l := &lease.Lease{Epoch: id.epoch, Number: id.k, Indices: c.table.batch(id), Copies: c.table.copies(id), Demand: c.demandNow()}
	by.issued(now, l)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		c.results <- result{id: id, lease: rec.id, by: by, b: b, made: by.make(ctx, lctx, l, b)}
	}()
}

// whole is a lease of a whole batch to one maker.
type whole struct {
	c  *Coordinator
	m  Maker
	st *makerStat
}

// wholeTo is the lessee of a lease of a whole batch to m: one for all of
// the job's (it keeps nothing of a lease).
func (c *Coordinator) wholeTo(m Maker) *whole {
	st := c.stat(m)
	if st.whole == nil {
		st.whole = &whole{c: c, m: m, st: st}
	}
	return st.whole
}

func (w *whole) lead() Maker       { return w.m }
func (w *whole) waitsFor() []Maker { return []Maker{w.m} }
func (w *whole) String() string    { return w.m.Name() }
func (w *whole) ended()            {}

func (w *whole) issued(_ time.Time, l *lease.Lease) {
	c := w.c
	if !w.m.Trusted() {
		l.Keep = c.env.Verifier.Pick(w.m, len(l.Indices), c.j.BatchSize())
	}
	c.env.Metrics.Leases.WithLabelValues(w.m.Name()).Inc()
	l.Counted = w.st.start()
}

func (w *whole) make(ctx, lctx context.Context, l *lease.Lease, b *batch.Batch) made {
	c := w.c
	answer, err := w.m.Make(lctx, c.j, l, b)
	l.Count() // if its maker did not say
	checked := w.m.Trusted()
	switch {
	case err == nil:
		err = c.check(l, b)
	case ctx.Err() != nil:
	case errors.Is(lctx.Err(), context.DeadlineExceeded):
		// The lease ran out of time, whatever the maker said as it gave
		// up.
		err = fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
	}
	if err == nil && errors.Is(lctx.Err(), context.Canceled) {
		// Outrun by the batch's other lease (or the job ended): its
		// answer is dropped, and not worth checking.
		err = fmt.Errorf("lease of batch %d cancelled: %w", l.Number, lctx.Err())
	}
	if err == nil && !checked {
		checked, err = c.env.Verifier.Verify(ctx, c.j, l, b, answer.Kept)
	}
	if err == nil && !checked {
		return made{unchecked: []Maker{w.m}}
	}
	return made{err: err}
}
