package bench

// `stoker bench backpressure`: the plots, built from the samples.

import (
	"fmt"
	"image/color"
	"math"
)

// seriesOf is f over the samples; NaN where it is not ok.
func seriesOf(ss []bpSample, t0 float64, f func(bpSample) (float64, bool)) (xs, ys []float64) {
	for _, s := range ss {
		v, ok := f(s)
		if !ok {
			v = math.NaN()
		}
		xs, ys = append(xs, s.T-t0), append(ys, v)
	}
	return xs, ys
}

func jobField(i int, f func(bpJobSample) float64) func(bpSample) (float64, bool) {
	return func(s bpSample) (float64, bool) {
		if i >= len(s.Jobs) || !s.Jobs[i].Published {
			return 0, false
		}
		return f(s.Jobs[i]), true
	}
}

func procField(name string, f func(bpProcSample) float64) func(bpSample) (float64, bool) {
	return func(s bpSample) (float64, bool) {
		for _, p := range s.Procs {
			if p.Proc == name {
				return f(p), p.RSSBytes > 0
			}
		}
		return 0, false
	}
}

func mkSeries(name string, ss []bpSample, t0 float64, f func(bpSample) (float64, bool)) plotSeries {
	xs, ys := seriesOf(ss, t0, f)
	return plotSeries{Name: name, X: xs, Y: ys}
}

var plotGrey = color.RGBA{150, 150, 150, 255}

// targetSeries is the stall target, a dashed grey line over the run.
func targetSeries(ss []bpSample, t0, target float64) plotSeries {
	s := plotSeries{Name: fmt.Sprintf("target %g", target), Color: plotGrey, Dashed: true}
	if len(ss) > 0 {
		s.X = []float64{ss[0].T - t0, ss[len(ss)-1].T - t0}
		s.Y = []float64{target, target}
	}
	return s
}

// procPanels are the runs' CPU cores and RSS per process.
func procPanels(run *bpRun) []plotPanel {
	cores := plotPanel{YLabel: "CPU cores"}
	rss := plotPanel{YLabel: "RSS MiB"}
	for _, p := range run.Procs {
		c := mkSeries(p, run.Samples, 0, procField(p, func(q bpProcSample) float64 { return q.Cores }))
		if p == bpMachine {
			c.Name, c.Color, c.Dashed = "machine (all)", plotGrey, true
			cores.Series = append(cores.Series, c)
			continue
		}
		m := mkSeries(p, run.Samples, 0, procField(p, func(q bpProcSample) float64 { return mib(q.RSSBytes) }))
		c.Color = plotPalette[len(rss.Series)%len(plotPalette)]
		m.Color = c.Color
		cores.Series = append(cores.Series, c)
		rss.Series = append(rss.Series, m)
	}
	return []plotPanel{cores, rss}
}

func (b *bpBench) slowFigure(res *bpSlowResult) *plotFigure {
	run := res.Run
	ss := run.Samples
	f := &plotFigure{
		Title: fmt.Sprintf("bench backpressure slow: one server (--workers %d); the trainer takes batches as fast as they come, then steps %v per batch",
			res.ServerWorkers, b.o.slowStep),
		XLabel: "seconds since the trainer started",
		Panels: []plotPanel{
			{YLabel: "batches", Series: []plotSeries{
				mkSeries("window", ss, 0, jobField(0, func(j bpJobSample) float64 { return j.Window })),
				dashed(mkSeries("buffered batches", ss, 0, jobField(0, func(j bpJobSample) float64 { return j.Buffered }))),
			}},
			{YLabel: "input stall ratio", YMin: 0, YMax: 1, Series: []plotSeries{
				mkSeries("stall (server, 3 s)", ss, 0, jobField(0, func(j bpJobSample) float64 { return j.Stall })),
				targetSeries(ss, 0, b.o.stallTarget),
			}},
			{YLabel: "images/s", Series: []plotSeries{
				mkSeries("delivered", ss, 0, jobField(0, func(j bpJobSample) float64 { return j.ImagesPerSec })),
			}},
		},
	}
	f.Panels = append(f.Panels, procPanels(run)...)
	f.XMax = run.end()
	for _, ph := range run.Phases[1:] {
		f.Marks = append(f.Marks, plotMark{X: ph.Start, Label: fmt.Sprintf("%s: steps %v", ph.Name, b.o.slowStep)})
	}
	return f
}

func (b *bpBench) fastFigure(res *bpFastResult) *plotFigure {
	run := res.Run
	ss := run.Samples
	f := &plotFigure{
		Title:  fmt.Sprintf("bench backpressure fast: coordinator + peer A (--workers 1), trainer steps %v per batch; peer B starts half-way", b.o.fastStep),
		XLabel: "seconds since the trainer started",
		Panels: []plotPanel{
			{YLabel: "batches", Series: []plotSeries{
				mkSeries("window", ss, 0, jobField(0, func(j bpJobSample) float64 { return j.Window })),
				dashed(mkSeries("buffered batches", ss, 0, jobField(0, func(j bpJobSample) float64 { return j.Buffered }))),
			}},
			{YLabel: "makers", Series: []plotSeries{
				mkSeries("workers_recommended", ss, 0, func(s bpSample) (float64, bool) {
					if len(s.Jobs) == 0 || !s.Jobs[0].Published || s.Jobs[0].Recommended < 0 {
						return 0, false
					}
					return s.Jobs[0].Recommended, true
				}),
				mkSeries("peers ready", ss, 0, func(s bpSample) (float64, bool) { return s.PeersReady, true }),
			}},
			{YLabel: "input stall ratio", YMin: 0, YMax: 1, Series: []plotSeries{
				mkSeries("stall (server, 3 s)", ss, 0, jobField(0, func(j bpJobSample) float64 { return j.Stall })),
				targetSeries(ss, 0, b.o.stallTarget),
			}},
			{YLabel: "images/s", Series: []plotSeries{
				mkSeries("delivered", ss, 0, jobField(0, func(j bpJobSample) float64 { return j.ImagesPerSec })),
			}},
		},
	}
	f.Panels = append(f.Panels, procPanels(run)...)
	f.XMax = run.end()
	for _, e := range run.Events {
		if len(run.Phases) > 0 && e.T > run.Phases[0].Start+1 {
			f.Marks = append(f.Marks, plotMark{X: e.T, Label: e.What})
		}
	}
	return f
}

func (b *bpBench) twoFigure(res *bpTwoResult) *plotFigure {
	f := &plotFigure{
		Title:  fmt.Sprintf("bench backpressure two: trainers stepping %v and %v per batch on one server (--workers %d); solid: fifo, dashed: stall", b.o.twoSteps[0], b.o.twoSteps[1], res.ServerWorkers),
		XLabel: "seconds since the trainers started",
		Panels: []plotPanel{{YLabel: "window"}, {YLabel: "input stall ratio", YMin: 0, YMax: 1}, {YLabel: "images/s"}, {YLabel: "server CPU cores"}},
		XMax:   b.o.seconds.Seconds(),
	}
	if !res.StallAvailable {
		f.Title = fmt.Sprintf("bench backpressure two: trainers stepping %v and %v per batch on one server (--workers %d); fifo only (no --schedule in this build)", b.o.twoSteps[0], b.o.twoSteps[1], res.ServerWorkers)
	}
	for k, s := range res.Schedules {
		run := s.Run
		if run == nil || len(run.Phases) == 0 {
			continue
		}
		t0 := run.Phases[0].Start
		for i, job := range run.Jobs {
			name := s.Schedule + " " + job
			c := plotPalette[i%len(plotPalette)]
			add := func(p int, f2 func(bpJobSample) float64) {
				ps := mkSeries(name, run.Samples, t0, jobField(i, f2))
				ps.Color, ps.Dashed = c, k > 0
				f.Panels[p].Series = append(f.Panels[p].Series, ps)
			}
			add(0, func(j bpJobSample) float64 { return j.Window })
			add(1, func(j bpJobSample) float64 { return j.Stall })
			add(2, func(j bpJobSample) float64 { return j.ImagesPerSec })
		}
		cpu := mkSeries(s.Schedule+" server", run.Samples, t0, procField("server", func(q bpProcSample) float64 { return q.Cores }))
		cpu.Color, cpu.Dashed = plotPalette[2], k > 0
		f.Panels[3].Series = append(f.Panels[3].Series, cpu)
	}
	return f
}

// end is when the run's last phase ended, in seconds since it began.
func (r *bpRun) end() float64 {
	if len(r.Phases) == 0 {
		return 0
	}
	return r.Phases[len(r.Phases)-1].End
}

func dashed(s plotSeries) plotSeries {
	s.Dashed = true
	return s
}
