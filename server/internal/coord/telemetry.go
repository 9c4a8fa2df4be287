package coord

import (
	"math"
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
	// firstSent and firstReport are the job's first delivery and the
	// trainer's first report: the report that carries its wait for the
	// stream to open and the first batches to be made.
	firstSent, firstReport time.Time
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
	send           time.Duration // the send loop's time sending it
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
	if t.firstReport.IsZero() {
		t.firstReport = now
	}
	t.reports = append(t.trimReports(now), r)
}

// delivered records a batch sent to the trainer, which took send to send.
func (t *telemetry) delivered(now time.Time, samples, bytes int, send time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.firstSent.IsZero() {
		t.firstSent = now
	}
	t.sent = append(t.trimSent(now), delivery{at: now, samples: samples, bytes: bytes, send: max(send, 0)})
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
	step          float64 // the trainer's step over wall time, 0..1
	stepPerBatch  float64 // the trainer's seconds of work per batch; 0 unknown
	sending       float64 // the send loop's time sending over wall time, 0..1
	imagesPerSec  float64
	bytesPerSec   float64
	batchesPerSec float64
	batches       int     // delivered in the window
	span          float64 // the window's seconds (shorter at the job's start)
	// starting: the window still holds the job's start (its first
	// delivery was made, and the trainer's first report, which carries
	// its wait for the first batches, is not a whole window old): its
	// figures say how the job started, not what it needs.
	starting bool
	// begun: a batch was delivered.
	begun bool
}

// snapshot computes the window's figures at now.
func (t *telemetry) snapshot(now time.Time) telemetrySnap {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reports, t.sent = t.trimReports(now), t.trimSent(now)
	span := min(now.Sub(t.begin), t.window).Seconds()
	var s telemetrySnap
	s.begun = !t.firstSent.IsZero()
	s.starting = s.begun && (t.firstReport.IsZero() || now.Sub(t.firstReport) <= t.window)
	if span <= 0 {
		return s
	}
	s.span = span
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
	s.step = min(step/span, 1)
	if stepped > 0 {
		s.stepPerBatch = step / float64(stepped)
	}
	for _, d := range t.sent {
		s.imagesPerSec += float64(d.samples)
		s.bytesPerSec += float64(d.bytes)
		s.batches++
		s.sending += d.send.Seconds()
	}
	s.sending = min(s.sending/span, 1)
	s.imagesPerSec /= span
	s.bytesPerSec /= span
	s.batchesPerSec = float64(s.batches) / span
	return s
}
