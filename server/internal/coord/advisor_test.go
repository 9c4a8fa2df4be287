package coord

import (
	"math"
	"testing"
	"time"
)

// The four situations measured on an H100 training ResNet-50 (bf16, batch
// 256) at 4727ffa, as issue 17 reports them: what was delivered, the
// trainer's wait share, the GPU's idle share, the makers and their rates
// when busy (2 cores: ~2,541 images/s for the local executor, ~2,214 for a
// peer), and how many makers the same runs showed saturate the GPU.
func TestAdviseH100(t *testing.T) {
	const batch = 256
	perSec := func(images float64) float64 { return images / batch }
	rates := func(n int, images float64) []float64 {
		r := make([]float64, n)
		for i := range r {
			r[i] = perSec(images)
		}
		return r
	}
	for _, tc := range []struct {
		name       string
		images     float64 // delivered per second
		wait, idle float64
		makers     int
		busyRate   float64 // a maker's images per busy second
		busyShare  float64
		want       float64
		advice     string
	}{
		{"--workers 2 on 2 cores", 2541, 0.645, 0.337, 1, 2541, 1, 2, "needs about 1 more workers"},
		{"one peer of 2 cores", 2214, 0.775, 0.450, 1, 2214, 1, 2, "needs about 1 more workers"},
		{"4 peers, GPU saturated", 3922, 0.0003, 0.01, 4, 2214, 0.44, 2, "fine (2 fewer would do)"},
		{"6 peers, GPU saturated", 3913, 0.0003, 0.01, 6, 2214, 0.29, 2, "fine (4 fewer would do)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			starved, signal := starvation(tc.wait, tc.idle, true)
			if signal != "gpu" {
				t.Fatalf("signal %q with a GPU monitor", signal)
			}
			got, advice := advise(adviceInput{
				target: DefaultStallTarget, starved: starved, delivered: perSec(tc.images), waited: true,
				makers: tc.makers, busyRates: rates(tc.makers, tc.busyRate), busyShare: tc.busyShare,
			})
			if got != tc.want || advice != tc.advice {
				t.Errorf("recommended %v %q, want %v %q", got, advice, tc.want, tc.advice)
			}
		})
	}
}

// Without a driver the trainer's wait stands in for starvation: the
// advice still moves the right way, more cautiously wrong by the wait's
// overstatement, and the same holds for the other limits.
func TestAdviseWithoutGPU(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     adviceInput
		want   float64
		advice string
	}{
		{"starving, makers busy", adviceInput{starved: 0.5, delivered: 5, waited: true, makers: 1, busyRates: []float64{5}, busyShare: 1}, 3, "needs about 2 more workers"},
		{"fine", adviceInput{starved: 0.01, delivered: 10, waited: true, makers: 2, busyRates: []float64{6, 6}, busyShare: 0.9}, 2, "fine"},
		{"fewer would do", adviceInput{starved: 0, delivered: 1, waited: true, makers: 4, busyRates: []float64{3, 3, 3, 3}, busyShare: 0.1}, 1, "fine (3 fewer would do)"},
		// Starved while the makers idle: more makers would idle too. Hold
		// the count rather than climb (one idle-ish trainer once produced
		// "recommended 1744").
		{"network or trainer", adviceInput{starved: 0.6, delivered: 0.2, waited: true, bytes: 48e6, makers: 2, busyRates: []float64{20, 20}, busyShare: 0.05}, 2, "the network or the trainer is the limit (48 MB/s)"},
		{"makers with room", adviceInput{starved: 0.6, delivered: 5, waited: true, makers: 2, busyRates: []float64{2, 2}, busyShare: 0.95, spare: true}, 2, "the network or the trainer is the limit (0 MB/s)"},
		{"not taking batches", adviceInput{makers: 3, busyRates: []float64{1, 1, 1}}, 3, "the trainer is not taking batches"},
		{"nothing measured", adviceInput{starved: 0.5, delivered: 1, waited: true, makers: 2, busyRates: []float64{0, 0}}, math.NaN(), "no makers measured yet"},
		{"nearly all starved", adviceInput{starved: 0.99, delivered: 1, waited: true, makers: 1, busyRates: []float64{1}, busyShare: 1}, 11, "needs about 10 more workers"},
		// The same figures in the job's first window are its start: the
		// trainer waited for the first batches whatever the makers. No
		// figure (one would be published at once and held for the whole
		// stabilization window: the autoscale bench's runs from 1 worker
		// went to 10 workers for 5's worth at every start).
		{"starting", adviceInput{starved: 0.99, delivered: 1, waited: true, makers: 1, busyRates: []float64{1}, busyShare: 1, starting: true}, math.NaN(), "measuring (the job is starting)"},
		{"starting, not yet taking", adviceInput{makers: 3, busyRates: []float64{1, 1, 1}, starting: true}, 3, "the trainer is not taking batches"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.target = DefaultStallTarget
			got, advice := advise(tc.in)
			if !(got == tc.want || math.IsNaN(got) && math.IsNaN(tc.want)) || advice != tc.advice {
				t.Errorf("recommended %v %q, want %v %q", got, advice, tc.want, tc.advice)
			}
		})
	}
	if s, sig := starvation(0.645, 0.9, false); s != 0.645 || sig != "trainer wait" {
		t.Errorf("without a GPU: %v %q, want the wait share", s, sig)
	}
	// A GPU idle while the trainer never waits for a batch is not starved
	// of input.
	if s, _ := starvation(0, 0.8, true); s != 0 {
		t.Errorf("GPU idle 0.8, no wait: starvation %v, want 0", s)
	}
}

// The published figure rises at once and falls only after the lower
// figure held for the window; it never exceeds the bound.
func TestStabilizer(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := stabilizer{window: 60 * time.Second, max: 8}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	type step struct {
		sec       int
		raw, want float64
	}
	for _, st := range []step{
		{0, math.NaN(), math.NaN()},
		{1, 2, 2},
		{16, 5, 5},  // up at once
		{31, 3, 5},  // down waits
		{61, 3, 5},  // 5 still within the window
		{77, 3, 3},  // 5 left the window (16 + 60 < 77)
		{78, 20, 8}, // bounded
		{93, 1, 8},
	} {
		if got := s.add(at(st.sec), st.raw); !(got == st.want || math.IsNaN(got) && math.IsNaN(st.want)) {
			t.Errorf("t=%ds raw %v: published %v, want %v", st.sec, st.raw, got, st.want)
		}
	}
}

// A maker's rate is batches per busy second: a maker busy a quarter of the
// time making 4 batches a second while busy measures 4/s, not 1/s.
func TestMakerBusyRate(t *testing.T) {
	t0 := time.Unix(2000, 0)
	var st makerStat
	now := t0
	for range 8 {
		st.begin(now)
		now = now.Add(250 * time.Millisecond)
		st.end(now)
		st.done(now, &leaseRec{n: 1}, 250*time.Millisecond)
		now = now.Add(750 * time.Millisecond) // idle
	}
	rate, share := st.busyRate(now)
	if math.Abs(rate-4) > 1e-9 || math.Abs(share-0.25) > 1e-9 {
		t.Errorf("busy rate %v, share %v; want 4/s, 0.25", rate, share)
	}
	// Two leases at once, overlapping: busy time is their union (after a
	// first lease: the maker's start, left out).
	var two makerStat
	two.begin(t0)
	two.end(t0.Add(100 * time.Millisecond))
	two.done(t0.Add(100*time.Millisecond), &leaseRec{n: 1}, 0)
	two.begin(t0.Add(1000 * time.Millisecond))
	two.begin(t0.Add(1100 * time.Millisecond))
	two.end(t0.Add(1500 * time.Millisecond))
	two.done(t0.Add(1500*time.Millisecond), &leaseRec{n: 1}, 0)
	two.end(t0.Add(2000 * time.Millisecond))
	two.done(t0.Add(2000*time.Millisecond), &leaseRec{n: 2}, 0)
	if rate, _ := two.busyRate(t0.Add(3 * time.Second)); math.Abs(rate-2) > 1e-9 {
		t.Errorf("two overlapping leases over 1 s busy: %v/s, want 2", rate)
	}
}

// A maker's first lease is its start (a connection, cold caches, a
// worker's first decode: 2 s here where it then makes a batch every
// 100 ms), and a lease in progress has no batch yet: neither lowers its
// rate. (They did: a maker just added measured a third of its rate, and
// the advisor asked for more makers at every scale-up; bench backpressure
// --scenario autoscale.)
func TestMakerBusyRateStart(t *testing.T) {
	t0 := time.Unix(3000, 0)
	var st makerStat
	lease := func(from, to time.Time) {
		st.begin(from)
		st.end(to)
		st.done(to, &leaseRec{n: 1}, to.Sub(from))
	}
	now := t0.Add(2 * time.Second)
	lease(t0, now)
	for range 10 {
		lease(now, now.Add(100*time.Millisecond))
		now = now.Add(100 * time.Millisecond)
	}
	if rate, share := st.busyRate(now); math.Abs(rate-10) > 1e-6 || math.Abs(share-1) > 1e-9 {
		t.Errorf("after a slow first lease: %v/s, busy %v; want 10/s (the first lease left out), 1", rate, share)
	}
	st.begin(now)
	now = now.Add(90 * time.Millisecond)
	if rate, _ := st.busyRate(now); math.Abs(rate-10) > 1e-6 {
		t.Errorf("with a lease 90 ms in progress: %v/s, want 10/s", rate)
	}
	// Too few batches after the first: not measured yet.
	var fresh makerStat
	fresh.begin(t0)
	fresh.end(t0.Add(time.Second))
	fresh.done(t0.Add(time.Second), &leaseRec{n: 1}, time.Second)
	fresh.begin(t0.Add(time.Second))
	fresh.end(t0.Add(1100 * time.Millisecond))
	fresh.done(t0.Add(1100*time.Millisecond), &leaseRec{n: 1}, 100*time.Millisecond)
	if rate, _ := fresh.busyRate(t0.Add(1200 * time.Millisecond)); rate != 0 {
		t.Errorf("one batch after the first: %v/s, want 0 (not measured)", rate)
	}
}

// The advisor's figure is the median of its last adviceSmoothing of
// estimates: one estimate in ten above the rest does not reach the
// stabilizer (which would publish it for the whole --advise-window), a
// rise that lasts does, once it held for half the time.
func TestAdviceMedian(t *testing.T) {
	t0 := time.Unix(4000, 0)
	m := medianFilter{window: adviceSmoothing}
	s := stabilizer{window: 60 * time.Second, max: 64}
	if got := m.add(t0, math.NaN()); !math.IsNaN(got) {
		t.Fatalf("no estimate yet: %v, want NaN", got)
	}
	tick := 500 * time.Millisecond
	now := t0
	var rose time.Time
	for i := range 120 { // 60 s of 0.5 s ticks
		now = now.Add(tick)
		raw := 5.0
		if i%10 == 9 {
			raw = 6 // the noise of a starved job's extrapolation
		}
		if now.Sub(t0) > 40*time.Second {
			raw = 7 // a rise that lasts
		}
		pub := s.add(now, m.add(now, raw))
		switch {
		case now.Sub(t0) <= 40*time.Second && pub != 5:
			t.Fatalf("at %v, estimates of 5 with one of 6 in ten: published %v, want 5", now.Sub(t0), pub)
		case pub == 7 && rose.IsZero():
			rose = now
		}
	}
	if d := rose.Sub(t0.Add(40 * time.Second)); rose.IsZero() || d > adviceSmoothing/2+tick {
		t.Errorf("a lasting rise to 7 at 40 s published after %v, want within half of %v", d, adviceSmoothing)
	}
	// NaN estimates (a starting job) are no estimates.
	if got := m.add(now.Add(time.Second), math.NaN()); got != 7 {
		t.Errorf("a NaN after 7s: %v, want 7", got)
	}
	if got := m.add(now.Add(time.Minute), math.NaN()); !math.IsNaN(got) {
		t.Errorf("nothing for a minute: %v, want NaN", got)
	}
}
