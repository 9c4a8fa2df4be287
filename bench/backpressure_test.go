package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestBenchBackpressure runs `stoker bench backpressure` briefly (scenarios
// slow and fast, 3 s phases, a tiny synthetic dataset) and checks its JSON
// for structure and its plots for existence. What the figures show is the
// benchmark's to report, not this test's to judge.
func TestBenchBackpressure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers")
	}
	plots := filepath.Join(t.TempDir(), "plots")
	const seconds, batch = 3, 8
	var rep bpReport
	runErr := benchReport(t, 5*time.Minute, &rep, "backpressure", "--scenario", "slow,fast", "--seconds", "3",
		"--n", "40", "--batch", "8", "--prefetch", "2", "--plots", plots, "--json")
	if runErr != nil || len(rep.Errors) > 0 {
		t.Errorf("%v, errors %q", runErr, rep.Errors)
	}
	if rep.DatasetSize != 40 || !rep.Synthetic || rep.BatchSize != batch || rep.Seconds != seconds || !slices.Equal(rep.Scenarios, []string{"slow", "fast"}) {
		t.Errorf("report header: dataset size %d, synthetic %v, batch %d, %v s, scenarios %v", rep.DatasetSize, rep.Synthetic, rep.BatchSize, rep.Seconds, rep.Scenarios)
	}
	if rep.Two != nil {
		t.Errorf("scenario two ran: %+v", rep.Two)
	}

	// checkRun checks a run's phases and samples.
	checkRun := func(r *bpRun, phases, procs []string) {
		t.Helper()
		if r == nil {
			t.Fatal("no run")
		}
		var names []string
		for _, ph := range r.Phases {
			names = append(names, ph.Name)
			// Processes started during a phase (peer B) are in the next.
			// A phase lasts at least its --seconds; how long past them
			// it takes to end is the machine's (one that never ended
			// would run into benchReport's limit).
			if ph.Seconds < seconds-0.5 || len(ph.Jobs) != 1 || len(ph.Procs) < 3 || len(ph.Procs) > len(procs) {
				t.Errorf("%s phase %s: %.1f s, %d jobs, %d processes", r.Name, ph.Name, ph.Seconds, len(ph.Jobs), len(ph.Procs))
				continue
			}
			if j := ph.Jobs[0]; j.Images <= 0 || j.Batches <= 0 || j.Images > j.Batches*batch || j.ImagesPerSec <= 0 {
				t.Errorf("%s phase %s: job %+v", r.Name, ph.Name, j)
			}
			if ph.ServerCores <= 0 || ph.ServerCPUPerImage <= 0 {
				t.Errorf("%s phase %s: servers' cores %v, CPU per image %v", r.Name, ph.Name, ph.ServerCores, ph.ServerCPUPerImage)
			}
		}
		if !slices.Equal(names, phases) || !slices.Equal(r.Procs, procs) || !slices.Equal(r.Jobs, []string{"trainer"}) {
			t.Errorf("%s: phases %v (want %v), processes %v (want %v), jobs %v", r.Name, names, phases, r.Procs, procs, r.Jobs)
		}
		// A sample every 250 ms, as the machine allows: some in every
		// phase (how many is the machine's).
		for _, ph := range phases {
			if !slices.ContainsFunc(r.Samples, func(s bpSample) bool { return s.Phase == ph }) {
				t.Errorf("%s: no sample in phase %s (%d samples)", r.Name, ph, len(r.Samples))
			}
		}
		published := 0
		for i, s := range r.Samples {
			if i > 0 && s.T < r.Samples[i-1].T || !slices.Contains(phases, s.Phase) || len(s.Jobs) != 1 || len(s.Procs) < 3 {
				t.Errorf("%s sample %d: %+v", r.Name, i, s)
				continue
			}
			if j := s.Jobs[0]; j.Published {
				published++
				if j.Window < 1 || j.Stall < 0 || j.Stall > 1 || j.Buffered < 0 || j.ImagesPerSec < 0 {
					t.Errorf("%s sample %d: job %+v", r.Name, i, j)
				}
			}
			for _, p := range s.Procs {
				if p.Cores < 0 || p.RSSBytes < 0 {
					t.Errorf("%s sample %d: process %+v", r.Name, i, p)
				}
			}
		}
		if published < len(r.Samples)/2 {
			t.Errorf("%s: the job's gauges published in %d of %d samples", r.Name, published, len(r.Samples))
		}
	}

	s := rep.Slow
	if s == nil {
		t.Fatal("no slow result")
	}
	checkRun(s.Run, []string{"saturated", "slow"}, []string{"trainer", "machine", "server"})
	if s.SaturatedImagesPerSec <= 0 || s.SlowImagesPerSec <= 0 || s.SaturatedCPUPerImage <= 0 || s.SlowCPUPerImage <= 0 ||
		s.CPUPerImageRatio <= 0 || s.ExpectedSlowCores <= 0 || s.StepMs != 100 || s.RSSLastHalfMaxMiB <= 0 {
		t.Errorf("slow: %+v", *s)
	}
	// A trainer stepping 100 ms per batch of 8 takes at most 80 images/s.
	if s.SlowImagesPerSec > 1.1*1000/100*batch {
		t.Errorf("slow phase: %.1f images/s, more than a 100 ms step allows", s.SlowImagesPerSec)
	}

	f := rep.Fast
	if f == nil {
		t.Fatal("no fast result")
	}
	checkRun(f.Run, []string{"A alone", "A+B"}, []string{"trainer", "machine", "peer A", "coordinator", "peer B"})
	if f.StallBefore < 0 || f.MakersBefore != 1 || f.ImagesPerSecBefore <= 0 || f.BStarted < seconds || f.StepMs != 5 {
		t.Errorf("fast: %+v", *f)
	}
	started := false
	for _, e := range f.Run.Events {
		started = started || e.What == "peer B started"
	}
	if !started {
		t.Errorf("fast: events %+v, want peer B started", f.Run.Events)
	}

	for _, sc := range []string{"slow", "fast"} {
		path := rep.Plots[sc]
		if path != filepath.Join(plots, "backpressure-"+sc+".png") {
			t.Errorf("plot %s: %q", sc, path)
			continue
		}
		in, err := os.Open(path)
		if err != nil {
			t.Error(err)
			continue
		}
		cfg, err := png.DecodeConfig(in)
		in.Close()
		if err != nil || cfg.Width != 1000 || cfg.Height < 500 {
			t.Errorf("plot %s: %v, %dx%d", sc, err, cfg.Width, cfg.Height)
		}
	}
}
