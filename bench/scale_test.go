package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestBenchScale runs `stoker bench scale` on a tiny synthetic dataset, one
// round of the baseline, 1 and 2 peers, and checks its JSON: every run
// delivered each epoch's indices exactly once (the bench fails otherwise),
// and the figures are sane.
func TestBenchScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers")
	}
	const n, epochs, batch = 40, 2, 8
	var rep scaleReport
	if err := benchReport(t, 5*time.Minute, &rep, "scale", "--peers", "1,2", "--rounds", "1", "--n", "40",
		"--epochs", "2", "--batch", "8", "--prefetch", "4", "--timeout", "4m", "--json"); err != nil {
		t.Fatal(err)
	}
	if !rep.ExactlyOnce || rep.DatasetSize != n || !rep.Synthetic || rep.SampleErrors != 0 {
		t.Errorf("report: exactly once %v, dataset size %d, synthetic %v, %d sample errors", rep.ExactlyOnce, rep.DatasetSize, rep.Synthetic, rep.SampleErrors)
	}
	if len(rep.Runs) != 3 {
		t.Fatalf("%d runs, want 3 (baseline, 1 and 2 peers)", len(rep.Runs))
	}
	for i, r := range rep.Runs {
		wantWorkers := []int{0, 1, 2}[i]
		if r.Peers != wantWorkers || r.Images != n*epochs || r.Batches != epochs*(n/batch) || r.Seconds <= 0 || r.TrainerCPU <= 0 {
			t.Errorf("run %d: %+v; want %d peers, %d images in %d batches", i, r, wantWorkers, n*epochs, epochs*(n/batch))
		}
		if len(r.WorkerCPU) != wantWorkers || len(r.Leases) != wantWorkers {
			t.Errorf("run %d: %d workers' CPU, %d lease counts; want %d", i, len(r.WorkerCPU), len(r.Leases), wantWorkers)
		}
		leases := 0.0
		for _, l := range r.Leases {
			leases += l
		}
		if wantWorkers > 0 && leases < float64(r.Batches) {
			t.Errorf("run %d: %v leases for %d batches", i, leases, r.Batches)
		}
		if (wantWorkers == 0) != (r.ServerCPU > 0) || wantWorkers > 0 && r.workersCPU() <= 0 {
			t.Errorf("run %d: server CPU %v, workers' %v", i, r.ServerCPU, r.WorkerCPU)
		}
	}
	if rep.Baseline.ImagesPerSec <= 0 || rep.Baseline.ServerCPU <= 0 || len(rep.Sweep) != 2 {
		t.Fatalf("baseline %+v, %d sweep rows", rep.Baseline, len(rep.Sweep))
	}
	for _, row := range rep.Sweep {
		if row.ImagesPerSec <= 0 || row.WorkersCPU <= 0 || row.ProtocolOverhead <= 0 || row.EfficiencyVsLinear <= 0 {
			t.Errorf("sweep row %+v", row)
		}
	}
	if rep.Sweep[0].EfficiencyVsLinear != 1 {
		t.Errorf("1 peer's efficiency vs linear %v, want 1", rep.Sweep[0].EfficiencyVsLinear)
	}
}

// TestBenchScaleBefore: with --before, every configuration also runs with
// the other binary's servers, round by round, and the report has its
// medians and the ratios.
func TestBenchScaleBefore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers")
	}
	var rep scaleReport
	if err := benchReport(t, 5*time.Minute, &rep, "scale", "--peers", "1", "--rounds", "1", "--n", "40",
		"--batch", "8", "--prefetch", "4", "--shm", "--before", stokerBinary(t), "--timeout", "4m", "--json"); err != nil {
		t.Fatal(err)
	}
	var before []bool
	for _, r := range rep.Runs {
		before = append(before, r.Before)
	}
	if !slices.Equal(before, []bool{false, true, false, true}) || rep.Runs[1].Peers != 0 || rep.Runs[3].Peers != 1 {
		t.Fatalf("runs (before or not) %v, want each configuration twice, this binary first", before)
	}
	// CPU comes in 10 ms ticks: a tiny run's coordinator may show none.
	if rep.Before == nil || rep.Before.Baseline.ServerCPU <= 0 || len(rep.Before.Sweep) != 1 || rep.Before.Sweep[0].WorkersCPU <= 0 {
		t.Fatalf("before: %+v", rep.Before)
	}
	r := rep.AfterOverBefore
	if len(r) != 2 || r[0].ImagesPerSec <= 0 || r[0].ServerCPU <= 0 || r[1].ImagesPerSec <= 0 || r[1].WorkersCPU <= 0 {
		t.Errorf("ratios: %+v", r)
	}
}

// TestBenchScalePerf: --perf records each server process over the measured
// epochs, one file per run and process.
func TestBenchScalePerf(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers")
	}
	if err := exec.Command("perf", "record", "-q", "-o", filepath.Join(t.TempDir(), "probe.data"), "--", "true").Run(); err != nil {
		t.Skipf("perf cannot record here (%v): bench scale --perf cannot be tried", err)
	}
	bin := stokerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out, err := exec.CommandContext(ctx, bin, "bench", "scale", "--peers", "1", "--rounds", "1", "--n", "40",
		"--batch", "8", "--prefetch", "4", "--perf", dir, "--timeout", "4m").CombinedOutput()
	if err != nil {
		t.Fatalf("bench scale: %v\n%s", err, out)
	}
	for _, f := range []string{"r1-baseline-server.data", "r1-1peer-coordinator.data", "r1-1peer-worker0.data"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
