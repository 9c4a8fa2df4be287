package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// TestBenchScaleAffinity runs 2 peers with the coordinator's cache affinity
// on and off, 3 epochs each, and checks the per-epoch accounting in the
// JSON: every epoch's images, CPU for epoch 1 and the later ones, the home
// share counted with affinity on only, reads per image. Nothing is asserted
// on times or on how the two compare: 2 shared cores decide those.
func TestBenchScaleAffinity(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers")
	}
	// 200 images an epoch: enough CPU per epoch (about 0.1 s) that the 10 ms
	// ticks of /proc count some in each.
	const n, epochs = 200, 3
	var rep scaleReport
	if err := benchReport(t, 5*time.Minute, &rep, "scale", "--peers", "2", "--epochs", "3", "--affinity", "on,off", "--rounds", "1",
		"--n", "200", "--batch", "8", "--prefetch", "4", "--worker-coef-budget", "4000000", "--timeout", "4m", "--json"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Affinity, []string{"on", "off"}) || rep.WorkerCoefBudget != 4000000 || !rep.ExactlyOnce {
		t.Errorf("report: affinity %v, worker coef budget %d, exactly once %v", rep.Affinity, rep.WorkerCoefBudget, rep.ExactlyOnce)
	}
	var configs []string
	for _, r := range rep.Runs {
		configs = append(configs, r.name())
		if len(r.Epochs) != epochs {
			t.Fatalf("%s: %d epochs accounted, want %d: %+v", r.name(), len(r.Epochs), epochs, r.Epochs)
		}
		for i, e := range r.Epochs {
			if e.Epoch != uint64(i+1) || e.Images != n || e.Seconds <= 0 {
				t.Errorf("%s: epoch %d: %+v; want epoch %d of %d images", r.name(), i, e, i+1, n)
			}
		}
		if (r.Affinity == "off" || r.Peers == 0) && r.epochSums(0).HomeSamples > 0 {
			t.Errorf("%s: %v samples counted made at home: the counter is for affinity on", r.name(), r.epochSums(0).HomeSamples)
		}
	}
	if want := []string{"baseline", "2 peers, affinity on", "2 peers, affinity off"}; !slices.Equal(configs, want) {
		t.Fatalf("runs %q, want %q", configs, want)
	}
	if len(rep.Sweep) != 2 || rep.Sweep[0].Affinity != "on" || rep.Sweep[1].Affinity != "off" {
		t.Fatalf("sweep %+v: want 2 peers with affinity on, then off", rep.Sweep)
	}
	for _, row := range append([]scaleRow{rep.Baseline}, rep.Sweep...) {
		name := rowName(row.Peers, row.Affinity, false)
		if row.CPUPerImageEpoch1 <= 0 || row.CPUPerImageLater <= 0 || len(row.ByEpoch) != epochs {
			t.Errorf("%s: CPU per image %v in epoch 1, %v later, %d epochs: want both > 0, %d epochs", name, row.CPUPerImageEpoch1, row.CPUPerImageLater, len(row.ByEpoch), epochs)
		}
		// Every image delivered was made (and its file read) at least once.
		if row.ReadsPerImage < 1 {
			t.Errorf("%s: %v reads per image delivered, want at least 1", name, row.ReadsPerImage)
		}
	}
	if on, off := rep.Sweep[0], rep.Sweep[1]; on.HomeShare <= 0 || on.HomeShare > 1 || off.HomeShare != 0 {
		t.Errorf("home share %v with affinity on, %v with it off: want (0, 1], and 0", on.HomeShare, off.HomeShare)
	}
	if len(rep.OnOverOff) != 1 || rep.OnOverOff[0].Peers != 2 || rep.OnOverOff[0].CPUPerImageLater <= 0 {
		t.Errorf("on / off: %+v", rep.OnOverOff)
	}
}

// TestScaleSummarizeAffinity: with --affinity on,off and --before, each peer
// count has a row per affinity value side by side, on / off is their
// ratio, --before is compared with the first value, and the figures of
// the later epochs leave epoch 1 out.
func TestScaleSummarizeAffinity(t *testing.T) {
	epochs := func(cpu1, cpu2, home, away float64) []scaleEpoch {
		return []scaleEpoch{
			{Epoch: 1, Images: 100, Seconds: 1, MakersCPU: cpu1, CoordinatorCPU: 0.01, HomeSamples: 100, CoefMCUs: 1000, Reads: 110},
			{Epoch: 2, Images: 100, Seconds: 1, MakersCPU: cpu2, CoordinatorCPU: 0.01, HomeSamples: home, AwaySamples: away, CoefMCUs: 1000, CoefHits: 800, Reads: 90},
		}
	}
	run := func(peers int, affinity string, before bool, cpu1, cpu2, home, away float64) scaleRun {
		return scaleRun{Peers: peers, Round: 1, Affinity: affinity, Before: before, Images: 200, Seconds: 2,
			CoordinatorCPU: 0.02, WorkerCPU: []float64{cpu1 + cpu2}, Epochs: epochs(cpu1, cpu2, home, away)}
	}
	rep := &scaleReport{Affinity: []string{"on", "off"}, Epochs: 2, BeforeBinary: "old", Runs: []scaleRun{
		{Peers: 0, Round: 1, Images: 200, Seconds: 2, ServerCPU: 0.2, Epochs: epochs(0.1, 0.1, 0, 0)},
		{Peers: 0, Round: 1, Before: true, Images: 200, Seconds: 2, ServerCPU: 0.2, Epochs: epochs(0.1, 0.1, 0, 0)},
		run(2, "on", false, 0.1, 0.04, 90, 10),
		run(2, "off", false, 0.1, 0.08, 0, 0),
		run(2, "", true, 0.1, 0.1, 0, 0),
	}}
	rep.summarize([]int{2})
	if len(rep.Sweep) != 2 || rep.Sweep[0].Affinity != "on" || rep.Sweep[1].Affinity != "off" {
		t.Fatalf("sweep %+v", rep.Sweep)
	}
	on := rep.Sweep[0]
	near := func(x, want float64) bool { return x > want-1e-9 && x < want+1e-9 }
	// The makers' CPU is per image made (read): 110 in epoch 1, 90 after.
	if !near(on.CPUPerImageEpoch1, 0.1/110) || !near(on.CPUPerImageLater, 0.04/90) || !near(on.HomeShare, 0.9) ||
		!near(on.CoefHitShare, 0.8) || !near(on.ReadsPerImage, 1) || len(on.ByEpoch) != 2 || !near(on.ByEpoch[1].CPUPerImage, 0.04/90) ||
		!near(on.CoordinatorCPUPerImageLater, 0.0001) {
		t.Errorf("affinity on: %+v", on)
	}
	if rep.Sweep[1].HomeShare != 0 {
		t.Errorf("affinity off: home share %v, want none", rep.Sweep[1].HomeShare)
	}
	if len(rep.OnOverOff) != 1 || !near(rep.OnOverOff[0].CPUPerImageLater, 0.5) || !near(rep.OnOverOff[0].CPUPerImageEpoch1, 1) {
		t.Errorf("on / off: %+v", rep.OnOverOff)
	}
	if r := rep.AfterOverBefore; len(r) != 2 || r[1].Affinity != "on" || !near(r[1].CPUPerImageLater, 0.4) || !near(r[1].CoordinatorCPUPerImageLater, 1) {
		t.Errorf("this / before: %+v; want 2 peers with affinity on over before's", r)
	}
	var b strings.Builder
	rep.print(&b)
	for _, want := range []string{"2 peers, affinity on", "2 peers, affinity off", "2 peers (before)", "affinity on / off"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table has no %q:\n%s", want, b.String())
		}
	}
}
