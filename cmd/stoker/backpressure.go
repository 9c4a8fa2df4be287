package main

// `stoker bench backpressure`: the window controller and the advisor seen
// at work on real `stoker serve` processes on loopback, with simulated
// trainers: each is a client.Loader whose "GPU" is a fixed sleep per batch
// (its step), so that a trainer slower or faster than the servers, or two
// trainers of different speeds, can be set up on any machine. Every run is
// sampled every --sample (250 ms): per job the server's window, input-stall
// ratio, workers_recommended, buffered batches and images/s delivered (from
// its /metrics), per process the CPU cores in use and the RSS (from /proc).
//
//   - slow: one server (--workers 2) and a trainer that first takes
//     batches as fast as they come (phase "saturated": the server is the
//     limit), then steps 100 ms per batch (phase "slow"): the server's CPU
//     should fall to what the trainer consumes, the window narrow, memory
//     stay flat.
//   - fast: a coordinator (--workers 0 --peers A,B) with only peer A
//     (--workers 1) up, and a trainer stepping 5 ms per batch, far faster
//     than one worker makes them; half-way peer B starts on the address
//     reserved for it: stall high and workers_recommended above 1 before,
//     lower stall after.
//   - two: two trainers of different step times (20 ms and 60 ms per
//     batch) on one server with --workers 1, both starving; run with
//     --schedule fifo and --schedule stall (when the server has the flag):
//     each job's simulated GPU's busy time and share of the images.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

const backpressureUsage = "usage: stoker bench backpressure [--scenario slow|fast|two|all] [--seconds 20] [--plots bench/plots] [--json] [--data DIR | --n 1000] [--batch 32] [--prefetch 4] [--slow-step 100ms] [--fast-step 5ms] [--two-steps 20ms,60ms] [--stall-target 0.02]"

// bpScenarios in the order they run.
var bpScenarios = []string{"slow", "fast", "two"}

// bpTelemetryWindow is the servers' stall window (3 s): a phase's figures
// are read after its first window, when the stall ratio no longer mixes in
// the phase before.
const bpTelemetryWindow = 3 * time.Second

// bpOpts are the flags.
type bpOpts struct {
	scenarios   []string
	seconds     time.Duration
	sample      time.Duration
	plots       string
	data        string
	synthetic   bool
	n           int
	transform   string
	batch       int
	prefetch    int
	slowStep    time.Duration
	slowWorkers int
	fastStep    time.Duration
	twoSteps    []time.Duration
	twoWorkers  int
	stallTarget float64
	exe         string
}

func runBackpressure(args []string) error {
	ctx := cmdContext()
	fs := flag.NewFlagSet("bench backpressure", flag.ExitOnError)
	scenario := fs.String("scenario", "all", "slow, fast, two, or all (a comma-separated list works too)")
	seconds := fs.Float64("seconds", 20, "duration of each phase (slow and fast have two phases, two one per schedule)")
	sample := fs.Duration("sample", 250*time.Millisecond, "sampling interval of the servers' /metrics and /proc")
	plots := fs.String("plots", filepath.Join("bench", "plots"), "folder for the PNG plots, one per scenario (empty: none)")
	data := fs.String("data", "", "ImageFolder or WebDataset to read (default: a synthetic one, made as stoker mkdata makes it, removed afterwards)")
	n := fs.Int("n", 1000, "images of the synthetic dataset")
	transform := fs.String("transform", "imagenet-train", "transform preset: "+strings.Join(pipeline.PresetNames(), " or "))
	batch := fs.Int("batch", 32, "samples per batch")
	prefetch := fs.Int("prefetch", 4, "each trainer's credits")
	slowStep := fs.Duration("slow-step", 100*time.Millisecond, "slow: the trainer's step per batch in phase slow")
	slowWorkers := fs.Int("slow-workers", 2, "slow: the server's --workers")
	fastStep := fs.Duration("fast-step", 5*time.Millisecond, "fast: the trainer's step per batch")
	twoSteps := fs.String("two-steps", "20ms,60ms", "two: the two trainers' steps per batch")
	twoWorkers := fs.Int("two-workers", 1, "two: the server's --workers")
	stallTarget := fs.Float64("stall-target", server.DefaultStallTarget, "every server's --stall-target")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results (every sample included)")
	fs.Parse(args)

	o := bpOpts{seconds: time.Duration(*seconds * float64(time.Second)), sample: *sample, plots: *plots, data: *data, n: *n,
		transform: *transform, batch: *batch, prefetch: *prefetch, slowStep: *slowStep, slowWorkers: *slowWorkers,
		fastStep: *fastStep, twoWorkers: *twoWorkers, stallTarget: *stallTarget}
	for _, s := range strings.Split(*scenario, ",") {
		switch s = strings.TrimSpace(s); {
		case s == "all":
			o.scenarios = bpScenarios
		case slices.Contains(bpScenarios, s):
			if !slices.Contains(o.scenarios, s) {
				o.scenarios = append(o.scenarios, s)
			}
		default:
			return fmt.Errorf("bench backpressure: --scenario %q: want slow, fast, two or all\n%s", *scenario, backpressureUsage)
		}
	}
	// In the documented order, whatever the order asked.
	o.scenarios = slices.DeleteFunc(slices.Clone(bpScenarios), func(s string) bool { return !slices.Contains(o.scenarios, s) })
	for _, s := range strings.Split(*twoSteps, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < 0 {
			return fmt.Errorf("bench backpressure: --two-steps %q: want two durations, comma-separated", *twoSteps)
		}
		o.twoSteps = append(o.twoSteps, d)
	}
	switch {
	case len(o.twoSteps) != 2:
		return fmt.Errorf("bench backpressure: --two-steps %q: want two durations, comma-separated", *twoSteps)
	case o.seconds < time.Second || o.seconds > time.Hour:
		return errors.New("bench backpressure: want 1 <= --seconds <= 3600\n" + backpressureUsage)
	case o.sample < 10*time.Millisecond || o.sample > o.seconds:
		return errors.New("bench backpressure: want 10ms <= --sample <= --seconds\n" + backpressureUsage)
	case o.batch < 1 || o.prefetch < 1 || o.slowWorkers < 1 || o.twoWorkers < 1:
		return errors.New("bench backpressure: --batch, --prefetch, --slow-workers and --two-workers must be at least 1\n" + backpressureUsage)
	case o.slowStep <= 0 || o.fastStep < 0:
		return errors.New("bench backpressure: want --slow-step > 0 and --fast-step >= 0\n" + backpressureUsage)
	case !(o.stallTarget > 0 && o.stallTarget < 1):
		return errors.New("bench backpressure: want 0 < --stall-target < 1\n" + backpressureUsage)
	case o.data == "" && o.n < 1:
		return errors.New("bench backpressure: --n must be at least 1\n" + backpressureUsage)
	case !slices.Contains(pipeline.PresetNames(), o.transform):
		return fmt.Errorf("bench backpressure: --transform %q: want one of %v", o.transform, pipeline.PresetNames())
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.exe = exe
	// Bounded: every phase ends by itself; this bounds the rest (the
	// synthetic set, starting and stopping servers, a hang).
	ctx, cancel := context.WithTimeout(ctx, time.Duration(len(o.scenarios))*(2*o.seconds+90*time.Second)+2*time.Minute)
	defer cancel()
	if o.data == "" {
		dir, err := syntheticData(ctx, "backpressure", o.n)
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.data, o.synthetic = dir, true
	}

	b := &bpBench{o: o}
	rep := b.run(ctx)
	rep.print(os.Stdout)
	if *asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
			return err
		}
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("bench backpressure: %d error(s): %s", len(rep.Errors), strings.Join(rep.Errors, "; "))
	}
	return nil
}

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

// bpBench runs the scenarios.
type bpBench struct {
	o           bpOpts
	datasetSize uint64 // from a trainer's JobInfo
}

func (b *bpBench) run(ctx context.Context) *bpReport {
	o := b.o
	rep := &bpReport{Dataset: o.data, Synthetic: o.synthetic, Transform: o.transform, BatchSize: o.batch, Prefetch: o.prefetch,
		Seconds: o.seconds.Seconds(), SampleSeconds: o.sample.Seconds(), StallTarget: o.stallTarget, CPUs: runtime.NumCPU(),
		Scenarios: o.scenarios, Plots: map[string]string{}, Errors: []string{}}
	for _, sc := range o.scenarios {
		var err error
		var fig *plotFigure
		switch sc {
		case "slow":
			rep.Slow, err = b.slow(ctx)
			if rep.Slow != nil {
				fig = b.slowFigure(rep.Slow)
			}
		case "fast":
			rep.Fast, err = b.fast(ctx)
			if rep.Fast != nil {
				fig = b.fastFigure(rep.Fast)
			}
		case "two":
			rep.Two, err = b.two(ctx)
			if rep.Two != nil && len(rep.Two.Schedules) > 0 {
				fig = b.twoFigure(rep.Two)
			}
		}
		if err != nil {
			rep.Errors = append(rep.Errors, sc+": "+err.Error())
			fmt.Fprintf(os.Stderr, "bench backpressure: %s: %v\n", sc, err)
		}
		if fig != nil && o.plots != "" {
			path := filepath.Join(o.plots, "backpressure-"+sc+".png")
			if err := fig.writePNG(path); err != nil {
				rep.Errors = append(rep.Errors, sc+": plot: "+err.Error())
			} else {
				rep.Plots[sc] = path
			}
		}
		for _, r := range rep.runs(sc) {
			for _, e := range r.Errors {
				rep.Errors = append(rep.Errors, r.Name+": "+e)
			}
			if rep.DatasetSize == 0 {
				rep.DatasetSize = b.datasetSize
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return rep
}

// runs are scenario sc's runs.
func (rep *bpReport) runs(sc string) []*bpRun {
	switch {
	case sc == "slow" && rep.Slow != nil && rep.Slow.Run != nil:
		return []*bpRun{rep.Slow.Run}
	case sc == "fast" && rep.Fast != nil && rep.Fast.Run != nil:
		return []*bpRun{rep.Fast.Run}
	case sc == "two" && rep.Two != nil:
		var rs []*bpRun
		for _, s := range rep.Two.Schedules {
			if s.Run != nil {
				rs = append(rs, s.Run)
			}
		}
		return rs
	}
	return nil
}

// ---- scenarios ----

func (b *bpBench) spec(dataset string) *stokerv1.JobSpec {
	return &stokerv1.JobSpec{
		Dataset: dataset, Transform: &stokerv1.TransformSpec{Preset: b.o.transform},
		BatchSize: uint32(b.o.batch), Seed: 1, Shuffle: true,
	}
}

// serverArgs are the flags every server of this bench gets.
func (b *bpBench) serverArgs(workers int, metrics string, extra ...string) []string {
	args := []string{"--workers", strconv.Itoa(workers), "--stall-target", strconv.FormatFloat(b.o.stallTarget, 'g', -1, 64), "--gpus", "none"}
	if metrics != "" {
		args = append(args, "--metrics", metrics)
	}
	return append(args, extra...)
}

// slow: one server, one trainer; phase saturated (no step), then slow.
func (b *bpBench) slow(ctx context.Context) (*bpSlowResult, error) {
	o := b.o
	res := &bpSlowResult{StepMs: msOf(o.slowStep), ServerWorkers: o.slowWorkers}
	r := newBPRunner(b, "slow")
	defer r.stop()
	srv, err := r.startServer(ctx, "server", b.serverArgs(o.slowWorkers, "")...)
	if err != nil {
		return nil, err
	}
	r.setTarget(srv)
	if err := r.startTrainers(ctx, &bpTrainer{name: "trainer", dataset: "bench"}); err != nil {
		return nil, err
	}
	r.startSampler(ctx)
	if err := r.phase(ctx, "saturated", o.seconds, []time.Duration{0}, nil); err != nil {
		return nil, err
	}
	if err := r.phase(ctx, "slow", o.seconds, []time.Duration{o.slowStep}, nil); err != nil {
		return nil, err
	}
	res.Run = r.finish()
	sat, slow := res.Run.Phases[0], res.Run.Phases[1]
	res.SaturatedImagesPerSec, res.SaturatedServerCores, res.SaturatedCPUPerImage = sat.Jobs[0].ImagesPerSec, sat.ServerCores, sat.ServerCPUPerImage
	res.SlowImagesPerSec, res.SlowServerCores, res.SlowCPUPerImage = slow.Jobs[0].ImagesPerSec, slow.ServerCores, slow.ServerCPUPerImage
	res.CPUPerImageRatio = ratio(res.SlowCPUPerImage, res.SaturatedCPUPerImage)
	res.ExpectedSlowCores = round4(res.SlowImagesPerSec * res.SaturatedCPUPerImage / 1000)
	res.CoresOverExpected = ratio(res.SlowServerCores, res.ExpectedSlowCores)
	res.StallSaturated, res.StallSlow = sat.Jobs[0].Stall, slow.Jobs[0].Stall
	res.WindowSaturated, res.WindowSlow, res.WindowSlowLast = sat.Jobs[0].Window, slow.Jobs[0].Window, slow.Jobs[0].WindowLast
	res.NarrowDecisions = slow.Decisions["narrow"]
	res.BufferedSlow = slow.Jobs[0].Buffered
	var rss []rssSample
	for _, s := range res.Run.Samples {
		if s.Phase == "slow" {
			for _, p := range s.Procs {
				if p.Proc == "server" && p.RSSBytes > 0 {
					rss = append(rss, rssSample{T: s.T, Bytes: p.RSSBytes})
				}
			}
		}
	}
	if len(rss) >= 4 {
		h := len(rss) / 2
		var first, last int64
		for _, s := range rss[:h] {
			first = max(first, s.Bytes)
		}
		for _, s := range rss[h:] {
			last = max(last, s.Bytes)
		}
		bytesOf := func(s rssSample) int64 { return s.Bytes }
		res.RSSFirstHalfMaxMiB, res.RSSLastHalfMaxMiB = mib(first), mib(last)
		res.RSSLastOverFirst = ratio(float64(last), float64(first))
		res.RSSSlope = slope(rss, bytesOf) * 60 / (1 << 20)
		res.RSSLastHalfSlope = slope(rss[h:], bytesOf) * 60 / (1 << 20)
		res.RSSFlat = res.RSSLastOverFirst <= loadFlatGoal
	}
	return res, nil
}

// fast: a coordinator with peers A (up) and B (started half-way).
func (b *bpBench) fast(ctx context.Context) (*bpFastResult, error) {
	o := b.o
	res := &bpFastResult{StepMs: msOf(o.fastStep), PeerWorkers: 1, BReady: -1}
	r := newBPRunner(b, "fast")
	defer r.stop()
	a, err := r.startServer(ctx, "peer A", b.serverArgs(1, "")...)
	if err != nil {
		return nil, err
	}
	bAddr, err := reserveLoopbackAddr()
	if err != nil {
		return nil, err
	}
	coord, err := r.startServer(ctx, "coordinator", b.serverArgs(0, "", "--peers", a.p.addr+","+bAddr)...)
	if err != nil {
		return nil, err
	}
	r.setTarget(coord)
	if err := waitScalePeers(ctx, coord.metrics, 1, 20*time.Second); err != nil {
		return nil, err
	}
	if err := r.startTrainers(ctx, &bpTrainer{name: "trainer", dataset: "bench"}); err != nil {
		return nil, err
	}
	r.startSampler(ctx)
	if err := r.phase(ctx, "A alone", o.seconds, []time.Duration{o.fastStep}, nil); err != nil {
		return nil, err
	}
	err = r.phase(ctx, "A+B", o.seconds, []time.Duration{o.fastStep}, func() error {
		p, err := r.startServer(ctx, "peer B", b.serverArgs(1, "", "--listen", bAddr)...)
		if err == nil {
			res.BStarted = r.event("peer B started")
			if p.p.addr != bAddr {
				err = fmt.Errorf("peer B listens on %s, not on the reserved %s", p.p.addr, bAddr)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	res.Run = r.finish()
	before, after := res.Run.Phases[0], res.Run.Phases[1]
	steady := steadySamples(res.Run.Samples, before)
	res.StallBefore = medianOf(steady, func(s bpSample) (float64, bool) { return s.Jobs[0].Stall, s.Jobs[0].Published })
	res.RecommendedBefore = medianOf(steady, recommendedOf)
	res.MakersBefore = medianOf(steady, func(s bpSample) (float64, bool) { return s.PeersReady, true })
	res.ImagesPerSecBefore = before.Jobs[0].ImagesPerSec
	res.CoresBefore = medianOf(steady, allCores)
	res.MachineBefore = medianOf(steady, machineCores)
	if perMaker := res.ImagesPerSecBefore / float64(o.batch) / math.Max(res.MakersBefore, 1); perMaker > 0 && o.fastStep > 0 {
		res.ImpliedBefore = math.Ceil(1.1 / o.fastStep.Seconds() / perMaker)
	}
	for _, s := range res.Run.Samples {
		if s.Phase == after.Name && s.PeersReady >= 2 {
			res.BReady = s.T
			break
		}
	}
	var afterS []bpSample
	if res.BReady >= 0 {
		res.JoinSeconds = round2(res.BReady - res.BStarted)
		res.AfterFrom = round2(res.BReady + bpTelemetryWindow.Seconds())
		for _, s := range res.Run.Samples {
			if s.Phase == after.Name && s.T >= res.AfterFrom {
				afterS = append(afterS, s)
			}
		}
		if len(afterS) < 2 { // a short run: from B's readiness on
			res.AfterFrom = res.BReady
			afterS = afterS[:0]
			for _, s := range res.Run.Samples {
				if s.Phase == after.Name && s.T >= res.AfterFrom {
					afterS = append(afterS, s)
				}
			}
		}
	}
	res.AfterSamples = len(afterS)
	res.StallAfter = medianOf(afterS, func(s bpSample) (float64, bool) { return s.Jobs[0].Stall, s.Jobs[0].Published })
	res.RecommendedAfter = medianOf(afterS, recommendedOf)
	res.MakersAfter = medianOf(afterS, func(s bpSample) (float64, bool) { return s.PeersReady, true })
	res.ImagesPerSecAfter = medianOf(afterS, func(s bpSample) (float64, bool) { return s.Jobs[0].ImagesPerSec, s.Jobs[0].Published })
	res.CoresAfter = medianOf(afterS, allCores)
	res.MachineAfter = medianOf(afterS, machineCores)
	res.BLeases = after.Leases["peer B"]
	res.UnderTarget = len(afterS) > 0 && res.StallAfter <= o.stallTarget
	return res, nil
}

// two: two trainers of different steps on one server, per schedule.
func (b *bpBench) two(ctx context.Context) (*bpTwoResult, error) {
	o := b.o
	res := &bpTwoResult{ServerWorkers: o.twoWorkers, Floor: 1.0 / 4}
	res.StallAvailable = serveHasFlag(ctx, o.exe, "schedule")
	schedules := []string{"fifo", "stall"}
	if !res.StallAvailable {
		schedules = schedules[:1]
		fmt.Fprintln(os.Stderr, "bench backpressure: two: stoker serve has no --schedule: stall scheduling is not available in this build; running fifo only")
	}
	for _, sch := range schedules {
		s, err := b.twoOnce(ctx, sch, res.StallAvailable)
		if s != nil {
			s.AboveFloor = s.MinShare >= res.Floor
			res.Schedules = append(res.Schedules, *s)
		}
		if err != nil {
			return res, fmt.Errorf("schedule %s: %w", sch, err)
		}
	}
	return res, nil
}

func (b *bpBench) twoOnce(ctx context.Context, schedule string, withFlag bool) (*bpTwoSchedule, error) {
	o := b.o
	r := newBPRunner(b, "two "+schedule)
	defer r.stop()
	extra := []string{"--dataset", "jobA=" + o.data, "--dataset", "jobB=" + o.data}
	if withFlag {
		extra = append(extra, "--schedule", schedule)
	}
	srv, err := r.startServer(ctx, "server", b.serverArgs(o.twoWorkers, "", extra...)...)
	if err != nil {
		return nil, err
	}
	r.setTarget(srv)
	ta := &bpTrainer{name: "A " + shortDur(o.twoSteps[0]), dataset: "jobA"}
	tb := &bpTrainer{name: "B " + shortDur(o.twoSteps[1]), dataset: "jobB"}
	if err := r.startTrainers(ctx, ta, tb); err != nil {
		return nil, err
	}
	r.startSampler(ctx)
	if err := r.phase(ctx, schedule, o.seconds, o.twoSteps, nil); err != nil {
		return nil, err
	}
	s := &bpTwoSchedule{Schedule: schedule, Flag: withFlag, Run: r.finish()}
	ph := s.Run.Phases[0]
	total := int64(0)
	for _, j := range ph.Jobs {
		total += j.Images
	}
	s.MinShare = 1
	for _, j := range ph.Jobs {
		tj := bpTwoJob{Job: j.Job, StepMs: j.StepMs, Images: j.Images, ImagesPerSec: j.ImagesPerSec,
			Share: ratio(float64(j.Images), float64(total)), GPUBusy: j.GPUBusy, Stall: j.Stall, Window: j.Window}
		s.Jobs = append(s.Jobs, tj)
		s.TotalGPUBusy += tj.GPUBusy
		s.MinShare = min(s.MinShare, tj.Share)
	}
	s.ServerCores = ph.ServerCores
	return s, nil
}

// serveHasFlag reports whether `stoker serve -h` lists --name.
func serveHasFlag(ctx context.Context, exe, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, exe, "serve", "-h").CombinedOutput()
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "-"+name {
			return true
		}
	}
	return false
}

// reserveLoopbackAddr is a loopback address for a server to listen on
// later: a port below the kernel's ephemeral range, so that no socket
// bound to port 0 in the meantime (the other servers, the connections)
// takes it; where that range leaves no room, one the kernel picks.
func reserveLoopbackAddr() (string, error) {
	low := 0
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			low, _ = strconv.Atoi(f[0])
		}
	}
	var last error
	for range 100 {
		port := 0
		if low > 12000 {
			port = 10000 + rand.IntN(low-10000)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			last = err
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free loopback port: %v", last)
}

// ---- the runner: processes, trainers, sampler, phases ----

// bpProc is what is sampled: a stoker serve, this process (it runs the
// trainers), or the machine (every CPU's busy time from /proc/stat, other
// processes' and steal included, and the memory in use).
type bpProc struct {
	name    string
	kind    string // server, trainer or machine
	p       *scaleProc
	metrics string // a server's --metrics address
}

const bpMachine = "machine"

func (pr *bpProc) cpu() (time.Duration, error) {
	switch pr.kind {
	case "trainer":
		return cpuTime(), nil
	case bpMachine:
		return machineBusy()
	}
	select {
	case <-pr.p.exited:
		return 0, fmt.Errorf("%s exited: %v", pr.name, pr.p.waitErr)
	default:
	}
	c, err := scaleCPU([]*scaleProc{pr.p})
	if err != nil {
		return 0, err
	}
	return c[0], nil
}

func (pr *bpProc) rss() (int64, error) {
	switch pr.kind {
	case "trainer":
		return vmRSS("/proc/self/status")
	case bpMachine:
		return machineMemUsed()
	}
	return vmRSS(fmt.Sprintf("/proc/%d/status", pr.p.cmd.Process.Pid))
}

// bpTrainer is one simulated trainer: its own connection and job, endless
// epochs; after every batch its "GPU" sleeps step.
type bpTrainer struct {
	name    string
	dataset string
	step    atomic.Int64 // ns
	images  atomic.Int64
	batches atomic.Int64
	c       *client.Client
	l       *client.Loader
	done    chan struct{}
	err     error // once done
}

func (tr *bpTrainer) run(ctx context.Context) {
	defer close(tr.done)
	for {
		bt, err := tr.l.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("io.EOF from a loader of endless epochs: %w", err)
				}
				tr.err = err
			}
			return
		}
		tr.images.Add(int64(len(bt.Indices)))
		tr.batches.Add(1)
		bt.Release()
		if d := time.Duration(tr.step.Load()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// bpMark is the counters at a phase boundary.
type bpMark struct {
	at      time.Time
	cpu     map[string]time.Duration
	images  []int64
	batches []int64
	waited  []time.Duration
	server  map[string]float64 // the target's /metrics
}

type bpRunner struct {
	b     *bpBench
	run   *bpRun
	start time.Time

	mu       sync.Mutex
	procs    []*bpProc
	target   *bpProc
	trainers []*bpTrainer
	phaseNow string
	makers   map[string]string // a peer's address: its name

	trainCtx    context.Context
	stopTrain   context.CancelFunc
	sampleDone  chan struct{}
	stopSampler context.CancelFunc
	finished    bool
}

func newBPRunner(b *bpBench, name string) *bpRunner {
	r := &bpRunner{b: b, run: &bpRun{Name: name, Events: []bpEvent{}}, start: time.Now(), makers: map[string]string{}}
	r.procs = []*bpProc{{name: "trainer", kind: "trainer"}, {name: bpMachine, kind: bpMachine}}
	return r
}

// startServer starts a stoker serve (with --metrics on a free loopback
// port) and adds it to the processes sampled.
func (r *bpRunner) startServer(ctx context.Context, name string, args ...string) (*bpProc, error) {
	metrics, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	sb := &scaleBench{o: scaleOpts{data: r.b.o.data, exe: r.b.o.exe}}
	p, err := sb.start(ctx, name, "", append(args, "--metrics", metrics)...)
	if err != nil {
		return nil, err
	}
	pr := &bpProc{name: name, kind: "server", p: p, metrics: metrics}
	r.mu.Lock()
	r.procs = append(r.procs, pr)
	r.makers[p.addr] = name
	r.mu.Unlock()
	return pr, nil
}

func (r *bpRunner) setTarget(p *bpProc) {
	r.mu.Lock()
	r.target = p
	r.mu.Unlock()
}

// event records what happened now; it returns the time.
func (r *bpRunner) event(what string) float64 {
	t := round2(time.Since(r.start).Seconds())
	r.mu.Lock()
	r.run.Events = append(r.run.Events, bpEvent{T: t, What: what})
	r.mu.Unlock()
	fmt.Fprintf(os.Stderr, "  %s %6.2fs: %s\n", r.run.Name, t, what)
	return t
}

// startTrainers connects the trainers to the target and starts them,
// stepping nothing until the first phase sets their steps.
func (r *bpRunner) startTrainers(ctx context.Context, ts ...*bpTrainer) error {
	r.trainCtx, r.stopTrain = context.WithCancel(ctx)
	for _, tr := range ts {
		c, err := client.New(r.target.p.addr)
		if err != nil {
			return err
		}
		tr.c = c
		tr.l = c.Loader(r.b.spec(tr.dataset), client.Epochs(0), client.Prefetch(r.b.o.prefetch), client.Timeout(time.Minute))
		tr.done = make(chan struct{})
		r.mu.Lock()
		r.trainers = append(r.trainers, tr)
		r.run.Jobs = append(r.run.Jobs, tr.name)
		r.mu.Unlock()
	}
	for _, tr := range ts {
		go tr.run(r.trainCtx)
	}
	return nil
}

// mark reads the counters.
func (r *bpRunner) mark(ctx context.Context) bpMark {
	r.mu.Lock()
	procs, trainers, target := slices.Clone(r.procs), slices.Clone(r.trainers), r.target
	r.mu.Unlock()
	m := bpMark{at: time.Now(), cpu: map[string]time.Duration{}}
	for _, p := range procs {
		if c, err := p.cpu(); err == nil {
			m.cpu[p.name] = c
		}
	}
	for _, tr := range trainers {
		m.images = append(m.images, tr.images.Load())
		m.batches = append(m.batches, tr.batches.Load())
		m.waited = append(m.waited, tr.l.Waited())
	}
	if target != nil {
		m.server, _ = scrapeScaleMetrics(ctx, target.metrics)
	}
	return m
}

// phase runs one phase: the trainers' steps set, then during (if any)
// called, for d in all.
func (r *bpRunner) phase(ctx context.Context, name string, d time.Duration, steps []time.Duration, during func() error) error {
	m0 := r.mark(ctx)
	r.mu.Lock()
	r.phaseNow = name
	trainers := slices.Clone(r.trainers)
	r.mu.Unlock()
	for i, tr := range trainers {
		tr.step.Store(int64(steps[min(i, len(steps)-1)]))
	}
	fmt.Fprintf(os.Stderr, "bench backpressure: %s: phase %q, %v\n", r.run.Name, name, d)
	if during != nil {
		if err := during(); err != nil {
			return err
		}
	}
	select {
	case <-time.After(time.Until(m0.at.Add(d))):
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, tr := range trainers {
		select {
		case <-tr.done:
			if tr.err != nil {
				return fmt.Errorf("trainer %s: %w", tr.name, tr.err)
			}
		default:
		}
	}
	m1 := r.mark(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.run.Phases = append(r.run.Phases, r.summarize(name, steps, m0, m1))
	ph := r.run.Phases[len(r.run.Phases)-1]
	for _, j := range ph.Jobs {
		fmt.Fprintf(os.Stderr, "  %s / %s / %s: %.1f images/s, trainer stall %.3f, server cores %.2f\n",
			r.run.Name, name, j.Job, j.ImagesPerSec, j.TrainerStall, ph.ServerCores)
	}
	return nil
}

// summarize makes a phase's figures (r.mu held; the phase's samples are
// those taken so far with its name).
func (r *bpRunner) summarize(name string, steps []time.Duration, m0, m1 bpMark) bpPhase {
	secs := m1.at.Sub(m0.at).Seconds()
	ph := bpPhase{Name: name, Start: round2(m0.at.Sub(r.start).Seconds()), End: round2(m1.at.Sub(r.start).Seconds()), Seconds: round3(secs),
		Decisions: map[string]float64{}, Leases: map[string]float64{}}
	steady := steadySamples(r.run.Samples, ph)
	var images int64
	for i, tr := range r.trainers {
		step := steps[min(i, len(steps)-1)]
		j := bpJobPhase{Job: tr.name, StepMs: msOf(step), Images: m1.images[i] - m0.images[i], Batches: m1.batches[i] - m0.batches[i]}
		images += j.Images
		j.ImagesPerSec = round3(float64(j.Images) / secs)
		j.TrainerStall = round4((m1.waited[i] - m0.waited[i]).Seconds() / secs)
		j.GPUBusy = round4(step.Seconds() * float64(j.Batches) / secs)
		pub := func(f func(bpJobSample) float64) func(bpSample) (float64, bool) {
			return func(s bpSample) (float64, bool) {
				if i >= len(s.Jobs) {
					return 0, false
				}
				return f(s.Jobs[i]), s.Jobs[i].Published
			}
		}
		j.Stall = medianOf(steady, pub(func(js bpJobSample) float64 { return js.Stall }))
		j.Window = medianOf(steady, pub(func(js bpJobSample) float64 { return js.Window }))
		j.Buffered = medianOf(steady, pub(func(js bpJobSample) float64 { return js.Buffered }))
		j.Recommended = medianOf(steady, func(s bpSample) (float64, bool) {
			if i >= len(s.Jobs) {
				return 0, false
			}
			return s.Jobs[i].Recommended, s.Jobs[i].Published && s.Jobs[i].Recommended >= 0
		})
		for k := len(r.run.Samples) - 1; k >= 0; k-- {
			if s := r.run.Samples[k]; s.Phase == name && i < len(s.Jobs) && s.Jobs[i].Published {
				j.WindowLast = s.Jobs[i].Window
				break
			}
		}
		ph.Jobs = append(ph.Jobs, j)
	}
	var serverCPU float64
	for _, p := range r.procs {
		c := (m1.cpu[p.name] - m0.cpu[p.name]).Seconds()
		pp := bpProcPhase{Proc: p.name, CPUSeconds: round3(c), Cores: round3(c / secs)}
		var rss []rssSample
		for _, s := range r.run.Samples {
			if s.Phase != name {
				continue
			}
			for _, q := range s.Procs {
				if q.Proc == p.name && q.RSSBytes > 0 {
					rss = append(rss, rssSample{T: s.T, Bytes: q.RSSBytes})
					pp.RSSMaxMiB = max(pp.RSSMaxMiB, round3(mib(q.RSSBytes)))
				}
			}
		}
		pp.RSSSlope = round3(slope(rss, func(s rssSample) int64 { return s.Bytes }) * 60 / (1 << 20))
		ph.Procs = append(ph.Procs, pp)
		if p.kind == "server" {
			serverCPU += c
		}
	}
	ph.ServerCores = round3(serverCPU / secs)
	if images > 0 {
		ph.ServerCPUPerImage = round4(1000 * serverCPU / float64(images))
	}
	for k, v1 := range m1.server {
		if label, ok := seriesLabel(k, "stoker_window_decisions_total", "decision"); ok {
			ph.Decisions[label] = v1 - m0.server[k]
		}
		if label, ok := seriesLabel(k, "stoker_leases_total", "maker"); ok {
			if n, ok := r.makers[label]; ok {
				label = n
			}
			ph.Leases[label] = v1 - m0.server[k]
		}
	}
	return ph
}

// startSampler samples every o.sample until finish.
func (r *bpRunner) startSampler(ctx context.Context) {
	ctx, r.stopSampler = context.WithCancel(ctx)
	r.sampleDone = make(chan struct{})
	go func() {
		defer close(r.sampleDone)
		tick := time.NewTicker(r.b.o.sample)
		defer tick.Stop()
		hist := map[string][]bpPoint{}
		var ready float64
		for {
			r.sampleOnce(ctx, hist, &ready)
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
}

// bpPoint is a cumulative counter's value at t.
type bpPoint struct{ t, v float64 }

// rateOver appends (t, v) to h and returns the rate over about the last
// second.
func rateOver(h *[]bpPoint, t, v float64) float64 {
	*h = append(*h, bpPoint{t, v})
	i := 0
	for i+1 < len(*h) && (*h)[i+1].t <= t-1 {
		i++
	}
	*h = (*h)[i:]
	first := (*h)[0]
	if t <= first.t {
		return 0
	}
	return (v - first.v) / (t - first.t)
}

func (r *bpRunner) sampleOnce(ctx context.Context, hist map[string][]bpPoint, ready *float64) {
	r.mu.Lock()
	procs, trainers, target, phase := slices.Clone(r.procs), slices.Clone(r.trainers), r.target, r.phaseNow
	r.mu.Unlock()
	if phase == "" {
		return
	}
	now := time.Now()
	t := now.Sub(r.start).Seconds()
	s := bpSample{T: round2(t), Phase: phase, Jobs: []bpJobSample{}, Procs: []bpProcSample{}}
	var ms map[string]float64
	var err error
	if target != nil {
		ms, err = scrapeScaleMetrics(ctx, target.metrics)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.mu.Lock()
			r.run.ScrapeErrors++
			r.mu.Unlock()
		}
	}
	if ms != nil {
		s.PeersReady = ms["stoker_peers_ready"]
		if s.PeersReady != *ready {
			r.event(fmt.Sprintf("%v peer(s) ready", s.PeersReady))
			*ready = s.PeersReady
		}
	}
	for _, tr := range trainers {
		js := bpJobSample{Job: tr.name, Recommended: -1}
		if ms != nil {
			w, ok := jobSeries(ms, "stoker_window", tr.dataset)
			js.Published = ok
			js.Window = w
			js.Stall, _ = jobSeries(ms, "stoker_input_stall_ratio", tr.dataset)
			js.Buffered, _ = jobSeries(ms, "stoker_buffered_batches", tr.dataset)
			if v, ok := jobSeries(ms, "stoker_workers_recommended", tr.dataset); ok && !math.IsNaN(v) {
				js.Recommended = v
			}
			sent := ms[`stoker_samples_sent_total{dataset="`+tr.dataset+`"}`]
			h := hist["sent "+tr.name]
			js.ImagesPerSec = round2(rateOver(&h, t, sent))
			hist["sent "+tr.name] = h
			js.Stall = round4(js.Stall)
		}
		s.Jobs = append(s.Jobs, js)
	}
	for _, p := range procs {
		ps := bpProcSample{Proc: p.name}
		if c, err := p.cpu(); err == nil {
			h := hist["cpu "+p.name]
			ps.Cores = round3(rateOver(&h, t, c.Seconds()))
			hist["cpu "+p.name] = h
		}
		ps.RSSBytes, _ = p.rss()
		s.Procs = append(s.Procs, ps)
	}
	r.mu.Lock()
	r.run.Samples = append(r.run.Samples, s)
	r.mu.Unlock()
}

// finish stops the trainers and the sampler and returns the run; stop
// then stops the servers (deferred by each scenario, so they stop on
// errors too).
func (r *bpRunner) finish() *bpRun {
	r.stopTrainersAndSampler()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		r.run.Procs = append(r.run.Procs, p.name)
	}
	for _, tr := range r.trainers {
		if info := tr.l.Info(); info != nil {
			r.b.datasetSize = info.GetDatasetSize()
		}
		if tr.err != nil {
			r.run.Errors = append(r.run.Errors, "trainer "+tr.name+": "+tr.err.Error())
		}
	}
	return r.run
}

func (r *bpRunner) stopTrainersAndSampler() {
	if r.stopTrain != nil {
		r.stopTrain()
		for _, tr := range r.trainers {
			<-tr.done
			tr.l.Close()
			tr.c.Close()
		}
		r.stopTrain = nil
	}
	if r.stopSampler != nil {
		r.stopSampler()
		<-r.sampleDone
		r.stopSampler = nil
	}
}

// stop stops everything, the servers with SIGTERM.
func (r *bpRunner) stop() {
	if r.finished {
		return
	}
	r.finished = true
	r.stopTrainersAndSampler()
	var ps []*scaleProc
	for _, p := range r.procs {
		if p.p != nil {
			ps = append(ps, p.p)
		}
	}
	if err := stopScaleProcs(ps); err != nil {
		r.run.Errors = append(r.run.Errors, err.Error())
		for _, p := range ps {
			if tail := p.log.String(); tail != "" {
				r.run.Errors = append(r.run.Errors, p.name+" log (end): "+tail)
			}
		}
	}
}

// ---- helpers ----

// jobSeries finds metric's series for the job of dataset on the server
// (its job label is DATASET-rRANK-ID); with several (a job that ended and
// one that began), the largest value.
func jobSeries(ms map[string]float64, metric, dataset string) (float64, bool) {
	found, v := false, 0.0
	for k, x := range ms {
		if strings.HasPrefix(k, metric+"{") && strings.Contains(k, `job="`+dataset+`-r`) {
			if !found || x > v {
				v = x
			}
			found = true
		}
	}
	return v, found
}

// seriesLabel returns label's value in series key of metric.
func seriesLabel(key, metric, label string) (string, bool) {
	rest, ok := strings.CutPrefix(key, metric+"{")
	if !ok {
		return "", false
	}
	_, v, ok := strings.Cut(rest, label+`="`)
	if !ok {
		return "", false
	}
	v, _, ok = strings.Cut(v, `"`)
	return v, ok
}

// steadySamples are ph's samples after its first telemetry window (its
// first half when shorter).
func steadySamples(ss []bpSample, ph bpPhase) []bpSample {
	from := ph.Start + min(bpTelemetryWindow.Seconds(), (ph.End-ph.Start)/2)
	var out []bpSample
	for _, s := range ss {
		if s.Phase == ph.Name && s.T >= from {
			out = append(out, s)
		}
	}
	return out
}

// medianOf is the median of f over the samples where it is ok; -1 (not
// measured: every figure it is used for is otherwise at least 0) when none
// is.
func medianOf(ss []bpSample, f func(bpSample) (float64, bool)) float64 {
	var xs []float64
	for _, s := range ss {
		if v, ok := f(s); ok && !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return -1
	}
	return round4(median(xs))
}

func recommendedOf(s bpSample) (float64, bool) {
	return s.Jobs[0].Recommended, s.Jobs[0].Published && s.Jobs[0].Recommended >= 0
}

// allCores is the cores the bench's processes used (not the machine's).
func allCores(s bpSample) (float64, bool) {
	sum := 0.0
	for _, p := range s.Procs {
		if p.Proc != bpMachine {
			sum += p.Cores
		}
	}
	return sum, true
}

// machineCores is the machine's busy cores, every process's and steal.
func machineCores(s bpSample) (float64, bool) {
	for _, p := range s.Procs {
		if p.Proc == bpMachine {
			return p.Cores, true
		}
	}
	return 0, false
}

// machineBusy is the CPU time every CPU spent busy (user, nice, system,
// irq, softirq and steal: time the hypervisor gave to others) since boot,
// from /proc/stat, in clock ticks of 10 ms.
func machineBusy() (time.Duration, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// machineMemUsed is MemTotal less MemAvailable, from /proc/meminfo.
func machineMemUsed() (int64, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	var total, avail int64 = -1, -1
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "MemTotal":
				total = n << 10
			case "MemAvailable":
				avail = n << 10
			}
		}
	}
	if total < 0 || avail < 0 {
		return 0, errors.New("/proc/meminfo: no MemTotal or MemAvailable")
	}
	return total - avail, nil
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

// ---- the tables ----

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
	if len(rep.Plots) > 0 {
		fmt.Fprintln(w)
		for _, sc := range rep.Scenarios {
			if p, ok := rep.Plots[sc]; ok {
				fmt.Fprintf(w, "plot %s: %s\n", sc, p)
			}
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

// ---- the plots ----

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
