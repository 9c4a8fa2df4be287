package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
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
	bin := stokerBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n, epochs, batch = 40, 2, 8
	cmd := exec.CommandContext(ctx, bin, "bench", "scale", "--peers", "1,2", "--rounds", "1", "--n", "40",
		"--epochs", "2", "--batch", "8", "--prefetch", "4", "--timeout", "90s", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench scale: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := bytes.Split(bytes.TrimSpace(stdout.Bytes()), []byte("\n"))
	var rep scaleReport
	if err := json.Unmarshal(lines[len(lines)-1], &rep); err != nil {
		t.Fatalf("the last line is not the JSON report: %v\n%s", err, stdout.String())
	}
	t.Logf("\n%s", stdout.String())
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
