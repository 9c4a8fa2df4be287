package server

import (
	"math"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// control is the window controller's decision, every controlEvery: widen
// while the job is starved above target (the GPU's idle share when a
// monitor is there, the trainer's wait otherwise: see starvation); narrow
// when the GPU is saturated (by NVML, or, without it, by the trainer not
// waiting) and the buffer stays full, so that CPU and memory go back to
// other jobs; hold otherwise. Widening is multiplicative (half again),
// narrowing one lease at a time, so a stalled job catches up within a few
// decisions and a saturated one gives back slowly. Then it publishes the
// job's status and metrics.
func (c *coordinator) control(now time.Time, ms []maker) {
	c.forgetGone(ms)
	snap := c.tel.snapshot(now)
	target := c.env.cfg.StallTarget
	lo, hi := c.bounds(ms)
	old := c.window(ms)
	idle, gpuOK := c.env.gpuIdle()
	starved, signal := starvation(snap.stall, idle, gpuOK)
	saturated := starved <= target
	if gpuOK {
		saturated = idle < 0.05
	}
	// The buffer stays full: ready batches waited for the trainer's credit
	// most of the interval.
	full := c.starvedFor(now) >= controlEvery/2
	w := old
	switch {
	case starved > target:
		w = min(hi, w+max(1, w/2))
	case saturated && full && w-1 >= narrowFloor(c.recommended, readyMakers(ms)):
		w = max(lo, w-1)
	}
	if w != old {
		c.win = w
		decision := "widen"
		if w < old {
			decision = "narrow"
		}
		c.env.m.windowDecisions.WithLabelValues(decision).Inc()
		c.log.Debug("window", "decision", decision, "from", old, "to", w, "starvation", round3(starved), "signal", signal,
			"wait", round3(snap.stall), "recommended", c.recommended, "gpu_idle", gpuIdleOrNaN(idle, gpuOK), "buffer_full", full)
	}
	c.shrinkPool(ms)
	// Workers share their cores by this starvation too (the stall
	// schedule), locally and through the leases' demand.
	d := pipeline.JobDemand{Stall: starved}
	if snap.stepPerBatch > 0 {
		d.Work = snap.stepPerBatch / float64(c.j.spec.GetBatchSize())
	}
	c.demand.Store(&d)
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

// shrinkPool gives free buffers beyond the window's pool back to the
// memory budget, so a job that narrowed leaves the memory to the jobs that
// stall.
func (c *coordinator) shrinkPool(ms []maker) {
	pool := c.pool(c.window(ms))
	for c.buffers > max(pool, reservedBuffers) && len(c.free) > 0 {
		c.drop(c.free[len(c.free)-1])
		c.free = c.free[:len(c.free)-1]
		c.buffers--
	}
}

// publish stores the job's status for Status and sets its metrics.
func (c *coordinator) publish(now time.Time, snap telemetrySnap, ms []maker, idle float64, gpuOK bool) {
	lo, hi := c.bounds(ms)
	window := c.window(ms)
	js := &stokerv1.JobStatus{
		Id: c.name, Dataset: c.j.name, Rank: uint32(c.j.rank), WorldSize: uint32(c.j.world), Epoch: c.cur.epoch,
		ImagesPerSecond: snap.imagesPerSec, BytesPerSecond: snap.bytesPerSec, InputStallRatio: snap.stall,
		GpuIdleRatio: -1, Window: uint32(window), WindowMin: uint32(lo), WindowMax: uint32(hi),
		Buffered: uint32(len(c.ready)), Shuffle: c.j.shuffle.String(),
	}
	if gpuOK {
		js.GpuIdleRatio = idle
	}
	js.Starvation, js.StarvationSignal = starvation(snap.stall, idle, gpuOK)
	in := adviceInput{
		target: c.env.cfg.StallTarget, starved: js.Starvation, delivered: snap.batchesPerSec,
		waited: snap.stall > 0, bytes: snap.bytesPerSec, starting: snap.starting,
	}
	local := 0.0 // the coordinator's own executor, one of the makers counted
	for _, m := range ms {
		if _, ok := m.(*localMaker); ok {
			local = 1
		}
		st := c.stats[m]
		mst := &stokerv1.MakerStatus{Name: m.Name(), Ready: m.Ready()}
		var share float64
		if st != nil {
			mst.BatchesPerSecond, mst.InFlight = st.throughput(now), uint32(st.inflight)
			mst.BusyBatchesPerSecond, share = st.busyRate(now)
			mst.BusyRatio = share
		}
		switch {
		case c.refused[m] != nil:
			mst.Unavailable = truncate("refused the job: "+c.refused[m].Error(), 256)
		case c.env.verify.why(m) != nil:
			mst.Unavailable = truncate("quarantined: "+c.env.verify.why(m).Error(), 256)
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
			in.spare = in.spare || m.Free() > 0 && len(c.leases) < window && len(c.ready) > 0
		}
	}
	if in.makers > 0 {
		in.busyShare /= float64(in.makers)
	}
	raw, advice := advise(in)
	js.WorkersRecommended, js.Advice = c.advised.add(now, c.estimates.add(now, raw)), advice
	c.recommended = js.WorkersRecommended
	c.status.Store(js)

	m := c.env.m
	m.stallRatio.WithLabelValues(c.j.name, c.name).Set(snap.stall)
	m.window.WithLabelValues(c.name).Set(float64(js.Window))
	m.buffered.WithLabelValues(c.name).Set(float64(js.Buffered))
	if gpuOK {
		m.gpuIdle.WithLabelValues(c.name).Set(idle)
	} else {
		m.gpuIdle.DeleteLabelValues(c.name) // unknown, not NaN
	}
	if !math.IsNaN(js.WorkersRecommended) {
		m.workersRecommended.WithLabelValues(c.name).Set(js.WorkersRecommended)
		m.peersRecommended.WithLabelValues(c.name).Set(max(0, js.WorkersRecommended-local))
	}
}

// dropMetrics deletes the job's series when it ends.
func (c *coordinator) dropMetrics() {
	m := c.env.m
	m.stallRatio.DeleteLabelValues(c.j.name, c.name)
	m.window.DeleteLabelValues(c.name)
	m.buffered.DeleteLabelValues(c.name)
	m.gpuIdle.DeleteLabelValues(c.name)
	m.workersRecommended.DeleteLabelValues(c.name)
	m.peersRecommended.DeleteLabelValues(c.name)
}

func gpuIdleOrNaN(idle float64, ok bool) float64 {
	if !ok {
		return math.NaN()
	}
	return idle
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
