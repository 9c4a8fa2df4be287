package server

import (
	"time"
)

// makerStat is what one job measured of one maker.
type makerStat struct {
	inflight int
	rate     float64 // batches per second, EWMA; 0 until measured
	fails    int     // in a row
	retryAt  time.Time
	// first is the job's first lease on the maker, finished its
	// completions in the last telemetryWindow: what it delivered, for the
	// advisor (the EWMA, leases in flight over latency, only ranks makers).
	first    time.Time
	finished []time.Time
}

// stat is what the job measured of m, created at first use.
func (c *coordinator) stat(m Maker) *makerStat {
	st := c.stats[m]
	if st == nil {
		st = &makerStat{}
		c.stats[m] = st
	}
	return st
}

// forgetGone drops what the job keeps of makers no longer among ms and
// with nothing in flight (a peer that left DNS): the maps do not grow with
// churn.
func (c *coordinator) forgetGone(ms []Maker) {
	present := make(map[Maker]bool, len(ms))
	for _, m := range ms {
		present[m] = true
	}
	for m, st := range c.stats {
		if !present[m] && st.inflight == 0 {
			delete(c.stats, m)
		}
	}
	for m := range c.refused {
		if !present[m] {
			delete(c.refused, m)
		}
	}
}

// done records a lease that made its batch in took, with rec.n leases in
// flight on the maker when it was issued.
func (st *makerStat) done(rec *leaseRec, took time.Duration) {
	sample := float64(rec.n) / max(took.Seconds(), 1e-6)
	if st.rate == 0 {
		st.rate = sample
	} else {
		st.rate = 0.7*st.rate + 0.3*sample
	}
	st.fails = 0
	st.finished = append(st.finished, time.Now())
}

// failed records a lease that failed: the maker is backed off, longer at
// each failure in a row.
func (st *makerStat) failed() {
	st.fails++
	st.rate /= 2
	st.retryAt = time.Now().Add(min(100*time.Millisecond<<min(st.fails, 6), 5*time.Second))
}

// throughput is the batches per second the maker delivered to the job
// over the last telemetryWindow (or since its first lease).
func (st *makerStat) throughput(now time.Time) float64 {
	i := 0
	for i < len(st.finished) && now.Sub(st.finished[i]) > telemetryWindow {
		i++
	}
	st.finished = append(st.finished[:0], st.finished[i:]...)
	span := min(now.Sub(st.first), telemetryWindow).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(len(st.finished)) / span
}
