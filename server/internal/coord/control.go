package coord

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
)

// DefaultStallTarget is the starvation a window controller aims under
// unless configured otherwise (--stall-target).
const DefaultStallTarget = 0.02

// DefaultWindow is the least window a job starts with, and the least
// ceiling of an automatic window.
const DefaultWindow = 4

// MaxWindow bounds a job's window, configured or automatic.
const MaxWindow = 1024

// minWindow is the window's floor: one lease in flight.
const minWindow = 1

// window is how many leases the job may have in flight: what the
// controller set, within its bounds (windowBounds). It starts at two per
// ready maker (at least DefaultWindow).
func (c *Coordinator) window(ms []Maker) int {
	if c.ctl.win == 0 {
		c.ctl.win = max(DefaultWindow, 2*readyMakers(ms))
	}
	lo, hi := c.windowBounds(ms)
	return min(max(c.ctl.win, lo), hi)
}

// The lookahead in CPU time: a job's leases in flight are its queued
// work on its makers, and what matters of it is how long it keeps them
// busy, not how many batches it is. A batch of 32 training samples is
// about 0.1 s of a core, one of 32 samples at --max-sample-cpu eight
// seconds. So an automatic window is bounded by the CPU its batches are
// predicted to hold (the larger of the cost model's mean and the mean
// measured here, times the batch size; CPUCoster), per worker of the
// ready makers (each counted as having the local executor's): at least
// lookaheadMinCPU, so that a cheap job's queue does not empty
// between its batches while another job's long sample runs (it would
// lose its share each time), and at most lookaheadMaxCPU, so that an
// expensive job does not queue minutes of CPU ahead of its trainer (work
// a closed stream abandons, buffers held for it), but never fewer leases
// than workers, each of which may be kept busy. Within the window's
// bounds in batches (windowCeiling, minWindow), which size the memory.
const (
	lookaheadMinCPU = 0.5 // seconds of CPU per worker
	lookaheadMaxCPU = 8.0
)

// windowBounds is the least and the most leases the job may have in
// flight: minWindow and windowCeiling, and for an automatic window of a
// job that knows its CPU per sample the windows holding lookaheadMinCPU
// and lookaheadMaxCPU of it per ready maker, within those (lo <= hi).
func (c *Coordinator) windowBounds(ms []Maker) (lo, hi int) {
	lo, hi = minWindow, c.env.windowCeiling(ms)
	cc, ok := c.j.(CPUCoster)
	if !ok || c.env.Config.Window > 0 {
		return lo, hi
	}
	predicted, _, measured := cc.CPUPerSample()
	batch := max(predicted, measured) * float64(c.j.BatchSize())
	if !(batch > 0) || math.IsInf(batch, 0) {
		return lo, hi
	}
	// The workers the leases keep busy: each ready maker's, counted as
	// the local executor's (a peer's are not known here).
	n := float64(max(readyMakers(ms), 1) * max(c.env.Config.Workers, 1))
	cpuLo := math.Ceil(lookaheadMinCPU * n / batch)
	cpuHi := max(math.Floor(lookaheadMaxCPU*n/batch), n) // never fewer leases than workers
	hi = max(minWindow, min(hi, int(min(cpuHi, float64(hi)))))
	lo = min(hi, max(lo, int(min(cpuLo, float64(hi)))))
	return lo, hi
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

// controller is the window controller's state, and what it publishes:
// the job's window now (0 until the first lease sets it), the trainer's
// measurements, the advisor's figures and the job's status. Owned by the
// coordinator's goroutine, but for status and demand, read by any.
type controller struct {
	win int
	tel *telemetry
	// recommended is the advisor's last count of makers the trainer needs
	// (NaN before it has one): the window is not narrowed below it.
	recommended float64
	estimates   medianFilter // the advisor's figures, smoothed
	advised     stabilizer   // what is published of them
	status      atomic.Pointer[Status]
	// stages is where the job's time went (stages.go); bottleneck the
	// verdict its metric was last set to.
	stages     stageLog
	bottleneck string
	// demand is the job's demand as the controller last measured it,
	// which its leases carry.
	demand atomic.Pointer[lease.Demand]
}

// control is the window controller's decision, every controlEvery: widen
// while the job is starved above target (the GPU's idle share when a
// monitor is there, the trainer's wait otherwise: see starvation); narrow
// when the GPU is saturated (by NVML, or, without it, by the trainer not
// waiting) and the buffer stays full, so that CPU and memory go back to
// other jobs; hold otherwise. Widening is multiplicative (half again),
// narrowing one lease at a time, so a stalled job catches up within a few
// decisions and a saturated one gives back slowly. Then it publishes the
// job's status and metrics.
func (c *Coordinator) control(now time.Time, ms []Maker) {
	c.forgetGone(ms)
	c.routing.reweigh(ms, c.usable)
	snap := c.ctl.tel.snapshot(now)
	target := c.env.Config.StallTarget
	lo, hi := c.windowBounds(ms)
	old := c.window(ms)
	idle, gpuOK := c.env.GPUIdle()
	starved, signal := starvation(snap.stall, idle, gpuOK)
	saturated := starved <= target
	if gpuOK {
		saturated = idle < 0.05
	}
	// The buffer stays full: ready batches waited for the trainer's credit
	// most of the interval.
	waited := c.creditWaitFor(now)
	c.ctl.stages.creditWait(now, waited)
	full := waited >= controlEvery/2
	w := old
	switch {
	case starved > target:
		w = min(hi, w+max(1, w/2))
	case saturated && full && w-1 >= narrowFloor(c.ctl.recommended, readyMakers(ms)):
		w = max(lo, w-1)
	}
	if w != old {
		c.ctl.win = w
		decision := "widen"
		if w < old {
			decision = "narrow"
		}
		c.env.Metrics.WindowDecisions.WithLabelValues(decision).Inc()
		c.log.Debug("window", "decision", decision, "from", old, "to", w, "starvation", round3(starved), "signal", signal,
			"wait", round3(snap.stall), "recommended", c.ctl.recommended, "gpu_idle", gpuIdleOrNaN(idle, gpuOK), "buffer_full", full)
	}
	c.pool.shrink(c.poolSize(c.window(ms)))
	// Executors share their cores by this starvation too (the stall
	// schedule), locally and, on workers, through the leases' demand.
	d := lease.Demand{Stall: starved}
	if snap.stepPerBatch > 0 {
		d.Work = snap.stepPerBatch / float64(c.j.BatchSize())
	}
	c.ctl.demand.Store(&d)
	c.publish(now, snap, ms, idle, gpuOK)
}

// narrowFloor is the narrowest window that still gives a lease to every
// maker the trainer needs: the advisor's last count of makers (never more
// than are ready). Narrower, the makers it leaves idle are missed at once
// and the stall comes back (a trainer faster than one maker, served by
// several). 1 when the advisor has no figure yet.
func narrowFloor(recommended float64, ready int) int {
	if math.IsNaN(recommended) || recommended < 1 {
		return 1
	}
	return max(1, min(int(recommended), ready))
}

// publish stores the job's status for Status and sets its metrics.
func (c *Coordinator) publish(now time.Time, snap telemetrySnap, ms []Maker, idle float64, gpuOK bool) {
	lo, hi := c.windowBounds(ms)
	window := c.window(ms)
	js := &Status{
		ID: c.name, Dataset: c.j.Dataset(), Rank: c.j.Rank(), WorldSize: c.j.World(), Epoch: c.table.cur.epoch,
		ImagesPerSecond: snap.imagesPerSec, BytesPerSecond: snap.bytesPerSec, InputStallRatio: snap.stall,
		GPUIdleRatio: -1, Window: window, WindowMin: lo, WindowMax: hi,
		Buffered: len(c.table.ready), Shuffle: c.j.Shuffle(),
	}
	if gpuOK {
		js.GPUIdleRatio = idle
	}
	if cc, ok := c.j.(CPUCoster); ok {
		js.PredictedCPU, js.WorstCPU, js.MeasuredCPU = cc.CPUPerSample()
	}
	js.Starvation, js.StarvationSignal = starvation(snap.stall, idle, gpuOK)
	in := adviceInput{
		target: c.env.Config.StallTarget, starved: js.Starvation, delivered: snap.batchesPerSec,
		waited: snap.stall > 0, bytes: snap.bytesPerSec, starting: snap.starting,
	}
	local := 0.0 // the coordinator's own executor, one of the makers counted
	for _, m := range ms {
		if !m.Remote() {
			local = 1
		}
		st := c.makers.stats[m]
		mst := MakerStatus{Name: m.Name(), Ready: m.Ready()}
		var share float64
		if st != nil {
			mst.BatchesPerSecond, mst.InFlight = st.throughput(now), st.inflight
			mst.BusyBatchesPerSecond, share = st.busyRate(now)
			mst.BusyRatio = share
			mst.FailuresInARow = st.fails
			if st.fails > 0 && st.retryAt.After(now) {
				mst.BackoffSeconds = st.retryAt.Sub(now).Seconds()
			}
		}
		switch {
		case c.makers.refused[m] != nil:
			mst.Unavailable = truncate("refused the job: "+c.makers.refused[m].Error(), 256)
		case c.env.Verifier.Why(m) != nil:
			mst.Unavailable = truncate("quarantined: "+c.env.Verifier.Why(m).Error(), 256)
		case !m.Ready():
			if w, ok := m.(whyNot); ok && w.Unavailable() != nil {
				mst.Unavailable = truncate(w.Unavailable().Error(), 256)
			}
		}
		js.Makers = append(js.Makers, mst)
		if c.usable(m) {
			in.makers++
			in.busyRates = append(in.busyRates, mst.BusyBatchesPerSecond)
			in.busyShare += share
			// A maker with room while leases were fewer than the window:
			// the makers were not what held the trainer up.
			in.spare = in.spare || m.Free() > 0 && c.table.inFlight() < window && len(c.table.ready) > 0
		}
	}
	if in.makers > 0 {
		in.busyShare /= float64(in.makers)
	}
	raw, advice := advise(in)
	js.WorkersRecommended, js.Advice = c.ctl.advised.add(now, c.ctl.estimates.add(now, raw)), advice
	c.ctl.recommended = js.WorkersRecommended
	c.judge(now, snap, js, ms, idle, gpuOK)
	c.ctl.status.Store(js)
	c.publishStages(js)

	m := c.env.Metrics
	m.StallRatio.WithLabelValues(c.j.Dataset(), c.name).Set(snap.stall)
	m.Window.WithLabelValues(c.name).Set(float64(js.Window))
	m.Buffered.WithLabelValues(c.name).Set(float64(js.Buffered))
	if _, ok := c.j.(CPUCoster); ok {
		m.PredictedCPU.WithLabelValues(c.name).Set(js.PredictedCPU)
		if js.MeasuredCPU > 0 {
			m.MeasuredCPU.WithLabelValues(c.name).Set(js.MeasuredCPU)
		}
	}
	if gpuOK {
		m.GPUIdle.WithLabelValues(c.name).Set(idle)
	} else {
		m.GPUIdle.DeleteLabelValues(c.name) // unknown, not NaN
	}
	if !math.IsNaN(js.WorkersRecommended) {
		m.WorkersRecommended.WithLabelValues(c.name).Set(js.WorkersRecommended)
		m.PeersRecommended.WithLabelValues(c.name).Set(max(0, js.WorkersRecommended-local))
	}
}

// dropMetrics deletes the job's series when it ends.
func (c *Coordinator) dropMetrics() {
	m := c.env.Metrics
	m.StallRatio.DeleteLabelValues(c.j.Dataset(), c.name)
	m.Window.DeleteLabelValues(c.name)
	m.Buffered.DeleteLabelValues(c.name)
	m.PredictedCPU.DeleteLabelValues(c.name)
	m.MeasuredCPU.DeleteLabelValues(c.name)
	m.GPUIdle.DeleteLabelValues(c.name)
	m.WorkersRecommended.DeleteLabelValues(c.name)
	m.PeersRecommended.DeleteLabelValues(c.name)
	c.dropStageMetrics()
}

func gpuIdleOrNaN(idle float64, ok bool) float64 {
	if !ok {
		return math.NaN()
	}
	return idle
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// truncate shortens a maker's reason for a status or a message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
