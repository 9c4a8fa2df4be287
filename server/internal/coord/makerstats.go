package coord

import (
	"sync"
	"sync/atomic"
	"time"
)

// makerBook is what a job knows of its makers: what it measured of each,
// the refusals (for the job's error when all refuse), and since when it
// found none it could use (zero while it has one), last warned of that.
// Owned by the coordinator's goroutine.
type makerBook struct {
	stats                  map[Maker]*makerStat
	refused                map[Maker]error
	noMakerSince, lastWarn time.Time
}

// makerStat is what one job measured of one maker.
type makerStat struct {
	inflight int
	// starting counts the job's leases given to the maker that its Free
	// does not count yet: from their issue to their Counted (free).
	starting atomic.Int32
	rate     float64 // batches per second, EWMA; 0 until measured
	// fails counts the maker's failures in a row (errors, timeouts,
	// leases outrun by their hedge), one per lease issued after the last
	// failure: the leases already in flight when a maker starts failing
	// fail together, and count once. failedAt is the last failure.
	fails    int
	failedAt time.Time
	retryAt  time.Time // the back-off: no lease of the job before
	// first is the job's first lease on the maker, finished its
	// completions in the last TelemetryWindow: what it delivered, for the
	// advisor (the EWMA, leases in flight over latency, only ranks makers).
	first    time.Time
	finished []time.Time
	// warm is the maker's first completion for the job: its rate is
	// measured from then. lastDone is its last.
	warm     time.Time
	lastDone time.Time
	// busy are the intervals with at least one of the job's leases on the
	// maker over the last capacityWindow; busySince starts the open one
	// (zero when none is in flight).
	busy      []interval
	busySince time.Time
	// whole is the lessee of the job's leases of whole batches to the
	// maker (lease.go).
	whole *whole
}

type interval struct{ from, to time.Time }

// capacityWindow is how far back a maker's busy rate looks: several of a
// slow maker's batches, and long enough to ride out one slow lease.
const capacityWindow = 10 * time.Second

// begin records a lease issued on the maker at now.
func (st *makerStat) begin(now time.Time) {
	if st.inflight == 0 {
		st.busySince = now
	}
	st.inflight++
	if st.first.IsZero() {
		st.first = now
	}
}

// end records a lease of the maker's answered at now.
func (st *makerStat) end(now time.Time) {
	st.inflight--
	if st.inflight == 0 && !st.busySince.IsZero() {
		st.busy = append(st.busy, interval{st.busySince, now})
		st.busySince = time.Time{}
	}
}

// busyRate is the batches per second the maker made for the job over its
// busy time in the last capacityWindow, and the share of that window it
// was busy. The rate leaves out the maker's first lease, which is its
// start (a connection, cold caches, a worker's first decode), and counts
// busy time only up to its last completion (a lease still in progress has
// its time in the window and not yet its batch): both made the rate of a
// maker just added a fraction of what it makes, and the advisor ask for
// more makers at every scale-up. 0 until it made a few batches.
func (st *makerStat) busyRate(now time.Time) (rate, share float64) {
	from := now.Add(-capacityWindow)
	if st.first.After(from) {
		from = st.first
	}
	i := 0
	for i < len(st.busy) && !st.busy[i].to.After(from) {
		i++
	}
	st.busy = append(st.busy[:0], st.busy[i:]...)
	if span := now.Sub(from); span > 0 {
		share = st.busyBetween(from, now).Seconds() / span.Seconds()
	}
	if st.warm.IsZero() {
		return 0, share
	}
	from = later(from, st.warm)
	n, last := 0, time.Time{}
	for _, t := range st.finished {
		if t.After(from) {
			n++
			last = t
		}
	}
	if n < minFinishedForRate {
		return 0, share
	}
	busy := st.busyBetween(from, last)
	if busy <= 0 {
		return 0, share
	}
	return float64(n) / busy.Seconds(), share
}

// busyBetween is the time in [from, to] with at least one lease on the
// maker.
func (st *makerStat) busyBetween(from, to time.Time) time.Duration {
	var busy time.Duration
	add := func(a, b time.Time) {
		a, b = later(a, from), earlier(b, to)
		if b.After(a) {
			busy += b.Sub(a)
		}
	}
	for _, b := range st.busy {
		add(b.from, b.to)
	}
	if !st.busySince.IsZero() {
		add(st.busySince, to)
	}
	return busy
}

// minFinishedForRate is the fewest batches a busy rate is measured from.
const minFinishedForRate = 2

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// known is the maker's rate, while it is known: it made a batch for the
// job in the last capacityWindow (a maker benched by a low rate is tried
// again, in case it recovered). 0 when not.
func (st *makerStat) known(now time.Time) float64 {
	if st.lastDone.IsZero() || now.Sub(st.lastDone) > capacityWindow {
		return 0
	}
	return st.rate
}

// free is how many more leases m would take now: its Free, less the
// leases this job gave it that it has not counted yet. Without them a job
// leasing several batches at once sent a full worker leases it turned
// away as busy, and counted them in flight on it, which made the worker
// look the faster. starting is read first: a lease the maker counts
// before it leaves starting (Counted) is then counted twice for a moment,
// never not at all.
func (st *makerStat) free(m Maker) int {
	starting := int(st.starting.Load())
	return m.Free() - starting
}

// start counts a lease issued to the maker in starting, until the maker
// counts it: the lease's Counted, which the caller also calls as the
// maker's Make returns. Only the first call counts.
func (st *makerStat) start() func() {
	st.starting.Add(1)
	var once sync.Once
	return func() { once.Do(func() { st.starting.Add(-1) }) }
}

// onTrial reports whether the maker is not known to make batches for the
// job at its measured rate: its rate is not known, or its last lease
// failed (it is backed off, or its back-off just ended).
func (st *makerStat) onTrial(now time.Time) bool { return st.known(now) == 0 || st.fails > 0 }

// stat is what the job measured of m, created at first use.
func (c *Coordinator) stat(m Maker) *makerStat {
	st := c.makers.stats[m]
	if st == nil {
		st = &makerStat{}
		c.makers.stats[m] = st
	}
	return st
}

// forgetGone drops what the job keeps of makers no longer among ms and
// with nothing in flight (a peer that left DNS): the maps do not grow with
// churn.
func (c *Coordinator) forgetGone(ms []Maker) {
	present := make(map[Maker]bool, len(ms))
	for _, m := range ms {
		present[m] = true
	}
	for m, st := range c.makers.stats {
		if !present[m] && st.inflight == 0 {
			delete(c.makers.stats, m)
			c.routing.forget(m)
		}
	}
	for m := range c.makers.refused {
		if !present[m] {
			delete(c.makers.refused, m)
		}
	}
}

// done records a lease that made its batch in took, with rec.n leases in
// flight on the maker when it was issued.
func (st *makerStat) done(now time.Time, rec *leaseRec, took time.Duration) {
	sample := float64(rec.n) / max(took.Seconds(), 1e-6)
	if st.rate == 0 {
		st.rate = sample
	} else {
		st.rate = 0.7*st.rate + 0.3*sample
	}
	st.fails = 0
	st.lastDone = now
	st.finished = append(st.finished, now)
	if st.warm.IsZero() {
		st.warm = now
	}
}

// Back-off: a maker that fails is given no lease of the job for
// baseBackoff × 2^(failures in a row), up to maxBackoff. The cap is long:
// a maker whose leases keep timing out or being outrun by their hedges
// (a worker at a fraction of its speed) is tried with one lease after
// 0.2, 0.4, 0.8 … s, then once in ten minutes; each try costs the trainer
// at most the hedge delay, since another maker makes the batch meanwhile
// (hedge.go). One success ends the back-off.
const (
	baseBackoff = 100 * time.Millisecond
	maxBackoff  = 10 * time.Minute
)

// backoff is the back-off after fails failures in a row.
func backoff(fails int) time.Duration {
	if fails >= 30 || baseBackoff<<fails > maxBackoff {
		return maxBackoff
	}
	return baseBackoff << fails
}

// failed records, at now, a lease issued at issued that failed, timed out
// or was outrun by its hedge: the maker's rate is halved and it is backed
// off, longer at each failure in a row.
func (st *makerStat) failed(now, issued time.Time) {
	if st.fails == 0 || !issued.Before(st.failedAt) {
		st.fails++
	}
	st.failedAt = now
	st.rate /= 2
	st.retryAt = now.Add(backoff(st.fails))
}

// outrun records, at now, lease rec outrun by its hedge: the maker was
// slow, this once at least. Its rate moves towards the most the lease
// shows (its leases in flight over the time it had taken), and it is on
// trial; it is backed off only from its second failure in a row, so that
// a healthy maker whose lease was in the job's tail loses no more.
func (st *makerStat) outrun(now time.Time, rec *leaseRec) {
	if st.fails == 0 || !rec.issued.Before(st.failedAt) {
		st.fails++
	}
	st.failedAt = now
	if st.rate > 0 {
		sample := float64(rec.n) / max(now.Sub(rec.issued).Seconds(), 1e-6)
		st.rate = min(st.rate, 0.7*st.rate+0.3*sample)
	}
	if st.fails >= 2 {
		st.retryAt = now.Add(backoff(st.fails - 1))
	}
}

// throughput is the batches per second the maker delivered to the job
// over the last TelemetryWindow (or since its first lease).
func (st *makerStat) throughput(now time.Time) float64 {
	i := 0
	for i < len(st.finished) && now.Sub(st.finished[i]) > capacityWindow {
		i++
	}
	st.finished = append(st.finished[:0], st.finished[i:]...)
	i = 0
	for i < len(st.finished) && now.Sub(st.finished[i]) > TelemetryWindow {
		i++
	}
	span := min(now.Sub(st.first), TelemetryWindow).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(len(st.finished)-i) / span
}
