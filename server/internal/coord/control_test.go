package coord

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
)

func TestTelemetryWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tel := newTelemetry(5*time.Second, t0)
	// 10 s of a trainer that waits 0.5 s of every second and steps 0.5 s.
	for i := 1; i <= 10; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		tel.report(now, 0.5, 0.5, 1)
		tel.delivered(now, 32, 1000, 0)
	}
	s := tel.snapshot(t0.Add(10 * time.Second))
	if math.Abs(s.stall-0.5) > 0.11 || math.Abs(s.stepPerBatch-0.5) > 1e-9 || math.Abs(s.imagesPerSec-32) > 7 {
		t.Errorf("snapshot %+v; want stall 0.5, step 0.5 s, 32 images/s", s)
	}
	// Then it stops waiting: within the window the stall falls to 0.
	for i := 11; i <= 16; i++ {
		tel.report(t0.Add(time.Duration(i)*time.Second), 0, 1, 1)
	}
	if s := tel.snapshot(t0.Add(16 * time.Second)); s.stall != 0 {
		t.Errorf("stall %v after 6 s without waiting, want 0 (the window is 5 s here)", s.stall)
	}
	// Garbage reports are ignored.
	tel.report(t0.Add(17*time.Second), math.Inf(1), math.NaN(), 1)
	tel.report(t0.Add(17*time.Second), -3, 1e300, 1)
	if s := tel.snapshot(t0.Add(17 * time.Second)); s.stall != 0 || math.IsNaN(s.stepPerBatch) {
		t.Errorf("garbage reports changed the figures: %+v", s)
	}
}

// A job is starting until the trainer's first report, which carries its
// wait for the stream to open and the first batches, is a whole window
// old; before its first delivery it is not (nothing is taken yet).
func TestTelemetryStarting(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tel := newTelemetry(3*time.Second, t0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if s := tel.snapshot(at(500)); s.starting {
		t.Error("starting before the first delivery")
	}
	tel.delivered(at(1000), 32, 1000, 0)
	if s := tel.snapshot(at(1100)); !s.starting {
		t.Error("not starting after the first delivery, before the first report")
	}
	tel.report(at(1200), 1.1, 0, 1) // the first Next's wait: the start
	for ms := 1300; ms <= 4200; ms += 100 {
		tel.delivered(at(ms), 32, 1000, 0)
		tel.report(at(ms), 0.005, 0.05, 1)
	}
	if s := tel.snapshot(at(4200)); !s.starting || s.stall < 0.3 {
		t.Errorf("at 4.2 s (first report at 1.2 s, window 3 s): starting %v, stall %v; want starting, the start's wait still in", s.starting, s.stall)
	}
	tel.report(at(4300), 0.005, 0.05, 1)
	if s := tel.snapshot(at(4300)); s.starting || s.stall > 0.2 {
		t.Errorf("at 4.3 s: starting %v, stall %v; want the start out of the window", s.starting, s.stall)
	}
}

func TestNarrowFloor(t *testing.T) {
	for _, tc := range []struct {
		rec   float64
		ready int
		want  int
	}{
		{math.NaN(), 3, 1}, {0, 3, 1}, // no figure yet
		{2, 2, 2}, // a trainer wanting two makers' worth keeps both busy
		{5, 2, 2}, // never more than are ready
		{1, 4, 1},
	} {
		if got := narrowFloor(tc.rec, tc.ready); got != tc.want {
			t.Errorf("narrowFloor(%v, %d) = %d, want %d", tc.rec, tc.ready, got, tc.want)
		}
	}
}

// fakeMaker is a maker the controller tests set the readiness and room
// of; they never lease.
type fakeMaker struct {
	name  string
	free  int
	ready bool
	local bool
}

func (m *fakeMaker) Make(context.Context, Job, *lease.Lease, *pipeline.Batch) (lease.Made, error) {
	return lease.Made{}, errors.New("fakeMaker makes nothing")
}
func (m *fakeMaker) Name() string  { return m.name }
func (m *fakeMaker) Trusted() bool { return m.local }
func (m *fakeMaker) Remote() bool  { return !m.local }
func (m *fakeMaker) Free() int     { return m.free }
func (m *fakeMaker) Ready() bool   { return m.ready }
func (m *fakeMaker) Forget(Job)    {}

// controlled is a coordinator of a job of batches of 4 whose controller
// the test drives with its own clock: no lease is issued, the test plays
// the trainer's reports and the makers' leases.
func controlled(t *testing.T, window int) (*Coordinator, *Env) {
	t.Helper()
	env := testEnvWindow(window, &fakeVerifier{})
	c := New(env, &fakeJob{n: 40, size: 4}, Stream{Credits: 2, Memory: &memory{}}, "tiny-r0-1", discard)
	c.table = newTable(c.j, c.st)
	c.ctl.tel = newTelemetry(TelemetryWindow, time.Unix(1000, 0))
	return c, env
}

// A trainer slower than production (it steps 100 ms a batch and never
// waits, the buffer full): the window narrows one lease per decision to
// its floor, the advice is fine, narrow decisions are counted.
func TestControllerNarrowsForASlowTrainer(t *testing.T) {
	c, env := controlled(t, 8)
	ms := []Maker{&fakeMaker{name: "m", free: 8, ready: true}}
	now := time.Unix(1000, 0)
	c.ctl.win = 8
	c.credit.waitSince.Store(now.UnixNano()) // a made batch waits for a credit all along
	for range 20 {
		for i := range 5 {
			at := now.Add(time.Duration(i) * 100 * time.Millisecond)
			c.ctl.tel.report(at, 0, 0.1, 1)
			c.ctl.tel.delivered(at, 4, 4*3*32*32, 0)
		}
		now = now.Add(controlEvery)
		c.control(now, ms)
	}
	js := c.ctl.status.Load()
	if js.Window != 1 || js.Starvation != 0 || js.StarvationSignal != "trainer wait" {
		t.Errorf("window %d, starvation %v (%s): a trainer slower than production should narrow the window to its floor", js.Window, js.Starvation, js.StarvationSignal)
	}
	if got := testutil.ToFloat64(env.Metrics.WindowDecisions.WithLabelValues("narrow")); got != 7 {
		t.Errorf("%v narrow decisions counted, want 7 (8 to 1)", got)
	}
}

// A starving trainer (waiting 80% of the time for a maker that is busy all
// along making 2 batches a second): the window widens by half at each
// decision to its ceiling, and the advisor asks for more workers. The
// workers a pool must add are the makers less the coordinator's own
// executor when it is the maker (stoker_peers_recommended).
func TestControllerWidensForAStarvingTrainer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		maker Maker
		peers float64
	}{
		{"peer", &fakeMaker{name: "m", free: 8, ready: true}, 6},
		{"local", &fakeMaker{name: "local", free: 8, ready: true, local: true}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, env := controlled(t, 6)
			ms := []Maker{tc.maker}
			now := time.Unix(1000, 0)
			st := c.stat(tc.maker)
			st.begin(now)
			var widths []int
			for range 20 {
				// Half a second: one batch made and delivered, the
				// trainer waiting 0.4 s of it.
				at := now.Add(controlEvery)
				st.end(at)
				st.done(at, &leaseRec{n: 1}, controlEvery)
				st.begin(at)
				c.ctl.tel.report(at.Add(-controlEvery/2), 0.4, 0.1, 1)
				c.ctl.tel.delivered(at.Add(-controlEvery/2), 4, 4*3*32*32, 0)
				now = at
				c.control(now, ms)
				widths = append(widths, c.ctl.status.Load().Window)
			}
			js := c.ctl.status.Load()
			if widths[0] != 6 || js.Window != 6 {
				t.Errorf("windows %v: a starving trainer should widen the window to its ceiling 6 at once", widths)
			}
			if js.WorkersRecommended != 6 || !strings.HasPrefix(js.Advice, "needs about 5 more") {
				t.Errorf("recommended %v, advice %q: want 6 makers (demand 2/s over the 0.2 not starved, with 5%% headroom, over a maker's 2/s when busy)", js.WorkersRecommended, js.Advice)
			}
			if got := testutil.ToFloat64(env.Metrics.WorkersRecommended.WithLabelValues(c.name)); got != 6 {
				t.Errorf("stoker_workers_recommended %v, want 6", got)
			}
			if got := testutil.ToFloat64(env.Metrics.PeersRecommended.WithLabelValues(c.name)); got != tc.peers {
				t.Errorf("stoker_peers_recommended %v with the %s maker, want %v", got, tc.name, tc.peers)
			}
			c.dropMetrics()
			if n := testutil.CollectAndCount(env.Metrics.PeersRecommended); n != 0 {
				t.Errorf("%d stoker_peers_recommended series after the job ended, want 0", n)
			}
		})
	}
}

// costedJob is a fakeJob that says what its samples cost (CPUCoster).
type costedJob struct {
	*fakeJob
	predicted, measured float64
}

func (j *costedJob) CPUPerSample() (predicted, worst, measured float64) {
	return j.predicted, j.predicted, j.measured
}

// TestWindowByCPU: an automatic window is bounded by the CPU its batches
// hold, per worker of the ready makers (Config.Workers each): a cheap
// job's floor keeps lookaheadMinCPU of work in flight for each (within
// the ceiling in batches), an expensive job's ceiling at most
// lookaheadMaxCPU of it, but never fewer leases than workers; the
// measured cost counts when it is the larger; a configured window and a
// job that does not say its cost keep the bounds in batches.
func TestWindowByCPU(t *testing.T) {
	ms := []Maker{newMaker("a", 8), newMaker("b", 8)} // a ceiling of 8 leases
	for _, tc := range []struct {
		name                string
		window, workers     int
		batch               int
		predicted, measured float64
		lo, hi              int
	}{
		{"cheap: 0.1 s a batch", 0, 1, 32, 0.003, 0, 8, 8},       // 1 s over 0.096 s: 11, within 8
		{"0.2 s a batch", 0, 1, 32, 0.00625, 0, 5, 8},            // 1 s over 0.2 s: 5
		{"2 s a batch", 0, 1, 8, 0.25, 0, 1, 8},                  // 16 s over 2 s: 8
		{"8 s a batch", 0, 1, 32, 0.25, 0, 1, 2},                 // 16 s over 8 s: 2
		{"8 s a batch, 3 workers each", 0, 3, 32, 0.25, 0, 1, 6}, // 48 s over 8 s: 6
		{"a minute a batch", 0, 1, 256, 0.25, 0, 1, 2},           // a lease a worker
		{"a minute a batch, 3 workers each", 0, 3, 256, 0.25, 0, 1, 6},
		{"measured past predicted", 0, 1, 8, 0.01, 0.25, 1, 8},    // 2 s a batch, measured
		{"predicted past measured", 0, 1, 32, 0.25, 0.001, 1, 2},  // the larger counts
		{"a configured window", 6, 1, 256, 0.25, 0, minWindow, 6}, // the operator's
		{"no cost said", 0, 1, 32, 0, 0, minWindow, 8},            // bounds in batches
	} {
		env := testEnvWindow(tc.window, &fakeVerifier{}, ms...)
		env.Config.Workers = tc.workers
		var j Job = &costedJob{fakeJob: &fakeJob{n: 1000, size: tc.batch}, predicted: tc.predicted, measured: tc.measured}
		if tc.name == "no cost said" {
			j = &fakeJob{n: 1000, size: tc.batch}
		}
		c := New(env, j, Stream{Memory: &memory{}}, "tiny-r0-1", discard)
		if lo, hi := c.windowBounds(ms); lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: window bounds [%d, %d], want [%d, %d]", tc.name, lo, hi, tc.lo, tc.hi)
		}
		if w := c.window(ms); w < tc.lo || w > tc.hi {
			t.Errorf("%s: window %d outside [%d, %d]", tc.name, w, tc.lo, tc.hi)
		}
	}
}
