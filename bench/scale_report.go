package bench

// `stoker bench scale`: the report and its table.

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// scaleReport is the benchmark's result: the JSON line, and the table.
type scaleReport struct {
	Dataset     string `json:"dataset"`
	Synthetic   bool   `json:"synthetic"`
	DatasetSize uint64 `json:"dataset_size"`
	Transform   string `json:"transform"`
	BatchSize   int    `json:"batch_size"`
	Workers     int    `json:"workers_per_server"`
	Epochs      int    `json:"epochs_per_run"`
	Rounds      int    `json:"rounds"`
	Prefetch    int    `json:"prefetch"`
	Pinned      bool   `json:"pinned"`
	CPUs        int    `json:"cpus"`
	// ExactlyOnce: every measured epoch delivered each index once; it is
	// checked as the batches arrive, and a violation fails the benchmark.
	ExactlyOnce  bool  `json:"exactly_once"`
	SampleErrors int64 `json:"sample_errors"`
	// Baseline: one server making its batches itself; Sweep: one row per
	// peer count. Medians over the rounds.
	Baseline scaleRow   `json:"baseline"`
	Sweep    []scaleRow `json:"sweep"`
	// BeforeBinary is --before's binary; Before its medians, and
	// AfterOverBefore this binary's figures over its, row by row.
	BeforeBinary    string     `json:"before_binary,omitempty"`
	Before          *scaleSide `json:"before,omitempty"`
	AfterOverBefore []scaleRow `json:"after_over_before,omitempty"`
	Runs            []scaleRun `json:"runs"`
}

// scaleSide is one binary's medians.
type scaleSide struct {
	Baseline scaleRow   `json:"baseline"`
	Sweep    []scaleRow `json:"sweep"`
}

// scaleRow is one configuration's medians. CPU figures are seconds per
// 1000 images delivered.
type scaleRow struct {
	Peers        int     `json:"peers"` // 0: the baseline
	ImagesPerSec float64 `json:"images_per_sec"`
	// EfficiencyVsLinear is images/s at n peers over n times images/s at
	// one peer (when 1 is in the sweep).
	EfficiencyVsLinear float64 `json:"efficiency_vs_linear,omitempty"`
	// ServerCPU: the baseline server's; CoordinatorCPU: the GPU host's
	// cost; WorkersCPU: all workers together.
	ServerCPU      float64 `json:"server_cpu_s_per_1000,omitempty"`
	CoordinatorCPU float64 `json:"coordinator_cpu_s_per_1000,omitempty"`
	WorkersCPU     float64 `json:"workers_cpu_s_per_1000,omitempty"`
	TrainerCPU     float64 `json:"trainer_cpu_s_per_1000"`
	// ProtocolOverhead is the workers' CPU per image made for a peer over
	// the baseline server's CPU per image made for its own trainer.
	ProtocolOverhead float64 `json:"protocol_overhead,omitempty"`
}

// scaleRun is one run: one configuration, one round.
type scaleRun struct {
	Peers int `json:"peers"`
	Round int `json:"round"`
	// Before: run with --before's binary.
	Before  bool    `json:"before,omitempty"`
	Images  int64   `json:"images"`
	Batches int64   `json:"batches"`
	Seconds float64 `json:"seconds"`
	// CPU seconds over the measured epochs.
	ServerCPU      float64   `json:"server_cpu_s,omitempty"`
	CoordinatorCPU float64   `json:"coordinator_cpu_s,omitempty"`
	WorkerCPU      []float64 `json:"worker_cpu_s,omitempty"`
	TrainerCPU     float64   `json:"trainer_cpu_s"`
	TrainerWait    float64   `json:"trainer_wait_s"`
	// Leases the coordinator gave each worker during the measured epochs.
	Leases       []float64 `json:"leases,omitempty"`
	SampleErrors int64     `json:"sample_errors"`
}

func (r scaleRun) imagesPerSec() float64 { return float64(r.Images) / r.Seconds }

func (r scaleRun) workersCPU() float64 {
	sum := 0.0
	for _, c := range r.WorkerCPU {
		sum += c
	}
	return sum
}

// summarize computes the medians of the runs, and with --before the
// before binary's and the ratios.
func (rep *scaleReport) summarize(peers []int) {
	after := rep.side(peers, false)
	rep.Baseline, rep.Sweep = after.Baseline, after.Sweep
	if rep.BeforeBinary == "" {
		return
	}
	before := rep.side(peers, true)
	rep.Before = &before
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	for i, a := range append([]scaleRow{after.Baseline}, after.Sweep...) {
		b := before.Baseline
		if i > 0 {
			b = before.Sweep[i-1]
		}
		rep.AfterOverBefore = append(rep.AfterOverBefore, scaleRow{
			Peers: a.Peers, ImagesPerSec: ratio(a.ImagesPerSec, b.ImagesPerSec),
			EfficiencyVsLinear: ratio(a.EfficiencyVsLinear, b.EfficiencyVsLinear),
			ServerCPU:          ratio(a.ServerCPU, b.ServerCPU), CoordinatorCPU: ratio(a.CoordinatorCPU, b.CoordinatorCPU),
			WorkersCPU: ratio(a.WorkersCPU, b.WorkersCPU), TrainerCPU: ratio(a.TrainerCPU, b.TrainerCPU),
			ProtocolOverhead: ratio(a.ProtocolOverhead, b.ProtocolOverhead),
		})
	}
}

// side is the medians of one binary's runs: this one's, or --before's.
func (rep *scaleReport) side(peers []int, before bool) scaleSide {
	per1000 := func(cpu float64, r scaleRun) float64 { return 1000 * cpu / float64(max(r.Images, 1)) }
	rowOf := func(n int) scaleRow {
		var ips, server, coord, workers, trainer []float64
		for _, r := range rep.Runs {
			if r.Peers != n || r.Before != before {
				continue
			}
			ips = append(ips, r.imagesPerSec())
			server = append(server, per1000(r.ServerCPU, r))
			coord = append(coord, per1000(r.CoordinatorCPU, r))
			workers = append(workers, per1000(r.workersCPU(), r))
			trainer = append(trainer, per1000(r.TrainerCPU, r))
		}
		return scaleRow{Peers: n, ImagesPerSec: median(ips), ServerCPU: median(server), CoordinatorCPU: median(coord),
			WorkersCPU: median(workers), TrainerCPU: median(trainer)}
	}
	s := scaleSide{Baseline: rowOf(0)}
	var one float64
	for _, n := range peers {
		row := rowOf(n)
		if n == 1 {
			one = row.ImagesPerSec
		}
		if one > 0 {
			row.EfficiencyVsLinear = row.ImagesPerSec / (float64(n) * one)
		}
		if s.Baseline.ServerCPU > 0 {
			row.ProtocolOverhead = row.WorkersCPU / s.Baseline.ServerCPU
		}
		s.Sweep = append(s.Sweep, row)
	}
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// print writes the human table.
func (rep *scaleReport) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	synthetic := ""
	if rep.Synthetic {
		synthetic = ", synthetic"
	}
	fmt.Fprintf(tw, "stoker bench scale\t%s (%d images%s)\n", rep.Dataset, rep.DatasetSize, synthetic)
	fmt.Fprintf(tw, "job\t%s, batch %d, prefetch %d, %d epoch(s) per run\n", rep.Transform, rep.BatchSize, rep.Prefetch, rep.Epochs)
	fmt.Fprintf(tw, "servers\t%d decode goroutine(s) each; pinned: %v; %d CPUs here\n", rep.Workers, rep.Pinned, rep.CPUs)
	fmt.Fprintf(tw, "rounds\t%d (medians); exactly once: %v (%d sample errors)\n", rep.Rounds, rep.ExactlyOnce, rep.SampleErrors)
	if rep.Before != nil {
		fmt.Fprintf(tw, "before\t%s: each configuration run with its servers too, right after this binary's, every round\n", rep.BeforeBinary)
	}
	fmt.Fprintln(tw)
	rows := func(label string, base scaleRow, sweep []scaleRow) {
		fmt.Fprintln(tw, "config"+label+"\timages/s\tvs linear\tcoordinator CPU s/1k img\tworkers CPU s/1k img\ttrainer CPU s/1k img\tprotocol overhead")
		fmt.Fprintf(tw, "baseline (1 server)\t%.1f\t-\t-\t%.3f (the server)\t%.3f\t-\n", base.ImagesPerSec, base.ServerCPU, base.TrainerCPU)
		for _, r := range sweep {
			eff := "-"
			if r.EfficiencyVsLinear > 0 {
				eff = fmt.Sprintf("%.2f", r.EfficiencyVsLinear)
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t%.3f\t%.3f\t%.3f\t%.3f\n", configName(r.Peers), r.ImagesPerSec, eff,
				r.CoordinatorCPU, r.WorkersCPU, r.TrainerCPU, r.ProtocolOverhead)
		}
	}
	if rep.Before == nil {
		rows("", rep.Baseline, rep.Sweep)
	} else {
		rows(" (this binary)", rep.Baseline, rep.Sweep)
		fmt.Fprintln(tw)
		rows(" (before)", rep.Before.Baseline, rep.Before.Sweep)
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "this / before\timages/s\tvs linear\tcoordinator CPU\tworkers CPU (server CPU)\ttrainer CPU\tprotocol overhead")
		f := func(x float64) string {
			if x == 0 {
				return "-"
			}
			return fmt.Sprintf("%.3f", x)
		}
		for _, r := range rep.AfterOverBefore {
			workers := r.WorkersCPU
			if r.Peers == 0 {
				workers = r.ServerCPU
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", configName(r.Peers), f(r.ImagesPerSec), f(r.EfficiencyVsLinear),
				f(r.CoordinatorCPU), f(workers), f(r.TrainerCPU), f(r.ProtocolOverhead))
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\nprotocol overhead: the workers' CPU per image made for a peer over the baseline server's per image made for its own trainer (issue 18: at most 1.05);")
	fmt.Fprintln(w, "coordinator CPU is the GPU host's cost; the trainer (this process) is counted apart. CPU from /proc, in 10 ms ticks.")
}
