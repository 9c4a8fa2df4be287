package coord

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
)

// Hedged leases, as in "The Tail at Scale" (Dean and Barroso): a lease
// that takes much longer than the job's recent leases is also given to
// another maker, and the first answer wins. The other lease is cancelled
// (a peer is sent CancelLease), its answer dropped if one still comes and
// its buffer reused, so the batch still goes out once. A batch has at most
// one hedge at a time, and a job hedges at most hedgeFraction of its
// leases (after a burst of hedgeBurst), besides the probes of a maker
// backed off, which its back-off bounds: a maker that slowed to a crawl
// costs the trainer the hedge delay instead of the lease timeout, and the
// other makers' load grows by a few percent at most. The maker a hedge
// outran is counted as failing (reason "slow"): backed off, longer each
// time in a row (makerstats.go), so that it soon gets a lease only now and
// then, to see whether it recovered.
//
// The delay is the lease's expected time, hedgeMultiple times over: the
// hedgeQuantile of the job's recent leases' time per lease in flight
// (a lease issued behind n others on its maker takes n times as long as
// one alone; each maker's first batch, its start, left out), times the
// leases in flight on the lease's maker when it was issued. A maker that is slow but keeps answering raises the
// quantile, so it is hedged the less: only outliers are.

const (
	hedgeMultiple   = 2
	hedgeQuantile   = 0.95
	hedgeFraction   = 0.05
	hedgeBurst      = 4.0
	maxHedges       = 8  // in flight at once, per job
	hedgeSamples    = 64 // recent lease times the quantile is taken over
	minHedgeSamples = 1  // no hedge before the job made a batch
	// minHedgeDelay keeps a job of very fast leases from hedging on a
	// scheduler's hiccup.
	minHedgeDelay = 20 * time.Millisecond
)

// hedging is a job's hedge state. Owned by the coordinator's goroutine.
type hedging struct {
	// times are recent leases' seconds per lease in flight, a ring of
	// hedgeSamples; perLease is their hedgeQuantile (0 until
	// minHedgeSamples).
	times    []float64
	next     int
	perLease float64
	// tokens is the budget: hedgeFraction earned per lease, at most
	// hedgeBurst kept; a hedge spends one.
	tokens float64
	// checkAt is when a lease next falls due for a hedge; zero: look at
	// the next chance (one fell due and could not be hedged yet).
	checkAt time.Time
}

func newHedging() hedging {
	return hedging{tokens: hedgeBurst}
}

// made records a lease that made its batch in took, with n leases in
// flight on its maker when issued.
func (h *hedging) made(took time.Duration, n int) {
	x := took.Seconds() / float64(max(n, 1))
	if len(h.times) < hedgeSamples {
		h.times = append(h.times, x)
	} else {
		h.times[h.next] = x
		h.next = (h.next + 1) % hedgeSamples
	}
	if len(h.times) < minHedgeSamples {
		return
	}
	old := h.perLease
	s := slices.Sorted(slices.Values(h.times))
	h.perLease = s[int(math.Ceil(hedgeQuantile*float64(len(s))))-1]
	if h.perLease < old || old == 0 {
		h.checkAt = time.Time{} // leases fall due earlier than thought
	}
}

// issued earns the budget's share of a lease issued (not a hedge).
func (h *hedging) issued() { h.tokens = min(hedgeBurst, h.tokens+hedgeFraction) }

// refund gives back the budget of a hedge its maker turned away (busy).
func (h *hedging) refund() { h.tokens = min(hedgeBurst, h.tokens+1) }

// delay is how long after its issue lease rec is hedged; 0: not yet known
// (too few leases made).
func (h *hedging) delay(rec *leaseRec) time.Duration {
	if h.perLease == 0 {
		return 0
	}
	d := time.Duration(hedgeMultiple * h.perLease * float64(max(rec.n, 1)) * float64(time.Second))
	return max(d, minHedgeDelay)
}

// noteIssued moves checkAt earlier for a lease just issued.
func (h *hedging) noteIssued(rec *leaseRec) {
	if d := h.delay(rec); d > 0 && !h.checkAt.IsZero() && rec.issued.Add(d).Before(h.checkAt) {
		h.checkAt = rec.issued.Add(d)
	}
}

// hedge gives each lease past its hedge delay to a second maker, lowest
// batch first, while the budget, the makers and the buffers allow. It
// returns when the next lease falls due (zero: none does, or one is due
// and waits for a maker, a buffer or the budget: the events that bring
// those wake the loop).
func (c *Coordinator) hedge(ctx context.Context, wg *sync.WaitGroup, ms []Maker) time.Time {
	h := &c.hedging
	now := time.Now()
	if len(c.table.leases) == 0 {
		return time.Time{}
	}
	if now.Before(h.checkAt) {
		return h.checkAt
	}
	var due []batchID
	next := time.Time{}
	unknown := false
	for id, rec := range c.table.leases {
		d := h.delay(rec)
		if _, inParts := rec.by.(*inParts); d == 0 && inParts {
			// Before the job's first batch, a lease in parts is hedged
			// when a maker is stuck (parts.go): one hung from the
			// job's start has a part of nearly every batch.
			d = c.env.Config.LeaseTimeout / stuckShare
		}
		if d == 0 {
			unknown = true // too few leases made to know a delay: a made one brings the loop back
			continue
		}
		if c.table.hedges[id] != nil || d >= c.env.Config.LeaseTimeout {
			continue // hedged already; or the lease timeout comes first
		}
		if at := rec.issued.Add(d); now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		due = append(due, id)
	}
	slices.SortFunc(due, cmpBatch)
	for _, id := range due {
		if ok, retryAt := c.hedgeOne(ctx, wg, ms, id); !ok {
			h.checkAt = time.Time{}
			return retryAt
		}
	}
	if next.IsZero() {
		if unknown {
			return time.Time{}
		}
		next = now.Add(c.env.Config.LeaseTimeout) // no lease in flight is due before its timeout
	}
	h.checkAt = next
	return next
}

// hedgeOne gives batch id, leased to one maker, to another: false when the
// budget, the makers or the buffers do not allow it now, with when a
// maker's back-off ends if that is what holds it up.
func (c *Coordinator) hedgeOne(ctx context.Context, wg *sync.WaitGroup, ms []Maker, id batchID) (bool, time.Time) {
	h := &c.hedging
	first := c.table.leases[id]
	// A probe's hedge is not charged to the budget: probes are one lease
	// at a time per maker, each after a back-off twice the last.
	// Nor is the hedge of a lease in parts that waits for a stuck maker
	// (parts.go): its other leases wait for it too.
	if !first.probe && !c.waitsOnStuck(first) && h.tokens < 1 || len(c.table.hedges) >= maxHedges {
		return false, time.Time{}
	}
	ch := c.chooseWaiting(ms, first.by.waitsFor()...) // not the maker it waits for
	if ch.m == nil {
		return false, ch.retryAt
	}
	b := c.pool.get(c.poolSize(c.window(ms)) + len(c.table.hedges) + 1)
	if b == nil {
		return false, time.Time{}
	}
	if !first.probe {
		h.tokens--
	}
	c.start(ctx, wg, id, c.wholeTo(ch.m), b, true, 0)
	c.table.hedges[id].probe = first.probe // a probe's hedge, not charged
	c.log.Debug("lease hedged", "epoch", id.epoch, "batch", id.k, "slow", first.maker.Name(), "hedge", ch.m.Name(),
		"after", time.Since(first.issued).Round(time.Millisecond))
	return true, time.Time{}
}

// outrun carries out the end of lease loser of batch id, whose other
// lease just made the batch (the table forgot it): it is cancelled (its
// answer, if one still comes, is dropped). A first lease outrun by its
// hedge counts against its maker as slow (in parts, against the makers of
// the parts not answered yet).
func (c *Coordinator) outrun(id batchID, loser *leaseRec, now time.Time) {
	slow := loser.by.waitsFor() // before the cancel answers its parts
	loser.cancel()
	if loser.hedge {
		c.env.Metrics.Hedges.WithLabelValues("lost").Inc()
		return
	}
	c.env.Metrics.Hedges.WithLabelValues("won").Inc()
	for _, m := range slow {
		c.env.Metrics.LeaseFailures.WithLabelValues(m.Name(), "slow").Inc()
		st := c.stat(m)
		fails := st.fails
		st.outrun(now, loser)
		level := slog.LevelDebug
		if st.fails > fails && st.retryAt.Sub(now) >= benchedWarning {
			level = slog.LevelWarn // rare: each doubles the back-off
		}
		c.log.Log(context.Background(), level, "lease outrun by its hedge: the maker is backed off", "maker", m.Name(),
			"epoch", id.epoch, "batch", id.k, "took", now.Sub(loser.issued).Round(time.Millisecond), "failures_in_a_row", st.fails,
			"backoff", st.retryAt.Sub(now).Round(time.Millisecond))
	}
}

// benchedWarning is the back-off from which a maker outrun by a hedge is
// logged as a warning: one that keeps losing, not a tail lease.
const benchedWarning = 5 * time.Second
