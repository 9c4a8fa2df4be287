package bench

import (
	"testing"
	"time"
)

// TestBenchLoad runs `stoker bench load` briefly (4 streams, 2 of them
// slow, 4 s phases, a tiny synthetic dataset) and checks its JSON for
// structure and correctness: every stream delivered batches without an
// unexpected error, the server went back to its baseline goroutines and
// open streams, and its RSS was sampled. Speed is the benchmark's to
// report, not this test's to judge.
func TestBenchLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server under load")
	}
	const streams, slow, batch = 4, 2, 8
	var rep loadReport
	if err := benchReport(t, 5*time.Minute, &rep, "load", "--streams", "4", "--slow", "2", "--seconds", "4",
		"--slow-step", "100ms", "--n", "40", "--batch", "8", "--prefetch", "2", "--workers", "1", "--json"); err != nil {
		t.Error(err)
	}

	if !rep.OK || len(rep.Errors) != 0 || rep.SampleErrors != 0 {
		t.Errorf("ok %v, unexpected errors %q, %d sample errors", rep.OK, rep.Errors, rep.SampleErrors)
	}
	if rep.DatasetSize != 40 || !rep.Synthetic || rep.Streams != streams || rep.Slow != slow || rep.Rounds != 1 {
		t.Errorf("report header: dataset size %d, synthetic %v, %d streams, %d slow, %d rounds", rep.DatasetSize, rep.Synthetic, rep.Streams, rep.Slow, rep.Rounds)
	}
	if len(rep.Phases) != 2 || rep.Phases[0].Name != "A" || rep.Phases[1].Name != "B" {
		t.Fatalf("phases %+v, want A then B", rep.Phases)
	}
	for _, ph := range rep.Phases {
		wantStreams, wantSlow := streams-slow, 0
		if ph.Name == "B" {
			wantStreams, wantSlow = streams, slow
		}
		if len(ph.Streams) != wantStreams {
			t.Errorf("phase %s: %d streams, want %d", ph.Name, len(ph.Streams), wantStreams)
			continue
		}
		// At least its --seconds; how long past them its streams take to
		// stop is the machine's (streams that never stopped would run
		// into benchReport's limit).
		if ph.Seconds < 3.5 {
			t.Errorf("phase %s lasted %.1f s, want at least 4", ph.Name, ph.Seconds)
		}
		nSlow := 0
		seeds := map[uint64]bool{}
		for _, s := range ph.Streams {
			if s.Slow {
				nSlow++
			}
			seeds[s.Seed] = true
			if s.Images <= 0 || s.Batches <= 0 || s.Images > s.Batches*batch || s.Error != "" {
				t.Errorf("phase %s stream %+v: want batches and no error", ph.Name, s)
			}
			if s.Slow && s.Slept <= 0 {
				t.Errorf("phase %s slow stream %d never slept", ph.Name, s.Index)
			}
		}
		if nSlow != wantSlow || len(seeds) != wantStreams {
			t.Errorf("phase %s: %d slow streams (want %d), %d distinct seeds (want %d)", ph.Name, nSlow, wantSlow, len(seeds), wantStreams)
		}
		if ph.FastImagesPerSec <= 0 || (wantSlow > 0) != (ph.SlowImagesPerSec > 0) || ph.ServerCores <= 0 || ph.RSSMax <= 0 {
			t.Errorf("phase %s figures: %+v", ph.Name, ph)
		}
		if g := ph.GC; g == nil || g.Error != "" || g.Live <= 0 || g.NextGC <= g.Live || g.RSS <= 0 || g.Ceiling <= 0 {
			t.Errorf("phase %s: forced GC %+v", ph.Name, g)
		}
		// The goroutines checked here, not only through OK: a leak must
		// name its numbers.
		if ph.After.StreamsActive != 0 || ph.After.Goroutines > rep.Baseline.Goroutines+float64(rep.GoroutineMargin) {
			t.Errorf("phase %s: 2 s after its streams closed the server has %v goroutines (baseline %v) and %v streams open",
				ph.Name, ph.After.Goroutines, rep.Baseline.Goroutines, ph.After.StreamsActive)
		}
	}
	if rep.Baseline.Goroutines <= 0 || rep.Baseline.StreamsActive != 0 || !rep.BackToBaseline {
		t.Errorf("baseline %+v, back to baseline %v", rep.Baseline, rep.BackToBaseline)
	}
	if rep.FastRatio <= 0 {
		t.Errorf("fast B/A ratio %v", rep.FastRatio)
	}
	r := rep.RSS
	if len(r.Samples) < 6 || r.Max <= 0 || r.MaxPhase == "" || r.FlatPhase != "B1" || r.FirstHalfMax <= 0 || r.LastHalfMax <= 0 {
		t.Errorf("RSS: %d samples, max %d in %q, flatness over %q: %d then %d", len(r.Samples), r.Max, r.MaxPhase, r.FlatPhase, r.FirstHalfMax, r.LastHalfMax)
	}
	for i, s := range r.Samples {
		if s.Bytes <= 0 || s.Phase == "" || i > 0 && s.T < r.Samples[i-1].T {
			t.Errorf("RSS sample %d: %+v", i, s)
		}
	}
}
