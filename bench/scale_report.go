package bench

// `stoker bench scale`: the report and its table.

import (
	"fmt"
	"io"
	"slices"
	"strings"
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
	// Affinity is --affinity's values: each peer count ran once per value
	// every round. WorkerCoefBudget and WorkerMemoryBudget are the
	// --coef-budget and --memory-budget the workers and the baseline server
	// were given (absent: their defaults; a coef budget of -1: none).
	Affinity           []string `json:"affinity"`
	WorkerCoefBudget   int64    `json:"worker_coef_budget,omitempty"`
	WorkerMemoryBudget int64    `json:"worker_memory_budget,omitempty"`
	// ExactlyOnce: every measured epoch delivered each index once; it is
	// checked as the batches arrive, and a violation fails the benchmark.
	ExactlyOnce  bool  `json:"exactly_once"`
	SampleErrors int64 `json:"sample_errors"`
	// Baseline: one server making its batches itself; Sweep: one row per
	// peer count and affinity value. Medians over the rounds.
	Baseline scaleRow   `json:"baseline"`
	Sweep    []scaleRow `json:"sweep"`
	// OnOverOff: with both affinity values, each peer count's figures with
	// affinity on over those with it off.
	OnOverOff []scaleRow `json:"on_over_off,omitempty"`
	// BeforeBinary is --before's binary; Before its medians, and
	// AfterOverBefore this binary's figures (with the first affinity
	// value) over its, row by row.
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
// 1000 images delivered, but for the cpu_per_image ones: seconds per image.
type scaleRow struct {
	Peers int `json:"peers"` // 0: the baseline
	// Affinity is the coordinator's cache affinity, "on" or "off" (absent
	// for the baseline, which has no coordinator, and for --before's runs,
	// which lease as that binary does by default).
	Affinity     string  `json:"affinity,omitempty"`
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
	// CPUPerImageEpoch1 and CPUPerImageLater are the makers' CPU-seconds
	// (the workers' together, or the baseline server's) per image made in
	// the first measured epoch and in the later ones (with --epochs 2 or
	// more): per sample their executors made in the epoch's interval, not
	// per image the trainer had in it, as the makers work ahead of the
	// trainer by more or less (scaleEpoch).
	CPUPerImageEpoch1 float64 `json:"cpu_per_image_epoch1,omitempty"`
	CPUPerImageLater  float64 `json:"cpu_per_image_later,omitempty"`
	// CoordinatorCPUPerImageLater is the coordinator's CPU-seconds per
	// image relayed in the later epochs: its cost once the peers are past
	// the verifier's strict start, which counts leases (with affinity,
	// parts) and so covers fewer samples of the first epoch with affinity
	// on than off.
	CoordinatorCPUPerImageLater float64 `json:"coordinator_cpu_per_image_later,omitempty"`
	// HomeShare is, of the samples of the batches the coordinator had made
	// in the later epochs, the share made at their home maker (counted
	// only with affinity on). CoefHitShare is, of the MCUs the makers
	// inverse-transformed in the later epochs, the share whose
	// coefficients were copied from their coefficient caches.
	HomeShare    float64 `json:"home_share,omitempty"`
	CoefHitShare float64 `json:"coef_hit_share,omitempty"`
	// ReadsPerImage is the makers' file reads (the samples their executors
	// made: with a local dataset each make reads its file) per image
	// delivered, over all the measured epochs, whose ends are exact where
	// the boundaries between them are not (scaleEpoch).
	ReadsPerImage float64 `json:"reads_per_image,omitempty"`
	// LeaseFailures is the coordinator's failed leases (or parts) per run.
	LeaseFailures float64 `json:"lease_failures,omitempty"`
	// ByEpoch is the figures epoch by epoch.
	ByEpoch []scaleEpochRow `json:"by_epoch,omitempty"`
}

// scaleEpochRow is one epoch's medians over a configuration's runs.
type scaleEpochRow struct {
	Epoch        uint64  `json:"epoch"`
	ImagesPerSec float64 `json:"images_per_sec"`
	// CPUPerImage: the makers', per image made; CoordinatorCPUPerImage:
	// per image relayed (delivered). CPU-seconds per image.
	CPUPerImage            float64 `json:"cpu_per_image"`
	CoordinatorCPUPerImage float64 `json:"coordinator_cpu_per_image,omitempty"`
	CoefHitShare           float64 `json:"coef_hit_share,omitempty"`
	HomeShare              float64 `json:"home_share,omitempty"`
	ReadsPerImage          float64 `json:"reads_per_image,omitempty"`
}

// scaleRun is one run: one configuration, one round.
type scaleRun struct {
	Peers int `json:"peers"`
	Round int `json:"round"`
	// Before: run with --before's binary.
	Before bool `json:"before,omitempty"`
	// Affinity: the coordinator's cache affinity, "on" or "off" ("" for the
	// baseline and --before's runs).
	Affinity string  `json:"affinity,omitempty"`
	Images   int64   `json:"images"`
	Batches  int64   `json:"batches"`
	Seconds  float64 `json:"seconds"`
	// CPU seconds over the measured epochs.
	ServerCPU      float64   `json:"server_cpu_s,omitempty"`
	CoordinatorCPU float64   `json:"coordinator_cpu_s,omitempty"`
	WorkerCPU      []float64 `json:"worker_cpu_s,omitempty"`
	TrainerCPU     float64   `json:"trainer_cpu_s"`
	TrainerWait    float64   `json:"trainer_wait_s"`
	// Leases the coordinator gave each worker during the measured epochs
	// (with affinity, a part of a batch counts as a lease).
	Leases []float64 `json:"leases,omitempty"`
	// LeaseFailures: the coordinator's failed leases (or parts) in the
	// measured epochs, for every reason (stoker_lease_failures_total), each
	// a batch leased again.
	LeaseFailures float64 `json:"lease_failures,omitempty"`
	SampleErrors  int64   `json:"sample_errors"`
	// Epochs: the measured epochs one by one.
	Epochs []scaleEpoch `json:"epochs"`
}

// scaleEpoch is one measured epoch of a run, as the trainer sees it: from
// the first batch of it to the first of the next (the first epoch from
// before its first batch was asked for, the last to its end). The makers
// work up to the coordinator's window and the trainer's prefetch ahead of
// what the trainer has, so an epoch's interval holds some of the next
// one's making and misses some of its own: its reads, made at the makers,
// are not its images exactly (the run's totals are), and by how much
// depends on the configuration (the verifier's strict start holds the
// first batches at the coordinator while the makers go on). The makers'
// CPU in it is therefore taken per image made in it (per read).
type scaleEpoch struct {
	Epoch   uint64  `json:"epoch"`
	Images  int64   `json:"images"`
	Seconds float64 `json:"seconds"`
	// MakersCPU: the workers' CPU-seconds together, or the baseline
	// server's; CoordinatorCPU the coordinator's.
	MakersCPU      float64 `json:"makers_cpu_s"`
	CoordinatorCPU float64 `json:"coordinator_cpu_s,omitempty"`
	// HomeSamples and AwaySamples: the coordinator's
	// stoker_affinity_samples_total, made at home or away (affinity on).
	HomeSamples float64 `json:"home_samples,omitempty"`
	AwaySamples float64 `json:"away_samples,omitempty"`
	// CoefMCUs and CoefHits: the makers' stoker_coef_cache_mcus_total and
	// stoker_coef_cache_mcus_hit_total, summed.
	CoefMCUs float64 `json:"coef_mcus,omitempty"`
	CoefHits float64 `json:"coef_mcus_hit,omitempty"`
	// MakerReads: Reads by maker, the workers in order.
	MakerReads []float64 `json:"maker_reads,omitempty"`
	// Reads: the samples the makers' executors made, each of which read its
	// file: stoker_sample_stage_seconds_count{stage="read"}, observed as
	// each is made (stoker_executor_samples_total counts the same samples
	// but only every 500 ms, too seldom for an epoch of a second).
	Reads float64 `json:"reads"`
}

// account fills in ep's CPU and counters from the snapshots of procs
// before (s0) and after (s1) it; coord is the coordinator (nil for the
// baseline), every other process a maker.
func (ep *scaleEpoch) account(procs []*scaleProc, coord *scaleProc, s0, s1 scaleSnap) {
	ep.Seconds = s1.at.Sub(s0.at).Seconds()
	for i, p := range procs {
		cpu := (s1.cpu[i] - s0.cpu[i]).Seconds()
		delta := func(series string) float64 { return s1.metrics[i][series] - s0.metrics[i][series] }
		if p == coord {
			ep.CoordinatorCPU += cpu
			ep.HomeSamples += delta(`stoker_affinity_samples_total{made="home"}`)
			ep.AwaySamples += delta(`stoker_affinity_samples_total{made="away"}`)
			continue
		}
		ep.MakersCPU += cpu
		ep.CoefMCUs += delta("stoker_coef_cache_mcus_total")
		ep.CoefHits += delta("stoker_coef_cache_mcus_hit_total")
		reads := delta(`stoker_sample_stage_seconds_count{stage="read"}`)
		ep.Reads += reads
		ep.MakerReads = append(ep.MakerReads, reads)
	}
}

// name is the run's configuration as the log and the table say it.
func (r scaleRun) name() string {
	return rowName(r.Peers, r.Affinity, r.Before)
}

func rowName(peers int, affinity string, before bool) string {
	s := configName(peers)
	if affinity != "" {
		s += ", affinity " + affinity
	}
	if before {
		s += " (before)"
	}
	return s
}

// epochSums are a run's epochs from the first'th on, summed.
func (r scaleRun) epochSums(first int) (sum scaleEpoch) {
	for _, e := range r.Epochs[min(first, len(r.Epochs)):] {
		sum.Images += e.Images
		sum.Seconds += e.Seconds
		sum.MakersCPU += e.MakersCPU
		sum.CoordinatorCPU += e.CoordinatorCPU
		sum.HomeSamples += e.HomeSamples
		sum.AwaySamples += e.AwaySamples
		sum.CoefMCUs += e.CoefMCUs
		sum.CoefHits += e.CoefHits
		sum.Reads += e.Reads
	}
	return sum
}

// share is part/whole, 0 for no whole.
func share(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return part / whole
}

// figures are e's figures: CPU per image, shares.
func (e scaleEpoch) figures() scaleEpochRow {
	img := float64(e.Images)
	return scaleEpochRow{Epoch: e.Epoch, ImagesPerSec: share(img, e.Seconds), CPUPerImage: share(e.MakersCPU, e.Reads),
		CoordinatorCPUPerImage: share(e.CoordinatorCPU, img), CoefHitShare: share(e.CoefHits, e.CoefMCUs),
		HomeShare: share(e.HomeSamples, e.HomeSamples+e.AwaySamples), ReadsPerImage: share(e.Reads, img)}
}

func (r scaleRun) imagesPerSec() float64 { return float64(r.Images) / r.Seconds }

func (r scaleRun) workersCPU() float64 {
	sum := 0.0
	for _, c := range r.WorkerCPU {
		sum += c
	}
	return sum
}

// summarize computes the medians of the runs, with both affinity values
// the ratios between them, and with --before the before binary's and the
// ratios.
func (rep *scaleReport) summarize(peers []int) {
	after := rep.side(peers, rep.Affinity, false)
	rep.Baseline, rep.Sweep = after.Baseline, after.Sweep
	if slices.Contains(rep.Affinity, "on") && slices.Contains(rep.Affinity, "off") {
		for _, n := range peers {
			on, off := findRow(after.Sweep, n, "on"), findRow(after.Sweep, n, "off")
			r := ratioRow(on, off)
			r.Affinity = "on/off"
			rep.OnOverOff = append(rep.OnOverOff, r)
		}
	}
	if rep.BeforeBinary == "" {
		return
	}
	before := rep.side(peers, []string{""}, true)
	rep.Before = &before
	rep.AfterOverBefore = append(rep.AfterOverBefore, ratioRow(after.Baseline, before.Baseline))
	for _, b := range before.Sweep {
		rep.AfterOverBefore = append(rep.AfterOverBefore, ratioRow(findRow(after.Sweep, b.Peers, rep.Affinity[0]), b))
	}
}

// findRow is the row of n peers with affinity a.
func findRow(rows []scaleRow, n int, a string) scaleRow {
	for _, r := range rows {
		if r.Peers == n && r.Affinity == a {
			return r
		}
	}
	return scaleRow{Peers: n, Affinity: a}
}

// ratioRow is a's figures over b's (0 where b has none), labelled as a.
func ratioRow(a, b scaleRow) scaleRow {
	ratio := func(x, y float64) float64 {
		if y == 0 {
			return 0
		}
		return x / y
	}
	r := scaleRow{
		Peers: a.Peers, Affinity: a.Affinity, ImagesPerSec: ratio(a.ImagesPerSec, b.ImagesPerSec),
		EfficiencyVsLinear: ratio(a.EfficiencyVsLinear, b.EfficiencyVsLinear),
		ServerCPU:          ratio(a.ServerCPU, b.ServerCPU), CoordinatorCPU: ratio(a.CoordinatorCPU, b.CoordinatorCPU),
		WorkersCPU: ratio(a.WorkersCPU, b.WorkersCPU), TrainerCPU: ratio(a.TrainerCPU, b.TrainerCPU),
		ProtocolOverhead:  ratio(a.ProtocolOverhead, b.ProtocolOverhead),
		CPUPerImageEpoch1: ratio(a.CPUPerImageEpoch1, b.CPUPerImageEpoch1), CPUPerImageLater: ratio(a.CPUPerImageLater, b.CPUPerImageLater),
		CoordinatorCPUPerImageLater: ratio(a.CoordinatorCPUPerImageLater, b.CoordinatorCPUPerImageLater),
		HomeShare:                   ratio(a.HomeShare, b.HomeShare), CoefHitShare: ratio(a.CoefHitShare, b.CoefHitShare),
		ReadsPerImage: ratio(a.ReadsPerImage, b.ReadsPerImage), LeaseFailures: ratio(a.LeaseFailures, b.LeaseFailures),
	}
	for i := range min(len(a.ByEpoch), len(b.ByEpoch)) {
		x, y := a.ByEpoch[i], b.ByEpoch[i]
		r.ByEpoch = append(r.ByEpoch, scaleEpochRow{Epoch: x.Epoch, ImagesPerSec: ratio(x.ImagesPerSec, y.ImagesPerSec),
			CPUPerImage: ratio(x.CPUPerImage, y.CPUPerImage), CoordinatorCPUPerImage: ratio(x.CoordinatorCPUPerImage, y.CoordinatorCPUPerImage),
			CoefHitShare: ratio(x.CoefHitShare, y.CoefHitShare), HomeShare: ratio(x.HomeShare, y.HomeShare),
			ReadsPerImage: ratio(x.ReadsPerImage, y.ReadsPerImage)})
	}
	return r
}

// side is the medians of one binary's runs: this one's (a row per peer
// count and affinity value), or --before's (affinities "").
func (rep *scaleReport) side(peers []int, affinities []string, before bool) scaleSide {
	rowOf := func(n int, affinity string) scaleRow {
		var runs []scaleRun
		for _, r := range rep.Runs {
			if r.Peers == n && r.Before == before && (n == 0 || r.Affinity == affinity) {
				runs = append(runs, r)
			}
		}
		return runsRow(n, affinity, runs)
	}
	s := scaleSide{Baseline: rowOf(0, "")}
	for _, a := range affinities {
		var one float64
		for _, n := range peers {
			row := rowOf(n, a)
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
	}
	// Peer count first, then the affinity values in their order, so that a
	// peer count's rows sit side by side.
	slices.SortStableFunc(s.Sweep, func(a, b scaleRow) int { return a.Peers - b.Peers })
	return s
}

// runsRow is the medians of runs, one configuration's.
func runsRow(n int, affinity string, runs []scaleRun) scaleRow {
	per1000 := func(cpu float64, r scaleRun) float64 { return 1000 * cpu / float64(max(r.Images, 1)) }
	var ips, server, coord, workers, trainer, epoch1, later, coordLater, home, hits, reads, failures []float64
	var byEpoch [][]scaleEpochRow // by epoch, the runs' figures
	for _, r := range runs {
		ips = append(ips, r.imagesPerSec())
		server = append(server, per1000(r.ServerCPU, r))
		coord = append(coord, per1000(r.CoordinatorCPU, r))
		workers = append(workers, per1000(r.workersCPU(), r))
		trainer = append(trainer, per1000(r.TrainerCPU, r))
		failures = append(failures, r.LeaseFailures)
		var first scaleEpoch
		if len(r.Epochs) > 0 {
			first = r.Epochs[0]
		}
		rest, all := r.epochSums(1), r.epochSums(0)
		epoch1 = append(epoch1, share(first.MakersCPU, first.Reads))
		reads = append(reads, share(all.Reads, float64(all.Images)))
		if len(r.Epochs) > 1 {
			later = append(later, share(rest.MakersCPU, rest.Reads))
			coordLater = append(coordLater, share(rest.CoordinatorCPU, float64(rest.Images)))
			home = append(home, share(rest.HomeSamples, rest.HomeSamples+rest.AwaySamples))
			hits = append(hits, share(rest.CoefHits, rest.CoefMCUs))
		}
		for i, e := range r.Epochs {
			if i == len(byEpoch) {
				byEpoch = append(byEpoch, nil)
			}
			byEpoch[i] = append(byEpoch[i], e.figures())
		}
	}
	row := scaleRow{Peers: n, Affinity: affinity, ImagesPerSec: median(ips), ServerCPU: median(server), CoordinatorCPU: median(coord),
		WorkersCPU: median(workers), TrainerCPU: median(trainer), CPUPerImageEpoch1: median(epoch1), CPUPerImageLater: median(later),
		CoordinatorCPUPerImageLater: median(coordLater),
		HomeShare:                   median(home), CoefHitShare: median(hits), ReadsPerImage: median(reads), LeaseFailures: median(failures)}
	for _, es := range byEpoch {
		f := func(get func(scaleEpochRow) float64) float64 {
			xs := make([]float64, len(es))
			for i, e := range es {
				xs[i] = get(e)
			}
			return median(xs)
		}
		row.ByEpoch = append(row.ByEpoch, scaleEpochRow{Epoch: es[0].Epoch,
			ImagesPerSec:           f(func(e scaleEpochRow) float64 { return e.ImagesPerSec }),
			CPUPerImage:            f(func(e scaleEpochRow) float64 { return e.CPUPerImage }),
			CoordinatorCPUPerImage: f(func(e scaleEpochRow) float64 { return e.CoordinatorCPUPerImage }),
			CoefHitShare:           f(func(e scaleEpochRow) float64 { return e.CoefHitShare }),
			HomeShare:              f(func(e scaleEpochRow) float64 { return e.HomeShare }),
			ReadsPerImage:          f(func(e scaleEpochRow) float64 { return e.ReadsPerImage }),
		})
	}
	return row
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
	caches := "their default --coef-budget and --memory-budget"
	if rep.WorkerCoefBudget < 0 {
		caches = "no coefficient cache (--coef-budget -1)"
	}
	if rep.WorkerCoefBudget > 0 {
		caches = fmt.Sprintf("--coef-budget %d each", rep.WorkerCoefBudget)
		if rep.WorkerMemoryBudget > 0 {
			caches += fmt.Sprintf(", --memory-budget %d", rep.WorkerMemoryBudget)
		}
	}
	fmt.Fprintf(tw, "caches\tworkers and baseline server: %s\n", caches)
	fmt.Fprintf(tw, "affinity\tthe coordinator's cache affinity: %s, each peer count run once per value every round\n", strings.Join(rep.Affinity, " and "))
	fmt.Fprintf(tw, "rounds\t%d (medians); exactly once: %v (%d sample errors)\n", rep.Rounds, rep.ExactlyOnce, rep.SampleErrors)
	if rep.Before != nil {
		fmt.Fprintf(tw, "before\t%s: each configuration run with its servers too, right after this binary's, every round (its coordinator as it leases by default)\n", rep.BeforeBinary)
	}
	fmt.Fprintln(tw)
	rows := func(label string, base scaleRow, sweep []scaleRow, before bool) {
		fmt.Fprintln(tw, "config"+label+"\timages/s\tvs linear\tcoordinator CPU s/1k img\tworkers CPU s/1k img\ttrainer CPU s/1k img\tprotocol overhead\tfailed leases")
		fmt.Fprintf(tw, "baseline (1 server)\t%.1f\t-\t-\t%.3f (the server)\t%.3f\t-\t-\n", base.ImagesPerSec, base.ServerCPU, base.TrainerCPU)
		for _, r := range sweep {
			eff := "-"
			if r.EfficiencyVsLinear > 0 {
				eff = fmt.Sprintf("%.2f", r.EfficiencyVsLinear)
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\n", rowName(r.Peers, r.Affinity, before), r.ImagesPerSec, eff,
				r.CoordinatorCPU, r.WorkersCPU, r.TrainerCPU, r.ProtocolOverhead, r.LeaseFailures)
		}
	}
	f := func(x float64) string {
		if x == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", x)
	}
	if rep.Before == nil {
		rows("", rep.Baseline, rep.Sweep, false)
	} else {
		rows(" (this binary)", rep.Baseline, rep.Sweep, false)
		fmt.Fprintln(tw)
		rows(" (before)", rep.Before.Baseline, rep.Before.Sweep, true)
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "this / before\timages/s\tvs linear\tcoordinator CPU\tcoordinator CPU, epochs >= 2\tworkers CPU (server CPU)\ttrainer CPU\tprotocol overhead\tmakers CPU, epochs >= 2")
		for _, r := range rep.AfterOverBefore {
			workers := r.WorkersCPU
			if r.Peers == 0 {
				workers = r.ServerCPU
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rowName(r.Peers, r.Affinity, false), f(r.ImagesPerSec), f(r.EfficiencyVsLinear),
				f(r.CoordinatorCPU), f(r.CoordinatorCPUPerImageLater), f(workers), f(r.TrainerCPU), f(r.ProtocolOverhead), f(r.CPUPerImageLater))
		}
	}
	if rep.Epochs >= 2 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "by epoch\tmakers CPU s/1k img made, epoch 1\tepochs >= 2\tcoordinator CPU s/1k img relayed, epochs >= 2\tcoef cache hits, epochs >= 2\thome share, epochs >= 2\treads/img\tmakers CPU s/1k img made (coef cache hits), epoch by epoch")
		epochRows := func(base scaleRow, sweep []scaleRow, before bool) {
			for _, r := range append([]scaleRow{base}, sweep...) {
				var each []string
				for _, e := range r.ByEpoch {
					each = append(each, fmt.Sprintf("%.3f (%.0f%%)", 1000*e.CPUPerImage, 100*e.CoefHitShare))
				}
				name := rowName(r.Peers, r.Affinity, before)
				if r.Peers == 0 {
					name = rowName(0, "", before) + " (the server)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, f(1000*r.CPUPerImageEpoch1), f(1000*r.CPUPerImageLater),
					f(1000*r.CoordinatorCPUPerImageLater), f(r.CoefHitShare), f(r.HomeShare), f(r.ReadsPerImage), strings.Join(each, "  "))
			}
		}
		epochRows(rep.Baseline, rep.Sweep, false)
		if rep.Before != nil {
			epochRows(rep.Before.Baseline, rep.Before.Sweep, true)
		}
	}
	if len(rep.OnOverOff) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "affinity on / off\timages/s\tcoordinator CPU\tcoordinator CPU, epochs >= 2\tworkers CPU\tmakers CPU, epoch 1\tepochs >= 2\tcoef cache hits, epochs >= 2\tmakers CPU, epoch by epoch")
		for _, r := range rep.OnOverOff {
			var each []string
			for _, e := range r.ByEpoch {
				each = append(each, f(e.CPUPerImage))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", configName(r.Peers), f(r.ImagesPerSec), f(r.CoordinatorCPU), f(r.CoordinatorCPUPerImageLater), f(r.WorkersCPU),
				f(r.CPUPerImageEpoch1), f(r.CPUPerImageLater), f(r.CoefHitShare), strings.Join(each, "  "))
		}
	}
	tw.Flush()
	fmt.Fprintln(w, "\nprotocol overhead: the workers' CPU per image made for a peer over the baseline server's per image made for its own trainer (issue 18: at most 1.05);")
	fmt.Fprintln(w, "coordinator CPU is the GPU host's cost; the trainer (this process) is counted apart. CPU from /proc, in 10 ms ticks.")
	fmt.Fprintln(w, "failed leases: per run, leases (with affinity, parts) that failed for any reason, a busy worker's included; each batch was leased again.")
	if rep.Epochs >= 2 {
		fmt.Fprintln(w, "by epoch: the makers are the workers together (or the baseline server); an epoch runs from its first batch to the next epoch's, as the trainer")
		fmt.Fprintln(w, "sees them, while the makers work up to a window ahead: their CPU is per image made in it (per sample their executors made, each a file read).")
		fmt.Fprintln(w, "coef cache hits: MCUs copied from the coefficient caches over those inverse-transformed; home share: samples made at their home maker, as the")
		fmt.Fprintln(w, "coordinator counts them (affinity on only); reads/img: samples the makers made per image delivered, over all the measured epochs.")
	}
}
