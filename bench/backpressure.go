package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stoker-dev/stoker/internal/helptext"
	transformpkg "github.com/stoker-dev/stoker/pipeline/transform"
	"github.com/stoker-dev/stoker/server"
) // `stoker bench backpressure`: the window controller and the advisor seen
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
//   - autoscale (only when named: minutes per run): an HPA-like loop
//     following stoker_workers_recommended over workers of known capacity,
//     fed by a simulated trainer that behaves like CUDA; see bp_autoscale.go.

const backpressureUsage = "usage: stoker bench backpressure [--scenario slow|fast|two|autoscale|all] [--seconds 20] [--plots bench/plots] [--json] [--data DIR | --n 1000] [--size N] [--shm] [--batch 32] [--prefetch 4] [--slow-step 100ms] [--fast-step 5ms] [--two-steps 20ms,60ms] [--stall-target 0.02] [--autoscale-starts 1,8] [--autoscale-seconds 420] [--worker-rate 10] [--gpu-ips 0] [--hpa-period 15s] [--advise-window 60s] [--max-replicas 10]"

// bpScenarios in the order they run.
var bpScenarios = []string{"slow", "fast", "two", "autoscale"}

// bpAll are the scenarios "all" runs: autoscale, minutes per run, only
// when named.
var bpAll = []string{"slow", "fast", "two"}

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
	size        int // > 0: RandomResizedCrop(size) and a flip instead of the preset
	shm         bool
	batch       int
	prefetch    int
	slowStep    time.Duration
	slowWorkers int
	fastStep    time.Duration
	twoSteps    []time.Duration
	twoWorkers  int
	stallTarget float64
	as          asOpts
	exe         string
}

func runBackpressure(args []string) error {
	ctx := signalContext()
	fs := flag.NewFlagSet("bench backpressure", flag.ExitOnError)
	fs.Usage = helptext.Usage(fs, helptext.Head("bench backpressure", "[flags]", "Runs simulated trainers against a server and reports the window controller and the fair share (plots with --plots)."))
	scenario := fs.String("scenario", "all", "slow, fast, two, or all (a comma-separated list works too)")
	seconds := fs.Float64("seconds", 20, "duration of each phase (slow and fast have two phases, two one per schedule); a phase in which a trainer has taken no batch yet lasts until it has")
	sample := fs.Duration("sample", 250*time.Millisecond, "sampling interval of the servers' /metrics and /proc")
	plots := fs.String("plots", filepath.Join("bench", "plots"), "folder for the PNG plots, one per scenario (empty: none)")
	data := fs.String("data", "", "ImageFolder or WebDataset to read (default: a synthetic one, made as stoker mkdata makes it, removed afterwards)")
	n := fs.Int("n", 1000, "images of the synthetic dataset")
	transform := fs.String("transform", "imagenet-train", "transform preset: "+strings.Join(transformpkg.PresetNames(), " or "))
	size := fs.Int("size", 0, "crop to this size (RandomResizedCrop and a flip) instead of --transform's preset: small outputs make relaying cheap beside decoding")
	shm := fs.Bool("shm", false, "the trainers take their batches through their server's shared-memory ring")
	batch := fs.Int("batch", 32, "samples per batch")
	prefetch := fs.Int("prefetch", 4, "each trainer's credits")
	slowStep := fs.Duration("slow-step", 100*time.Millisecond, "slow: the trainer's step per batch in phase slow")
	slowWorkers := fs.Int("slow-workers", 2, "slow: the server's --workers")
	fastStep := fs.Duration("fast-step", 5*time.Millisecond, "fast: the trainer's step per batch")
	twoSteps := fs.String("two-steps", "20ms,60ms", "two: the two trainers' steps per batch")
	twoWorkers := fs.Int("two-workers", 1, "two: the server's --workers")
	stallTarget := fs.Float64("stall-target", server.DefaultStallTarget, "every server's --stall-target")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results (every sample included)")
	asStarts := fs.String("autoscale-starts", "1,8", "autoscale: the runs' initial worker counts")
	asSeconds := fs.Float64("autoscale-seconds", 420, "autoscale: duration of each run")
	workerRate := fs.Float64("worker-rate", 10, "autoscale: each worker's batches per second (its --bench-rate)")
	gpuIPS := fs.Float64("gpu-ips", 0, fmt.Sprintf("autoscale: images per second the simulated GPU consumes; 0: %g workers' worth", asGPUDefault))
	hpaPeriod := fs.Duration("hpa-period", 15*time.Second, "autoscale: how often the HPA-like loop sets replicas to stoker_workers_recommended")
	adviseWindow := fs.Duration("advise-window", server.DefaultAdviseWindow, "autoscale: the coordinator's --advise-window (how long a lower recommendation must hold)")
	maxReplicas := fs.Int("max-replicas", 10, "autoscale: the loop's bound on workers (addresses 127.0.0.2 on)")
	runAhead := fs.Int("run-ahead", 2, "autoscale: steps the simulated trainer may run ahead of its GPU")
	launch := fs.Float64("launch", 0.25, "autoscale: the simulated trainer's own time per step (launching it), as a share of the GPU's step")
	peerRefresh := fs.Duration("peer-refresh", time.Second, "autoscale: the coordinator's --peer-refresh (how often it re-resolves the workers' name)")
	fs.Parse(args)

	o := bpOpts{seconds: time.Duration(*seconds * float64(time.Second)), sample: *sample, plots: *plots, data: *data, n: *n,
		transform: *transform, size: *size, shm: *shm, batch: *batch, prefetch: *prefetch, slowStep: *slowStep, slowWorkers: *slowWorkers,
		fastStep: *fastStep, twoWorkers: *twoWorkers, stallTarget: *stallTarget}
	for _, s := range strings.Split(*scenario, ",") {
		switch s = strings.TrimSpace(s); {
		case s == "all":
			for _, a := range bpAll {
				if !slices.Contains(o.scenarios, a) {
					o.scenarios = append(o.scenarios, a)
				}
			}
		case slices.Contains(bpScenarios, s):
			if !slices.Contains(o.scenarios, s) {
				o.scenarios = append(o.scenarios, s)
			}
		default:
			return fmt.Errorf("bench backpressure: --scenario %q: want slow, fast, two, autoscale or all (all but autoscale)\n%s", *scenario, backpressureUsage)
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
	o.as = asOpts{seconds: time.Duration(*asSeconds * float64(time.Second)), workerRate: *workerRate, gpuIPS: *gpuIPS, period: *hpaPeriod,
		adviseWindow: *adviseWindow, maxReplicas: *maxReplicas, runAhead: *runAhead, launch: *launch, peerRefresh: *peerRefresh}
	if o.as.gpuIPS == 0 {
		o.as.gpuIPS = asGPUDefault * o.as.workerRate * float64(o.batch)
	}
	for _, s := range strings.Split(*asStarts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > o.as.maxReplicas {
			return fmt.Errorf("bench backpressure: --autoscale-starts %q: want worker counts in 1..--max-replicas (%d), comma-separated", *asStarts, o.as.maxReplicas)
		}
		o.as.starts = append(o.as.starts, n)
	}
	switch {
	case o.as.maxReplicas < 1 || o.as.maxReplicas > 250:
		return errors.New("bench backpressure: want 1 <= --max-replicas <= 250\n" + backpressureUsage)
	case !(o.as.workerRate > 0 && o.as.workerRate <= 1e4) || !(o.as.gpuIPS > 0 && o.as.gpuIPS <= 1e7):
		return errors.New("bench backpressure: want 0 < --worker-rate <= 10000 and 0 < --gpu-ips <= 1e7\n" + backpressureUsage)
	case o.as.seconds < time.Second || o.as.seconds > 3*time.Hour || o.as.period < 100*time.Millisecond || o.as.period > o.as.seconds:
		return errors.New("bench backpressure: want 1 <= --autoscale-seconds <= 10800 and 100ms <= --hpa-period <= --autoscale-seconds\n" + backpressureUsage)
	case o.as.adviseWindow < time.Second || o.as.peerRefresh < 10*time.Millisecond:
		return errors.New("bench backpressure: want --advise-window >= 1s and --peer-refresh >= 10ms\n" + backpressureUsage)
	case o.as.runAhead < 1 || o.as.runAhead > 64 || !(o.as.launch >= 0 && o.as.launch < 1):
		return errors.New("bench backpressure: want 1 <= --run-ahead <= 64 and 0 <= --launch < 1\n" + backpressureUsage)
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
	case o.size < 0 || o.size > 4096:
		return errors.New("bench backpressure: want 0 <= --size <= 4096\n" + backpressureUsage)
	case !slices.Contains(transformpkg.PresetNames(), o.transform):
		return fmt.Errorf("bench backpressure: --transform %q: want one of %v", o.transform, transformpkg.PresetNames())
	}
	var lab Lab
	if slices.Contains(o.scenarios, "autoscale") {
		var err error
		if lab, err = needLab("bench backpressure --scenario autoscale", "a DNS server answering for the workers' name"); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.exe = exe
	// Bounded: every phase ends by itself; this bounds the rest (the
	// synthetic set, starting and stopping servers, a hang).
	bound := time.Duration(len(o.scenarios))*(2*o.seconds+90*time.Second) + 2*time.Minute
	if slices.Contains(o.scenarios, "autoscale") {
		bound += time.Duration(len(o.as.starts)) * (o.as.seconds + 2*time.Minute)
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	synthetic, remove, err := benchData(ctx, "backpressure", &o.data, o.n)
	if err != nil {
		return err
	}
	defer remove()
	o.synthetic = synthetic

	b := &bpBench{o: o, lab: lab}
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

// bpBench runs the scenarios.
type bpBench struct {
	o           bpOpts
	lab         Lab    // with --scenario autoscale: its DNS server
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
		case "autoscale":
			rep.Autoscale, err = b.autoscale(ctx)
			if rep.Autoscale != nil && o.plots != "" {
				for _, run := range rep.Autoscale.Runs {
					key := fmt.Sprintf("autoscale-from%d", run.Start)
					path := filepath.Join(o.plots, "backpressure-"+key+".png")
					if perr := rep.Autoscale.figure(run, o.stallTarget).writePNG(path); perr != nil {
						rep.Errors = append(rep.Errors, key+": plot: "+perr.Error())
					} else {
						rep.Plots[key] = path
					}
				}
			}
			if rep.Autoscale != nil {
				for _, run := range rep.Autoscale.Runs {
					for _, e := range run.Errors {
						rep.Errors = append(rep.Errors, fmt.Sprintf("autoscale from %d: %s", run.Start, e))
					}
				}
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
