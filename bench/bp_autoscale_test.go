package bench

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/localnet"
)

// TestBenchAutoscale runs a tiny `stoker bench backpressure --scenario
// autoscale`: a simulated GPU that two workers just saturate, the HPA-like
// loop every 2 s, an --advise-window of 3 s, runs of 20 s from 1 worker and
// from 3. It checks the harness, not the timing: the loop followed the
// published recommendation at every step, its workers joined the
// coordinator through the DNS name, it scaled up from 1 and down from 3,
// and the report and plots are whole. Whether and when the runs settled is
// the benchmark's to report.
func TestBenchAutoscale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers")
	}
	if _, err := localnet.FreePortOn("127.0.0.2", "127.0.0.3", "127.0.0.4"); err != nil {
		t.Fatalf("the scenario's workers listen on 127.0.0.2 and on: %v", err)
	}
	plots := filepath.Join(t.TempDir(), "plots")
	const batch, rate, maxReplicas = 8, 10, 4
	var rep bpReport
	runErr := benchReport(t, 8*time.Minute, &rep, "backpressure", "--scenario", "autoscale", "--autoscale-starts", "1,3",
		"--autoscale-seconds", "20", "--hpa-period", "2s", "--advise-window", "3s", "--max-replicas", "4",
		"--worker-rate", "10", "--gpu-ips", "140", "--n", "256", "--batch", "8", "--prefetch", "2", "--plots", plots, "--json")
	if runErr != nil || len(rep.Errors) > 0 {
		t.Errorf("%v, errors %q", runErr, rep.Errors)
	}
	a := rep.Autoscale
	if a == nil || rep.Slow != nil || rep.Fast != nil || rep.Two != nil {
		t.Fatalf("report: autoscale %v, slow %v, fast %v, two %v; want autoscale alone", a, rep.Slow, rep.Fast, rep.Two)
	}
	// 140 images/s over workers of 10 batches of 8: 1.75 workers' worth.
	if a.Needed != 2 || a.WorkerImagesPerSec != rate*batch || a.GPUImagesPerSec != 140 || a.MaxReplicas != maxReplicas || len(a.Runs) != 2 {
		t.Fatalf("autoscale: needed %d, worker %v images/s, GPU %v images/s, max %d, %d runs", a.Needed, a.WorkerImagesPerSec, a.GPUImagesPerSec, a.MaxReplicas, len(a.Runs))
	}
	for i, run := range a.Runs {
		start := []int{1, 3}[i]
		if run.Start != start || len(run.Steps) < 2 || len(run.Samples) < 5 {
			t.Errorf("run %d: from %d, %d steps, %d samples", i, run.Start, len(run.Steps), len(run.Samples))
			continue
		}
		// The loop follows the metric: each step starts from what the one
		// before decided, and decides the published recommendation,
		// bounded, or holds while none is published.
		replicas, published := start, false
		for _, st := range run.Steps {
			want := st.Replicas
			if st.Recommended >= 0 {
				published = true
				want = min(max(int(math.Ceil(st.Recommended-1e-9)), 1), maxReplicas)
			}
			if st.Replicas != replicas || st.Desired != want {
				t.Errorf("from %d, step at %.1f s: replicas %d (want %d), recommended %v, desired %d (want %d)",
					start, st.T, st.Replicas, replicas, st.Recommended, st.Desired, want)
			}
			if st.GPUIdle < 0 || st.GPUIdle > 1 || st.Wait < 0 || st.Wait > 1 || st.ImagesPerS < 0 {
				t.Errorf("from %d, step at %.1f s: %+v", start, st.T, st)
			}
			replicas = st.Desired
		}
		if !published {
			t.Errorf("from %d: no step saw a published recommendation", start)
		}
		if run.Final != replicas {
			t.Errorf("from %d: final %d, the last step decided %d", start, run.Final, replicas)
		}
		// Up from 1 (the GPU wants 1.75 workers), down from 3 (fewer would
		// do): the loop acted on the advice both ways.
		switch moved := replicas - start; {
		case start == 1 && moved <= 0, start == 3 && moved >= 0:
			t.Errorf("from %d: ended at %d workers; want the loop to have moved towards %d", start, replicas, a.Needed)
		}
		// The workers it started joined the coordinator through the DNS
		// name, and those it stopped left it: some sample has as many
		// ready as the loop then ran, a count other than the start. (Not
		// necessarily the final count: on a loaded machine the loop may
		// overshoot and make its last change at the run's end, with no
		// sample after it; when it settles is the benchmark's verdict.)
		joined := false
		for _, s := range run.Samples {
			if s.Replicas < 1 || s.Replicas > maxReplicas || s.GPUIdle < 0 || s.GPUIdle > 1 || s.PeersReady > maxReplicas {
				t.Errorf("from %d, sample at %.1f s: %+v", start, s.T, s)
			}
			joined = joined || s.Replicas != start && s.PeersReady == float64(s.Replicas)
		}
		if !joined {
			t.Errorf("from %d: no sample with a count of workers other than %d all ready (final %d)", start, start, run.Final)
		}
		path := rep.Plots[map[int]string{1: "autoscale-from1", 3: "autoscale-from3"}[start]]
		if path != filepath.Join(plots, map[int]string{1: "backpressure-autoscale-from1.png", 3: "backpressure-autoscale-from3.png"}[start]) {
			t.Errorf("from %d: plot %q", start, path)
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
			t.Errorf("plot from %d: %v, %dx%d", start, err, cfg.Width, cfg.Height)
		}
	}
}
