package server

import (
	"math"
	"strconv"
	"sync"
	"time"
)

// telemetry is what a job measured over the last few seconds: the
// trainer's reports (time blocked waiting, time stepping, batches) and what
// was delivered. The stall ratio is time waiting over wall time within the
// window, not since the stream began, so it follows a change in the
// trainer's speed within the window.
type telemetry struct {
	mu      sync.Mutex
	window  time.Duration
	begin   time.Time
	reports []trainerReport
	sent    []delivery
}

type trainerReport struct {
	at            time.Time
	wait, step    float64 // seconds
	batches       uint32
	stepped, took bool
}

type delivery struct {
	at             time.Time
	samples, bytes int
}

func newTelemetry(window time.Duration, now time.Time) *telemetry {
	return &telemetry{window: window, begin: now}
}

// report records a trainer's credit report. Negative, infinite or NaN
// values are ignored.
func (t *telemetry) report(now time.Time, wait, step float64, batches uint32) {
	ok := func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) && !math.IsNaN(x) && x < 1e6 }
	r := trainerReport{at: now, batches: batches}
	if ok(wait) {
		r.wait, r.took = wait, true
	}
	if ok(step) && step > 0 {
		r.step, r.stepped = step, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reports = append(t.trimReports(now), r)
}

// delivered records a batch sent to the trainer.
func (t *telemetry) delivered(now time.Time, samples, bytes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent = append(t.trimSent(now), delivery{at: now, samples: samples, bytes: bytes})
}

func (t *telemetry) trimReports(now time.Time) []trainerReport {
	i := 0
	for i < len(t.reports) && now.Sub(t.reports[i].at) > t.window {
		i++
	}
	return append(t.reports[:0], t.reports[i:]...)
}

func (t *telemetry) trimSent(now time.Time) []delivery {
	i := 0
	for i < len(t.sent) && now.Sub(t.sent[i].at) > t.window {
		i++
	}
	return append(t.sent[:0], t.sent[i:]...)
}

// telemetrySnap is the window's figures.
type telemetrySnap struct {
	stall         float64 // trainer wait over wall time, 0..1
	stepPerBatch  float64 // the trainer's seconds of work per batch; 0 unknown
	imagesPerSec  float64
	bytesPerSec   float64
	batchesPerSec float64
}

// snapshot computes the window's figures at now.
func (t *telemetry) snapshot(now time.Time) telemetrySnap {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reports, t.sent = t.trimReports(now), t.trimSent(now)
	span := min(now.Sub(t.begin), t.window).Seconds()
	var s telemetrySnap
	if span <= 0 {
		return s
	}
	var wait, step float64
	var stepped uint32
	for _, r := range t.reports {
		wait += r.wait
		if r.stepped {
			step += r.step
			stepped += max(r.batches, 1)
		}
	}
	s.stall = min(wait/span, 1)
	if stepped > 0 {
		s.stepPerBatch = step / float64(stepped)
	}
	for _, d := range t.sent {
		s.imagesPerSec += float64(d.samples)
		s.bytesPerSec += float64(d.bytes)
		s.batchesPerSec++
	}
	s.imagesPerSec /= span
	s.bytesPerSec /= span
	s.batchesPerSec /= span
	return s
}

// advise is the advisor: how many makers (the local executor counts as
// one, each peer as one) would bring the stall under target, from the
// trainer's measured demand and the makers' measured rates (as tf.data
// service estimates workers), and one line of advice. capacity is the
// makers' summed batches per second, makers how many are ready; idle says
// the makers had free leases while the trainer waited (so they were not
// the limit).
func advise(s telemetrySnap, target, capacity float64, makers int, idle bool) (recommended float64, advice string) {
	if makers == 0 || capacity <= 0 {
		return math.NaN(), "no makers measured yet"
	}
	perMaker := capacity / float64(makers)
	// The trainer's demand: batches per second it would take if it never
	// waited. Without step reports, infer it from what it got and how much
	// it waited.
	demand := 0.0
	switch {
	case s.stepPerBatch > 0:
		demand = 1 / s.stepPerBatch
	case s.stall < 1 && s.batchesPerSec > 0:
		demand = s.batchesPerSec / (1 - s.stall)
	}
	if demand <= 0 {
		return float64(makers), "fine"
	}
	// 10% headroom: makers measured at their current load.
	recommended = math.Ceil(demand * 1.1 / perMaker)
	switch {
	case s.stall <= target:
		if recommended < float64(makers) {
			return recommended, "fine (fewer makers would do)"
		}
		// Not stalling: the makers are not all busy, so their measured
		// rates understate what they can make; never ask for more (an
		// autoscaler on this figure would add workers nobody needs).
		return float64(makers), "fine"
	case idle:
		return recommended, "the network is the limit (" + mbps(s.bytesPerSec) + ")"
	case recommended > float64(makers):
		return recommended, "needs about " + strconv.Itoa(int(recommended)-makers) + " more workers"
	}
	return recommended, "the trainer is the limit"
}

func mbps(b float64) string { return strconv.Itoa(int(math.Round(b/1e6))) + " MB/s" }
