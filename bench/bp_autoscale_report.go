package bench

// `stoker bench backpressure --scenario autoscale`: sampling a run, its
// verdict, its table and its plot.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stoker-dev/stoker/internal/cpu"
)

// sample samples the run every asSampleEvery until ctx ends.
func (r *asRunner) sample(ctx context.Context) {
	tick := time.NewTicker(asSampleEvery)
	defer tick.Stop()
	lastAt, lastImages := r.start, int64(0)
	lastCPU, cpuErr := machineBusy()
	own := map[int]time.Duration{} // the bench's processes' CPU time, by pid (0: this one)
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		now := time.Now()
		s := bpASample{T: round2(now.Sub(r.start).Seconds()), Replicas: r.replicas(), Recommended: -1, ServerIdle: -1, Stall: -1, Window: -1}
		s.GPUIdle = round4(r.g.idle(now))
		s.Wait = r.waitShare()
		imgs := r.g.images.Load()
		secs := now.Sub(lastAt).Seconds()
		if secs > 0 {
			s.ImagesPerSec = round2(float64(imgs-lastImages) / secs)
		}
		if c, err := machineBusy(); err == nil && cpuErr == nil && secs > 0 {
			s.MachineCores = round3((c - lastCPU).Seconds() / secs)
			lastCPU = c
		}
		s.BenchCores = round3(r.benchCPU(own).Seconds() / secs)
		lastAt, lastImages = now, imgs
		ms, peers, rec, ok := r.scrape(ctx)
		if !ok {
			if ctx.Err() != nil {
				return
			}
		} else {
			s.PeersReady, s.Recommended = peers, rec
			if v, ok := jobSeries(ms, "stoker_gpu_idle_ratio", "bench"); ok {
				s.ServerIdle = round4(v)
			}
			if v, ok := jobSeries(ms, "stoker_input_stall_ratio", "bench"); ok {
				s.Stall = round4(v)
			}
			if v, ok := jobSeries(ms, "stoker_window", "bench"); ok {
				s.Window = v
			}
		}
		r.mu.Lock()
		r.run.Samples = append(r.run.Samples, s)
		r.mu.Unlock()
	}
}

// benchCPU is the CPU time the bench's processes (this one, the
// coordinator, the workers up) used since the last call, from their
// counters in last, which it updates; processes new since then count from
// the next call.
func (r *asRunner) benchCPU(last map[int]time.Duration) time.Duration {
	r.mu.Lock()
	ps := append([]*scaleProc{r.coord}, r.workers...)
	r.mu.Unlock()
	now := map[int]time.Duration{0: cpu.ProcessTime()}
	for _, p := range ps {
		if c, err := scaleCPU([]*scaleProc{p}); err == nil {
			now[p.cmd.Process.Pid] = c[0]
		}
	}
	var d time.Duration
	for pid, c := range now {
		if c0, ok := last[pid]; ok {
			d += c - c0
		}
	}
	clear(last)
	maps.Copy(last, now)
	return d
}

// analyze makes the run's verdict: the replicas' changes, where they
// settled and when, and the settled state.
func (r *asRunner) analyze(needed int) {
	as := r.b.o.as
	run := r.run
	cur, dir := run.Start, 0
	for _, st := range run.Steps {
		if st.Desired == cur {
			continue
		}
		d := 1
		if st.Desired < cur {
			d = -1
		}
		run.Changes++
		if dir != 0 && d != dir {
			run.Reversals++
		}
		dir, cur, run.SettledAt = d, st.Desired, st.T
	}
	run.Final = cur
	switch {
	case needed > run.Start:
		run.LimitSeconds = asUpLimit.Seconds()
	case needed < run.Start:
		run.LimitSeconds = asDownLimit.Seconds()
	}
	end := as.seconds.Seconds()
	if n := len(run.Samples); n > 0 {
		end = run.Samples[n-1].T
	}
	run.HeldSeconds = round2(end - run.SettledAt)
	// Held long enough that a fall would have shown: the server's
	// stabilization window and a period of the loop after the last change.
	held := run.HeldSeconds >= (as.adviseWindow + as.period).Seconds()
	run.Settled = run.Final == needed && run.Reversals == 0 && held && run.SettledAt <= run.LimitSeconds
	from := run.SettledAt + 2*asGPUWindow.Seconds()
	var idle, wait, ips, rec, cores []float64
	for _, s := range run.Samples {
		cores = append(cores, s.MachineCores)
		if s.T < from {
			continue
		}
		idle, wait, ips = append(idle, s.GPUIdle), append(wait, s.Wait), append(ips, s.ImagesPerSec)
		if s.Recommended >= 0 {
			rec = append(rec, s.Recommended)
		}
	}
	var busy []float64
	for _, st := range run.Steps {
		if st.T >= from && st.BusyRate > 0 {
			busy = append(busy, st.BusyRate)
		}
	}
	run.SettledGPUIdle, run.SettledWait, run.SettledImagesPerSec = medianOr(idle), medianOr(wait), medianOr(ips)
	run.SettledRecommended, run.SettledBusyRate = medianOr(rec), medianOr(busy)
	run.MachineCoresMedian = medianOr(cores)
	for _, c := range cores {
		run.MachineCoresMax = max(run.MachineCoresMax, c)
	}
	var own []float64
	for _, s := range run.Samples {
		own = append(own, s.BenchCores)
	}
	run.BenchCoresMedian = medianOr(own)
}

// medianOr is the median, rounded, or -1 of none.
func medianOr(xs []float64) float64 {
	if len(xs) == 0 {
		return -1
	}
	return round4(median(xs))
}

// print writes the scenario's tables.
func (a *bpAutoscaleResult) print(w io.Writer, rep *bpReport) {
	fmt.Fprintf(w, "\n== autoscale: workers of %g batches/s each (%g images/s: --bench-replay --bench-rate %g, one per 127.0.0.N); a simulated CUDA GPU consuming %g images/s (%.2f ms per batch of %d, %d steps of run-ahead, the trainer's own %.0f%% of a step per batch)\n",
		a.WorkerBatchesPerSec, a.WorkerImagesPerSec, a.WorkerBatchesPerSec, a.GPUImagesPerSec, a.GPUStepMs, rep.BatchSize, a.RunAhead, 100*a.LaunchShare)
	fmt.Fprintf(w, "needed: ceil(%g / %g) = %d workers (%d make %g images/s, short of the GPU's %g)\n",
		a.GPUImagesPerSec, a.WorkerImagesPerSec, a.Needed, a.Needed-1, float64(a.Needed-1)*a.WorkerImagesPerSec, a.GPUImagesPerSec)
	fmt.Fprintf(w, "coordinator --workers 0, workers by DNS name (--peer-refresh %gs), the GPU's idle share from the simulator's file; --advise-window %gs (decreases published after holding that long: the only stabilization); crops of %d px\n",
		a.PeerRefreshSeconds, a.AdviseWindowSeconds, a.CropSize)
	fmt.Fprintf(w, "HPA-like loop every %gs: replicas <- stoker_workers_recommended, bounded 1..%d; runs of %.0f s; verdict: settle on %d within %.0f s up, %.0f s down, no reversal, held >= %g s\n",
		a.HPAPeriodSeconds, a.MaxReplicas, a.SecondsPerRun, a.Needed, asUpLimit.Seconds(), asDownLimit.Seconds(), a.AdviseWindowSeconds+a.HPAPeriodSeconds)
	for _, run := range a.Runs {
		fmt.Fprintf(w, "-- from %d worker(s)\n", run.Start)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "t s\treplicas\tready\trecommended\tdesired\tGPU idle\ttrainer wait\tstarvation\timages/s\tmade b/s\tbusy b/s\tbusy ratio\t advice")
		for _, st := range run.Steps {
			fmt.Fprintf(tw, "%.0f\t%d\t%.0f\t%s\t%d\t%.3f\t%.3f\t%s\t%.0f\t%.1f\t%s\t%s\t %s\n", st.T, st.Replicas, st.PeersReady, fv("%g", st.Recommended), st.Desired,
				st.GPUIdle, st.Wait, fv("%.3f", st.Starvation), st.ImagesPerS, st.Made, fv("%.2f", nonZero(st.BusyRate)), fv("%.2f", nonZero(st.BusyRatio)), st.Advice)
		}
		tw.Flush()
		fmt.Fprintf(w, "verdict: final %d (needed %d), %d change(s), %d reversal(s), last change at %.0f s (limit %s), held %.0f s: %s\n",
			run.Final, a.Needed, run.Changes, run.Reversals, run.SettledAt, fv("%.0f s", nonZero(run.LimitSeconds)), run.HeldSeconds, metOr(run.Settled, "SETTLED", "NOT SETTLED"))
		fmt.Fprintf(w, "settled state (medians from 6 s after the last change): GPU idle %s, trainer wait %s, %s images/s, recommended %s, makers' busy rate %s batches/s; the bench's processes %s cores, the machine %s (max %.2f of %d)\n",
			fv("%.3f", run.SettledGPUIdle), fv("%.3f", run.SettledWait), fv("%.0f", run.SettledImagesPerSec), fv("%g", run.SettledRecommended), fv("%.2f", run.SettledBusyRate),
			fv("%.2f", run.BenchCoresMedian), fv("%.2f", run.MachineCoresMedian), run.MachineCoresMax, rep.CPUs)
		if run.ScrapeErrors > 0 {
			fmt.Fprintf(w, "  %d scrapes of /metrics failed\n", run.ScrapeErrors)
		}
		for _, e := range run.Errors {
			fmt.Fprintln(w, "  error: "+e)
		}
	}
	fmt.Fprintf(w, "autoscale: %s\n", metOr(a.Settled, "every run settled as required", "NOT every run settled as required"))
}

func nonZero(x float64) float64 {
	if x == 0 {
		return -1
	}
	return x
}

// figure is one run's plot: the workers (replicas, recommended, ready),
// the GPU's idle share and the trainer's wait, and the images/s.
func (a *bpAutoscaleResult) figure(run *bpAutoscaleRun, target float64) *plotFigure {
	ss := run.Samples
	series := func(name string, f func(bpASample) float64) plotSeries {
		s := plotSeries{Name: name}
		for _, x := range ss {
			v := f(x)
			if v < 0 {
				v = math.NaN()
			}
			s.X, s.Y = append(s.X, x.T), append(s.Y, v)
		}
		return s
	}
	flat := func(name string, v float64) plotSeries {
		s := plotSeries{Name: name, Color: plotGrey, Dashed: true}
		if len(ss) > 0 {
			s.X, s.Y = []float64{0, ss[len(ss)-1].T}, []float64{v, v}
		}
		return s
	}
	f := &plotFigure{
		Title: fmt.Sprintf("autoscale from %d: replicas <- workers_recommended every %gs (--advise-window %gs); workers of %g batches/s, GPU needs %d",
			run.Start, a.HPAPeriodSeconds, a.AdviseWindowSeconds, a.WorkerBatchesPerSec, a.Needed),
		XLabel: "seconds since the trainer started",
		Panels: []plotPanel{
			{YLabel: "workers", YMin: 0, YMax: float64(max(a.MaxReplicas, run.Start) + 1), Series: []plotSeries{
				series("replicas (HPA)", func(s bpASample) float64 { return float64(s.Replicas) }),
				series("recommended", func(s bpASample) float64 { return s.Recommended }),
				dashed(series("peers ready", func(s bpASample) float64 { return s.PeersReady })),
				flat(fmt.Sprintf("needed %d", a.Needed), float64(a.Needed)),
			}},
			{YLabel: "share of time", YMin: 0, YMax: 1, Series: []plotSeries{
				series("GPU idle (3 s)", func(s bpASample) float64 { return s.GPUIdle }),
				series("trainer wait (3 s)", func(s bpASample) float64 { return s.Wait }),
				flat(fmt.Sprintf("target %g", target), target),
			}},
			{YLabel: "images/s", YMin: 0, Series: []plotSeries{
				series("GPU consumed", func(s bpASample) float64 { return s.ImagesPerSec }),
				flat(fmt.Sprintf("GPU rate %g", a.GPUImagesPerSec), a.GPUImagesPerSec),
			}},
			{YLabel: "CPU cores", YMin: 0, Series: []plotSeries{
				series("the bench's processes", func(s bpASample) float64 { return s.BenchCores }),
				dashed(series("machine (others' too)", func(s bpASample) float64 { return s.MachineCores })),
			}},
		},
	}
	if len(ss) > 0 {
		f.XMax = ss[len(ss)-1].T
	}
	for _, e := range run.Events {
		if strings.HasPrefix(e.What, "HPA:") {
			label := e.What
			if _, after, ok := strings.Cut(e.What, ": "); ok {
				label, _, _ = strings.Cut(after, " (")
			}
			f.Marks = append(f.Marks, plotMark{X: e.T, Label: label})
		}
	}
	return f
}
