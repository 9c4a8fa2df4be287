package coord

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Which maker gets a lease: the one that would make it soonest (choose),
// and what a job does when none can (noMaker).

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
	if c.makers.noMakerSince.IsZero() {
		c.makers.noMakerSince = now
	}
	limit := noMakerLeaseTimeouts * c.env.Config.LeaseTimeout
	why := c.whyNoMaker(ms)
	if waited := now.Sub(c.makers.noMakerSince); waited >= limit {
		return time.Time{}, fmt.Errorf("%w: no maker could take this job's batches for %v (%d × --lease-timeout): %s",
			ErrNoMakerReady, waited.Round(time.Second), noMakerLeaseTimeouts, why)
	}
	if now.Sub(c.makers.lastWarn) >= 10*time.Second {
		c.makers.lastWarn = now
		c.log.Warn("no maker is ready for the job; waiting", "reasons", why, "fails_in", (limit - now.Sub(c.makers.noMakerSince)).Round(time.Second))
	}
	wake := c.makers.noMakerSince.Add(limit)
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
		switch err := c.makers.refused[m]; {
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
	return m.Ready() && c.makers.refused[m] == nil && c.env.Verifier.Why(m) == nil
}

// choice is choose's decision: the maker to lease to (nil: none now),
// when a maker's back-off ends (none now: look again then), the full
// makers it would rather wait for, or the job's end (ErrNoMaker).
type choice struct {
	m       Maker
	retryAt time.Time
	full    []Maker
	err     error
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
// is known (the job's start), all count alike. No maker when none can
// take a lease now, with when one's back-off ends; ErrNoMaker when every
// maker refused the job. Every full maker it passed over is in full: the
// caller waits for their room (chooseWaiting).
func (c *Coordinator) choose(ms []Maker, now time.Time, not ...Maker) choice {
	slowest, healthy := math.Inf(1), 0
	for _, m := range ms {
		if st := c.makers.stats[m]; st != nil && st.known(now) > 0 && c.usable(m) {
			slowest = math.Min(slowest, st.known(now))
			if !st.onTrial(now) {
				healthy++
			}
		}
	}
	var (
		ch      choice
		bestT   = math.Inf(1)
		fullT   = math.Inf(1) // the soonest a full maker would finish
		refused int
	)
	for _, m := range ms {
		if c.makers.refused[m] != nil {
			refused++
			continue
		}
		if slices.Contains(not, m) || !m.Ready() || c.env.Verifier.Why(m) != nil {
			continue
		}
		st := c.stat(m)
		if now.Before(st.retryAt) {
			if ch.retryAt.IsZero() || st.retryAt.Before(ch.retryAt) {
				ch.retryAt = st.retryAt
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
			fullT = math.Min(fullT, t)
			ch.full = append(ch.full, m)
			continue
		}
		if t < bestT {
			ch.m, bestT = m, t
		}
	}
	if ch.m != nil && fullT*waitFaster < bestT {
		ch.m = nil // wait for the full one
		return ch
	}
	if ch.m == nil && refused > 0 && refused == len(ms) {
		var errs []error
		for _, m := range ms {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name(), c.makers.refused[m]))
		}
		ch.err = fmt.Errorf("%w: %w", ErrNoMaker, errors.Join(errs...))
	}
	return ch
}

// chooseWaiting is choose, the job waiting for room on the full makers it
// passed over (their Freed wakes it); it chooses again once it waits, so
// that room freed just before is not missed.
func (c *Coordinator) chooseWaiting(ms []Maker, not ...Maker) choice {
	ch := c.choose(ms, time.Now(), not...)
	if len(ch.full) == 0 {
		return ch
	}
	for _, m := range ch.full {
		c.env.Makers.waitFree(m, c.wake)
	}
	return c.choose(ms, time.Now(), not...)
}

// waitFaster is how many times sooner a full maker must finish a lease
// than the soonest maker with room for the lease to wait for it (choose).
const waitFaster = 2
