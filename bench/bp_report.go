package bench

// `stoker bench backpressure`: the report (the JSON line: results,
// phases, samples) and the human tables.

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// bpReport is the benchmark's result: the JSON line, and the tables.
type bpReport struct {
	Dataset       string   `json:"dataset"`
	Synthetic     bool     `json:"synthetic"`
	DatasetSize   uint64   `json:"dataset_size"`
	Transform     string   `json:"transform"`
	BatchSize     int      `json:"batch_size"`
	Prefetch      int      `json:"prefetch"`
	Seconds       float64  `json:"seconds_per_phase"`
	SampleSeconds float64  `json:"sample_seconds"`
	StallTarget   float64  `json:"stall_target"`
	CPUs          int      `json:"cpus"`
	Scenarios     []string `json:"scenarios"`

	Slow *bpSlowResult `json:"slow,omitempty"`
	Fast *bpFastResult `json:"fast,omitempty"`
	Two  *bpTwoResult  `json:"two,omitempty"`

	Autoscale *bpAutoscaleResult `json:"autoscale,omitempty"`
	// Plots are the PNGs written, by scenario.
	Plots  map[string]string `json:"plots"`
	Errors []string          `json:"errors"`
}

// bpSlowResult is scenario slow's verdict. CPU per image is the server's
// CPU over the images delivered in the phase, in milliseconds.
type bpSlowResult struct {
	StepMs        float64 `json:"step_ms"`
	ServerWorkers int     `json:"server_workers"`

	SaturatedImagesPerSec float64 `json:"saturated_images_per_sec"`
	SaturatedServerCores  float64 `json:"saturated_server_cores"`
	SaturatedCPUPerImage  float64 `json:"saturated_server_cpu_ms_per_image"`
	SlowImagesPerSec      float64 `json:"slow_images_per_sec"`
	SlowServerCores       float64 `json:"slow_server_cores"`
	SlowCPUPerImage       float64 `json:"slow_server_cpu_ms_per_image"`
	// CPUPerImageRatio is slow over saturated: about 1 when the server
	// makes only what the trainer takes.
	CPUPerImageRatio float64 `json:"cpu_per_image_slow_over_saturated"`
	// ExpectedSlowCores is what the trainer consumes, at the saturated
	// CPU per image: the slow phase's images/s times it.
	ExpectedSlowCores float64 `json:"expected_slow_server_cores"`
	CoresOverExpected float64 `json:"slow_cores_over_expected"`

	StallSaturated  float64 `json:"stall_saturated_median"`
	StallSlow       float64 `json:"stall_slow_median"`
	WindowSaturated float64 `json:"window_saturated_median"`
	WindowSlow      float64 `json:"window_slow_median"`
	WindowSlowLast  float64 `json:"window_slow_last"`
	NarrowDecisions float64 `json:"narrow_decisions_in_slow"`
	BufferedSlow    float64 `json:"buffered_slow_median"`

	// The server's RSS over the slow phase: the largest sample of its
	// last half over that of its first half, and the least-squares slopes.
	RSSFirstHalfMaxMiB float64 `json:"rss_first_half_max_mib"`
	RSSLastHalfMaxMiB  float64 `json:"rss_last_half_max_mib"`
	RSSLastOverFirst   float64 `json:"rss_last_over_first"`
	RSSSlope           float64 `json:"rss_slope_mib_per_min"`
	RSSLastHalfSlope   float64 `json:"rss_last_half_slope_mib_per_min"`
	RSSFlat            bool    `json:"rss_flat"`

	Run *bpRun `json:"run"`
}

// bpFastResult is scenario fast's verdict: "before" is phase "A alone"
// after its first telemetry window; "after" runs from a telemetry window
// after peer B was ready to the end.
type bpFastResult struct {
	StepMs      float64 `json:"step_ms"`
	PeerWorkers int     `json:"peer_workers"`

	StallBefore        float64 `json:"stall_before_median"`
	RecommendedBefore  float64 `json:"workers_recommended_before_median"`
	MakersBefore       float64 `json:"makers_before"`
	ImagesPerSecBefore float64 `json:"images_per_sec_before"`
	CoresBefore        float64 `json:"all_cores_before"`
	MachineBefore      float64 `json:"machine_cores_before"`
	// ImpliedBefore is the makers the trainer's demand (a batch per step)
	// needs at what each maker delivered, with the advisor's 10% headroom:
	// to judge workers_recommended by.
	ImpliedBefore float64 `json:"implied_makers_before"`

	BStarted    float64 `json:"b_started_s"`
	BReady      float64 `json:"b_ready_s"` // -1: never ready
	JoinSeconds float64 `json:"join_seconds"`
	AfterFrom   float64 `json:"after_from_s"`

	StallAfter        float64 `json:"stall_after_median"`
	RecommendedAfter  float64 `json:"workers_recommended_after_median"`
	MakersAfter       float64 `json:"makers_after"`
	ImagesPerSecAfter float64 `json:"images_per_sec_after"`
	CoresAfter        float64 `json:"all_cores_after"`
	MachineAfter      float64 `json:"machine_cores_after"`
	AfterSamples      int     `json:"after_samples"`
	// BLeases: leases peer B took in the second phase.
	BLeases     float64 `json:"b_leases"`
	UnderTarget bool    `json:"stall_under_target_after"`

	Run *bpRun `json:"run"`
}

// bpTwoResult is scenario two's verdict, one entry per schedule run.
type bpTwoResult struct {
	ServerWorkers  int             `json:"server_workers"`
	StallAvailable bool            `json:"stall_schedule_available"`
	Floor          float64         `json:"share_floor"` // 1/(2·jobs)
	Schedules      []bpTwoSchedule `json:"schedules"`
}

type bpTwoSchedule struct {
	Schedule string     `json:"schedule"` // fifo: with --schedule fifo, or the server's only order when it has no --schedule
	Flag     bool       `json:"flag_passed"`
	Jobs     []bpTwoJob `json:"jobs"`
	// TotalGPUBusy is the jobs' GPU-busy fractions summed (of len(Jobs)
	// GPUs).
	TotalGPUBusy float64 `json:"total_gpu_busy"`
	MinShare     float64 `json:"min_share"`
	AboveFloor   bool    `json:"all_above_floor"`
	ServerCores  float64 `json:"server_cores"`
	Run          *bpRun  `json:"run"`
}

type bpTwoJob struct {
	Job          string  `json:"job"`
	StepMs       float64 `json:"step_ms"`
	Images       int64   `json:"images"`
	ImagesPerSec float64 `json:"images_per_sec"`
	// Share of the images delivered to all jobs.
	Share float64 `json:"share"`
	// GPUBusy is its step time × batches over wall time: the simulated
	// GPU's busy fraction.
	GPUBusy float64 `json:"gpu_busy"`
	Stall   float64 `json:"stall_median"`
	Window  float64 `json:"window_median"`
}

// bpRun is one run: its processes and trainers, its phases, its samples.
type bpRun struct {
	Name         string     `json:"name"`
	Procs        []string   `json:"procs"`
	Jobs         []string   `json:"jobs"`
	Phases       []bpPhase  `json:"phases"`
	Events       []bpEvent  `json:"events"`
	Samples      []bpSample `json:"samples"`
	ScrapeErrors int        `json:"scrape_errors"`
	// Errors: a trainer's or a server's, anything but the run's end.
	Errors []string `json:"errors,omitempty"`
}

// bpPhase is one phase's figures. Stall, Window, Recommended and Buffered
// are medians of the samples after the phase's first telemetry window
// (after its first half when that is shorter).
type bpPhase struct {
	Name    string        `json:"name"`
	Start   float64       `json:"start_s"`
	End     float64       `json:"end_s"`
	Seconds float64       `json:"seconds"`
	Jobs    []bpJobPhase  `json:"jobs"`
	Procs   []bpProcPhase `json:"procs"`
	// ServerCores: every stoker serve process's together;
	// ServerCPUPerImage: their CPU over all images delivered, ms.
	ServerCores       float64 `json:"server_cores"`
	ServerCPUPerImage float64 `json:"server_cpu_ms_per_image"`
	// Window decisions (widen, narrow) and leases by maker within the
	// phase, from the trainers' server.
	Decisions map[string]float64 `json:"window_decisions"`
	Leases    map[string]float64 `json:"leases"`
}

type bpJobPhase struct {
	Job          string  `json:"job"`
	StepMs       float64 `json:"step_ms"`
	Images       int64   `json:"images"`
	Batches      int64   `json:"batches"`
	ImagesPerSec float64 `json:"images_per_sec"`
	// TrainerStall is the trainer's time blocked in Next over the phase.
	TrainerStall float64 `json:"trainer_stall"`
	GPUBusy      float64 `json:"gpu_busy"`
	Stall        float64 `json:"stall_median"`
	Window       float64 `json:"window_median"`
	WindowLast   float64 `json:"window_last"`
	Recommended  float64 `json:"workers_recommended_median"` // -1: never published
	Buffered     float64 `json:"buffered_median"`
}

type bpProcPhase struct {
	Proc       string  `json:"proc"`
	CPUSeconds float64 `json:"cpu_s"`
	Cores      float64 `json:"cores"`
	RSSMaxMiB  float64 `json:"rss_max_mib"`
	RSSSlope   float64 `json:"rss_slope_mib_per_min"`
}

type bpEvent struct {
	T    float64 `json:"t"`
	What string  `json:"what"`
}

// bpSample is one sampling instant; T is seconds since the run began.
type bpSample struct {
	T          float64        `json:"t"`
	Phase      string         `json:"phase"`
	PeersReady float64        `json:"peers_ready"`
	Jobs       []bpJobSample  `json:"jobs"`
	Procs      []bpProcSample `json:"procs"`
}

// bpJobSample is a job's gauges on its server; all zero until the server
// publishes them (Published false). Recommended is -1 until the advisor
// has measured the makers. ImagesPerSec is delivered over the last second.
type bpJobSample struct {
	Job          string  `json:"job"`
	Published    bool    `json:"published"`
	Window       float64 `json:"window"`
	Stall        float64 `json:"stall"`
	Recommended  float64 `json:"workers_recommended"`
	Buffered     float64 `json:"buffered"`
	ImagesPerSec float64 `json:"images_per_sec"`
}

// bpProcSample: CPU cores in use over the last second, and the RSS.
type bpProcSample struct {
	Proc     string  `json:"proc"`
	Cores    float64 `json:"cores"`
	RSSBytes int64   `json:"rss_bytes"`
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round4(a / b)
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func shortDur(d time.Duration) string { return strings.TrimSuffix(d.String(), "0s") }

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func round4(x float64) float64 { return math.Round(x*10000) / 10000 }

// fv formats a figure, "-" when not measured (negative).
func fv(format string, v float64) string {
	if v < 0 || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func metOr(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

// print writes the human tables.
func (rep *bpReport) print(w io.Writer) {
	synthetic := ""
	if rep.Synthetic {
		synthetic = ", synthetic"
	}
	fmt.Fprintf(w, "stoker bench backpressure: %s (%d images%s)\n", rep.Dataset, rep.DatasetSize, synthetic)
	fmt.Fprintf(w, "jobs: %s, batch %d, prefetch %d; phases of %.0f s, sampled every %v; --stall-target %g; %d CPUs here\n",
		rep.Transform, rep.BatchSize, rep.Prefetch, rep.Seconds, time.Duration(rep.SampleSeconds*float64(time.Second)), rep.StallTarget, rep.CPUs)
	fmt.Fprintln(w, "trainers are simulated in this process (\"trainer\"): a sleep of the step time per batch stands in for the GPU;")
	fmt.Fprintln(w, "stall, window, recommended, buffered: the server's gauges, medians after each phase's first 3 s; trainer stall: its time blocked in Next over the phase")
	if s := rep.Slow; s != nil {
		fmt.Fprintf(w, "\n== slow: one server (--workers %d); the trainer takes batches as fast as they come (saturated), then steps %v per batch (slow)\n",
			s.ServerWorkers, time.Duration(s.StepMs*float64(time.Millisecond)))
		s.Run.print(w)
		fmt.Fprintf(w, "server CPU per image consumed: saturated %.3f ms, slow %.3f ms: slow over saturated %.2f (about 1: it makes only what the trainer takes, nothing wasted)\n",
			s.SaturatedCPUPerImage, s.SlowCPUPerImage, s.CPUPerImageRatio)
		fmt.Fprintf(w, "server cores: saturated %.2f, slow %.2f; what the trainer consumes (%.0f images/s at the saturated %.3f ms per image): %.2f cores (slow over that %.2f)\n",
			s.SaturatedServerCores, s.SlowServerCores, s.SlowImagesPerSec, s.SaturatedCPUPerImage, s.ExpectedSlowCores, s.CoresOverExpected)
		fmt.Fprintf(w, "window: median %s saturated; in slow median %s, %s at its end, %.0f narrow decisions; buffered batches in slow: median %s\n",
			fv("%.0f", s.WindowSaturated), fv("%.0f", s.WindowSlow), fv("%.0f", s.WindowSlowLast), s.NarrowDecisions, fv("%.0f", s.BufferedSlow))
		fmt.Fprintf(w, "stall: median %s saturated, %s slow (in saturated the trainer does not step: its demand is unbounded, and so is the advisor's recommendation)\n",
			fv("%.3f", s.StallSaturated), fv("%.3f", s.StallSlow))
		fmt.Fprintf(w, "server RSS in slow: max %.1f MiB in its first half, %.1f MiB in its last (%.3f, goal <= %.2f: %s); slope %+.2f MiB/min, last half %+.2f MiB/min\n",
			s.RSSFirstHalfMaxMiB, s.RSSLastHalfMaxMiB, s.RSSLastOverFirst, loadFlatGoal, metOr(s.RSSFlat, "flat", "NOT FLAT"), s.RSSSlope, s.RSSLastHalfSlope)
	}
	if f := rep.Fast; f != nil {
		fmt.Fprintf(w, "\n== fast: a coordinator (--workers 0 --peers A,B) with peer A (--workers %d) up; the trainer steps %v per batch; peer B (--workers %d) starts half-way\n",
			f.PeerWorkers, time.Duration(f.StepMs*float64(time.Millisecond)), f.PeerWorkers)
		f.Run.print(w)
		fmt.Fprintf(w, "A alone: stall median %s (target %g), workers_recommended median %s with %s maker(s) ready, %.0f images/s; the bench's processes %s cores, the machine %s of %d\n",
			fv("%.3f", f.StallBefore), rep.StallTarget, fv("%.0f", f.RecommendedBefore), fv("%.0f", f.MakersBefore), f.ImagesPerSecBefore, fv("%.2f", f.CoresBefore), fv("%.2f", f.MachineBefore), rep.CPUs)
		fmt.Fprintf(w, "  a batch per %v step wants %.0f images/s: at the %.0f images/s one maker delivered, that takes %.0f makers (10%% headroom) against the advisor's %s\n",
			time.Duration(f.StepMs*float64(time.Millisecond)), float64(rep.BatchSize)*1000/math.Max(f.StepMs, 0.001), f.ImagesPerSecBefore/math.Max(f.MakersBefore, 1), f.ImpliedBefore, fv("%.0f", f.RecommendedBefore))
		if f.BReady < 0 {
			fmt.Fprintf(w, "peer B started at %.1f s and was NEVER READY before the end\n", f.BStarted)
		} else {
			fmt.Fprintf(w, "peer B started at %.1f s, ready at %.1f s (%.1f s later: the coordinator's reconnection back-off); it took %.0f leases\n",
				f.BStarted, f.BReady, f.JoinSeconds, f.BLeases)
			fmt.Fprintf(w, "A+B, from %.1f s (%d samples): stall median %s, workers_recommended median %s with %s maker(s) ready, %s images/s; the bench's processes %s cores, the machine %s of %d\n",
				f.AfterFrom, f.AfterSamples, fv("%.3f", f.StallAfter), fv("%.0f", f.RecommendedAfter), fv("%.0f", f.MakersAfter), fv("%.0f", f.ImagesPerSecAfter), fv("%.2f", f.CoresAfter), fv("%.2f", f.MachineAfter), rep.CPUs)
		}
		fmt.Fprintf(w, "stall before %s, after %s; under the target after B joined: %s\n", fv("%.3f", f.StallBefore), fv("%.3f", f.StallAfter), metOr(f.UnderTarget, "yes", "NO"))
		if !f.UnderTarget && f.BReady >= 0 {
			fmt.Fprintf(w, "  why not: the trainer wants %.0f images/s, about %.0f makers' worth; two peers, each on the same %d cores as the coordinator and the trainer, cannot make that here (the machine was %s cores busy; on separate machines each peer adds its own cores)\n",
				float64(rep.BatchSize)*1000/math.Max(f.StepMs, 0.001), f.ImpliedBefore, rep.CPUs, fv("%.2f", f.MachineAfter))
		}
	}
	if t := rep.Two; t != nil {
		fmt.Fprintf(w, "\n== two: two trainers of different step times on one server (--workers %d), both starving\n", t.ServerWorkers)
		if !t.StallAvailable {
			fmt.Fprintln(w, "stall scheduling is not available in this build (stoker serve has no --schedule): the server's one order only, shown as fifo")
		}
		for _, s := range t.Schedules {
			fmt.Fprintf(w, "-- schedule %s%s\n", s.Schedule, metOr(s.Flag, "", " (no --schedule flag)"))
			s.Run.print(w)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "schedule\tjob\tstep\timages/s\tshare of images\tGPU busy\tstall\twindow")
		for _, s := range t.Schedules {
			for _, j := range s.Jobs {
				fmt.Fprintf(tw, "%s\t%s\t%v\t%.1f\t%.3f\t%.3f\t%s\t%s\n", s.Schedule, j.Job, time.Duration(j.StepMs*float64(time.Millisecond)), j.ImagesPerSec,
					j.Share, j.GPUBusy, fv("%.3f", j.Stall), fv("%.0f", j.Window))
			}
			fmt.Fprintf(tw, "%s\tall\t\t\t\t%.3f (of %d GPUs)\t\t\n", s.Schedule, s.TotalGPUBusy, len(s.Jobs))
		}
		tw.Flush()
		for _, s := range t.Schedules {
			fmt.Fprintf(w, "%s: GPU busy in all %.3f of %d; smallest share %.3f vs the floor 1/(2·jobs) = %.2f: %s; server %.2f cores\n",
				s.Schedule, s.TotalGPUBusy, len(s.Jobs), s.MinShare, t.Floor, metOr(s.AboveFloor, "met", "MISSED"), s.ServerCores)
		}
	}
	if a := rep.Autoscale; a != nil {
		a.print(w, rep)
	}
	if len(rep.Plots) > 0 {
		fmt.Fprintln(w)
		for _, k := range slices.Sorted(maps.Keys(rep.Plots)) {
			fmt.Fprintf(w, "plot %s: %s\n", k, rep.Plots[k])
		}
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintf(w, "\nerrors: %d\n", len(rep.Errors))
		for _, e := range rep.Errors {
			fmt.Fprintln(w, "  "+e)
		}
	}
}

// print writes a run's phases: per job, then per process.
func (r *bpRun) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tjob\tstep\timages/s\ttrainer stall\tstall\twindow (last)\trecommended\tbuffered\tGPU busy")
	for _, ph := range r.Phases {
		for _, j := range ph.Jobs {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%.1f\t%.3f\t%s\t%s (%.0f)\t%s\t%s\t%.3f\n", ph.Name, j.Job, time.Duration(j.StepMs*float64(time.Millisecond)),
				j.ImagesPerSec, j.TrainerStall, fv("%.3f", j.Stall), fv("%.0f", j.Window), j.WindowLast, fv("%.1f", j.Recommended), fv("%.1f", j.Buffered), j.GPUBusy)
		}
	}
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tprocess\tcores\tRSS max MiB\tRSS slope MiB/min\t\tservers' cores\tservers' CPU ms/image\tnarrow/widen\tleases")
	// machine: every CPU's busy time (other processes' and steal included).
	for _, ph := range r.Phases {
		var leases []string
		for _, k := range slices.Sorted(maps.Keys(ph.Leases)) {
			leases = append(leases, fmt.Sprintf("%s %.0f", k, ph.Leases[k]))
		}
		for i, p := range ph.Procs {
			extra := "\t\t\t"
			if i == 0 {
				extra = fmt.Sprintf("%.2f\t%.3f\t%.0f/%.0f\t%s", ph.ServerCores, ph.ServerCPUPerImage, ph.Decisions["narrow"], ph.Decisions["widen"], strings.Join(leases, ", "))
			}
			rss, slope := fmt.Sprintf("%.1f", p.RSSMaxMiB), fmt.Sprintf("%+.2f", p.RSSSlope)
			if p.Proc == bpMachine {
				rss, slope = "-", "-" // its memory in use is in the JSON
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%s\t\t%s\n", ph.Name, p.Proc, p.Cores, rss, slope, extra)
		}
	}
	tw.Flush()
	for _, e := range r.Events {
		fmt.Fprintf(w, "  event at %.2f s: %s\n", e.T, e.What)
	}
	if r.ScrapeErrors > 0 {
		fmt.Fprintf(w, "  %d scrapes of /metrics failed\n", r.ScrapeErrors)
	}
}
