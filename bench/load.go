package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/cpu"
	"github.com/stoker-dev/stoker/internal/helptext"
	transformpkg "github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// `stoker bench load`: one real `stoker serve` under several concurrent
// trainer streams, for a bounded time, on loopback. Each round runs two
// phases one after the other: (A) the fast streams alone, then (B) the fast
// streams beside slow ones that sleep after every batch. It reports the
// fast streams' images/s in A and in B (slow consumers must not slow the
// fast ones), every error, the server's RSS sampled every second against
// its --memory-budget (with a GC forced near each phase's end, through the
// server's loopback --pprof, to tell the live heap from garbage), and the
// server's goroutines and open streams before the phases and 2 s after each
// phase's last stream closed.

const loadUsage = "usage: stoker bench load [--streams 8] [--slow 4] [--seconds 60] [--slow-step 200ms] [--workers N] [--memory-budget BYTES] [--data DIR | --n 1000] [--transform imagenet-train] [--batch 32] [--prefetch 4] [--rounds 1] [--goroutine-margin 3] [--idle 0] [--json]"

// Goals the report checks the figures against.
const (
	loadFastRatioGoal = 0.9  // fast images/s with slow streams beside, over without
	loadFlatGoal      = 1.10 // RSS: last half's max over the first half's, in the last B phase
	// loadFlatHorizon: RSS growing at the last half's slope must not reach
	// the budget sooner.
	loadFlatHorizon = time.Hour
)

// loadOpts are bench load's flags.
type loadOpts struct {
	streams, slow   int
	seconds         time.Duration
	slowStep        time.Duration
	workers         int
	memoryBudget    int64
	data            string
	synthetic       bool
	n               int
	transform       string
	batch, prefetch int
	rounds          int
	goroutineMargin int
	idle            time.Duration
}

func runLoad(args []string) error {
	ctx := signalContext()
	fs := flag.NewFlagSet("bench load", flag.ExitOnError)
	fs.Usage = helptext.Usage(fs, helptext.Head("bench load", "[flags]", "Runs trainer streams, half of them slow, against one server and reports their rates and stalls."))
	streams := fs.Int("streams", 8, "concurrent trainer streams in phase B (each its own client connection and job)")
	slow := fs.Int("slow", 4, "of them, slow consumers (phase A runs only the others)")
	seconds := fs.Float64("seconds", 60, "duration of each phase")
	slowStep := fs.Duration("slow-step", 200*time.Millisecond, "how long a slow consumer sleeps after every batch")
	workers := fs.Int("workers", runtime.NumCPU(), "the server's decode goroutines (its --workers)")
	// -h says so, rather than this machine's count (docs/reference.md is
	// generated from -h).
	fs.Lookup("workers").DefValue = "the number of CPUs"
	budget := fs.Int64("memory-budget", 512<<20, "the server's --memory-budget in bytes; its RSS is checked against it")
	data := fs.String("data", "", "ImageFolder or WebDataset to read (default: a synthetic one, made as stoker mkdata makes it, removed afterwards)")
	n := fs.Int("n", 1000, "images of the synthetic dataset")
	transform := fs.String("transform", "imagenet-train", "transform preset: "+strings.Join(transformpkg.PresetNames(), " or "))
	batch := fs.Int("batch", 32, "samples per batch")
	prefetch := fs.Int("prefetch", 4, "each trainer's credits")
	rounds := fs.Int("rounds", 1, "rounds; each runs phase A then phase B; the B/A ratio is the median over the rounds")
	margin := fs.Int("goroutine-margin", 3, "how many goroutines over the baseline the server may have after the phases")
	idle := fs.Float64("idle", 0, "after the rounds, seconds the server is left with no stream, its RSS still sampled: does it give the streams' memory back?")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results")
	fs.Parse(args)

	o := loadOpts{streams: *streams, slow: *slow, seconds: time.Duration(*seconds * float64(time.Second)), slowStep: *slowStep,
		workers: *workers, memoryBudget: *budget, data: *data, n: *n, transform: *transform, batch: *batch,
		prefetch: *prefetch, rounds: *rounds, goroutineMargin: *margin, idle: time.Duration(*idle * float64(time.Second))}
	switch {
	case o.streams < 1 || o.streams > 256 || o.slow < 0 || o.slow >= o.streams:
		return errors.New("bench load: want 1 <= --streams <= 256 and 0 <= --slow < --streams (phase A needs a fast stream)\n" + loadUsage)
	case o.seconds <= 0 || o.seconds > time.Hour || o.slowStep < 0 || o.idle < 0 || o.idle > time.Hour:
		return errors.New("bench load: want 0 < --seconds <= 3600, --slow-step >= 0 and 0 <= --idle <= 3600\n" + loadUsage)
	case o.workers < 1 || o.batch < 1 || o.prefetch < 1 || o.rounds < 1 || o.memoryBudget < 1 || o.goroutineMargin < 0:
		return errors.New("bench load: --workers, --batch, --prefetch, --rounds and --memory-budget must be at least 1, --goroutine-margin at least 0\n" + loadUsage)
	case o.data == "" && o.n < 1:
		return errors.New("bench load: --n must be at least 1\n" + loadUsage)
	case !slices.Contains(transformpkg.PresetNames(), o.transform):
		return fmt.Errorf("bench load: --transform %q: want one of %v", o.transform, transformpkg.PresetNames())
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// Bounded: the phases end by themselves; this bounds everything else
	// (the synthetic set, starting and stopping the server, a hang).
	ctx, cancel := context.WithTimeout(ctx, time.Duration(o.rounds)*(2*o.seconds+30*time.Second)+o.idle+3*time.Minute)
	defer cancel()
	synthetic, remove, err := benchData(ctx, "load", &o.data, o.n)
	if err != nil {
		return err
	}
	defer remove()
	o.synthetic = synthetic

	lb := &loadBench{o: o, exe: exe}
	rep, err := lb.run(ctx)
	if err != nil {
		return fmt.Errorf("bench load: %w", err)
	}
	rep.print(os.Stdout)
	if *asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
			return err
		}
	}
	if !rep.OK {
		return fmt.Errorf("bench load: %d unexpected errors; server back to baseline after the phases: %v", len(rep.Errors), rep.BackToBaseline)
	}
	return nil
}

// loadReport is the benchmark's result: the JSON line, and the table.
type loadReport struct {
	Dataset      string  `json:"dataset"`
	Synthetic    bool    `json:"synthetic"`
	DatasetSize  uint64  `json:"dataset_size"`
	Transform    string  `json:"transform"`
	BatchSize    int     `json:"batch_size"`
	Prefetch     int     `json:"prefetch"`
	Streams      int     `json:"streams"`
	Slow         int     `json:"slow"`
	SlowStep     float64 `json:"slow_step_s"`
	Seconds      float64 `json:"seconds_per_phase"`
	Rounds       int     `json:"rounds"`
	Workers      int     `json:"server_workers"`
	MemoryBudget int64   `json:"memory_budget_bytes"`
	CPUs         int     `json:"cpus"`

	Phases []loadPhase `json:"phases"`
	// FastRatio is the fast streams' images/s in B over A, the median
	// over the rounds; goal >= loadFastRatioGoal.
	FastRatio    float64 `json:"fast_b_over_a"`
	FastRatioMet bool    `json:"fast_ratio_goal_met"`
	// AllRatio is all streams' images/s in B over A (the median over the
	// rounds): about 1 or more when the server is the bottleneck and
	// wastes none of its capacity on the slow streams (the fast ones then
	// lose what the slow ones take, and no more).
	AllRatio float64 `json:"all_b_over_a"`
	// CPURatio is images per server CPU-second in B over A (the median):
	// about 1 when the slow streams cost the server their images' work
	// and nothing more (no wasted work, no thrashing).
	CPURatio float64 `json:"images_per_server_cpu_b_over_a"`
	RSS      loadRSS `json:"rss"`
	// Baseline is the server (and this trainer process) before the
	// phases, after a warm-up stream closed; each phase's After is 2 s
	// after its last stream closed.
	Baseline        loadCounts `json:"baseline"`
	After           loadCounts `json:"after"` // the last phase's
	GoroutineMargin int        `json:"goroutine_margin"`
	// BackToBaseline: after every phase, stoker_streams_active at the
	// baseline and go_goroutines within GoroutineMargin of it.
	BackToBaseline bool `json:"back_to_baseline"`
	// Errors are the unexpected ones: anything but the deliberate end of
	// a phase.
	// Idle is the server's memory after the last stream ended (--idle).
	Idle         *loadIdle `json:"idle,omitempty"`
	Errors       []string  `json:"unexpected_errors"`
	SampleErrors int64     `json:"sample_errors"`
	// ServerLog is the end of the server's log (--log-level warn: empty
	// when nothing went wrong).
	ServerLog string `json:"server_log,omitempty"`
	OK        bool   `json:"ok"` // no unexpected errors, and back to baseline
}

// loadIdle is the server's memory while it is left with no stream after
// the rounds: whether the streams' memory goes back to the OS.
type loadIdle struct {
	Seconds float64 `json:"seconds"`
	// Start is the last sample before the idle time (2 s after the last
	// stream closed), End its last sample.
	Start rssSample `json:"start"`
	End   rssSample `json:"end"`
	// EveryTen is the RSS every 10 s of it (bytes).
	EveryTen []int64 `json:"rss_every_10s_bytes"`
}

// loadPhase is one phase of one round.
type loadPhase struct {
	Round   int          `json:"round"`
	Name    string       `json:"phase"` // "A": fast streams alone; "B": with the slow ones
	Seconds float64      `json:"seconds"`
	Streams []loadStream `json:"streams"`
	// Images/s summed over the fast streams, the slow ones, and all.
	FastImagesPerSec float64 `json:"fast_images_per_sec"`
	SlowImagesPerSec float64 `json:"slow_images_per_sec"`
	AllImagesPerSec  float64 `json:"all_images_per_sec"`
	// Cores busy on average: the server's (from /proc) and this
	// process's, the trainers'. ImagesPerServerCPU is AllImagesPerSec
	// over ServerCores: what a CPU-second of the server makes, steadier
	// than images/s on a shared machine.
	ServerCores        float64 `json:"server_cpu_cores"`
	TrainerCores       float64 `json:"trainer_cpu_cores"`
	ImagesPerServerCPU float64 `json:"images_per_server_cpu_s"`
	// The slow streams' share of the phase spent sleeping and waiting
	// for batches, on average: a consumer slowed by its sleeps alone
	// waits about 0; one that waits was held back by the server too, and
	// took no more than the others' share of it.
	SlowSleptFrac  float64 `json:"slow_slept_frac,omitempty"`
	SlowWaitedFrac float64 `json:"slow_waited_frac,omitempty"`
	RSSMax         int64   `json:"rss_max_bytes"`
	// GC is what a GC forced shortly before the phase's end found.
	GC    *loadGC    `json:"forced_gc,omitempty"`
	After loadCounts `json:"after"`
}

// loadGC is a GC forced (through the server's /debug/pprof/heap?gc=1) while
// the phase's streams run: the live heap under this load, and the heap size
// the Go GC (GOGC, no GOMEMLIMIT) lets it grow to before collecting again.
// Ceiling is about the RSS the server settles at under this load: what is
// not Go heap (Go's other memory, C memory, thread stacks) plus that goal.
type loadGC struct {
	RSS         int64   `json:"rss_bytes"`         // before the GC
	HeapInuse   int64   `json:"heap_inuse_bytes"`  // before the GC
	Live        int64   `json:"live_heap_bytes"`   // heap_alloc right after it
	NextGC      int64   `json:"next_gc_bytes"`     // right after it
	GOGCPercent float64 `json:"gogc_percent"`      // go_gc_gogc_percent
	Ceiling     int64   `json:"rss_ceiling_bytes"` // RSS - HeapInuse + NextGC
	Error       string  `json:"error,omitempty"`   // why it could not be measured
}

// loadStream is one trainer stream's phase.
type loadStream struct {
	Index        int     `json:"index"`
	Slow         bool    `json:"slow"`
	Seed         uint64  `json:"seed"`
	Images       int64   `json:"images"`
	Batches      int64   `json:"batches"`
	ImagesPerSec float64 `json:"images_per_sec"`
	// Waited is the time Next blocked for batches; Slept the slow
	// consumer's deliberate sleeps.
	Waited       float64 `json:"waited_s"`
	Slept        float64 `json:"slept_s"`
	SampleErrors int64   `json:"sample_errors"`
	Error        string  `json:"error,omitempty"`
}

// loadCounts are the server's go_goroutines and stoker_streams_active, and
// this process's goroutines.
type loadCounts struct {
	Goroutines        float64 `json:"go_goroutines"`
	StreamsActive     float64 `json:"stoker_streams_active"`
	TrainerGoroutines int     `json:"trainer_goroutines"`
}

// loadRSS is the server's resident memory, sampled every second.
type loadRSS struct {
	Samples      []rssSample `json:"samples"`
	Max          int64       `json:"max_bytes"`
	MaxPhase     string      `json:"max_phase"`
	WithinBudget bool        `json:"within_budget"`
	// Flatness over the last phase B (full load): the largest sample of
	// its last half over that of its first half, and the least-squares
	// slope over its last half.
	FlatPhase      string  `json:"flat_phase"`
	FirstHalfMax   int64   `json:"first_half_max_bytes"`
	LastHalfMax    int64   `json:"last_half_max_bytes"`
	LastOverFirst  float64 `json:"last_over_first"`
	SlopeMiBPerMin float64 `json:"last_half_slope_mib_per_min"`
	// MinutesToBudget is when the RSS would reach the budget at that
	// slope (0: it does not grow).
	MinutesToBudget float64 `json:"minutes_to_budget_at_slope,omitempty"`
	// Flat: LastOverFirst within loadFlatGoal, and the slope would not
	// reach the budget within loadFlatHorizon.
	Flat bool `json:"flat"`
	// End is the last sample of FlatPhase, and EndSlopes the last-half
	// slopes (MiB/min) of its parts: what holds the memory, what grows.
	// BeforeGC is End's beforeGC: about the RSS the server may reach
	// before its next GC, should the load go on; GCs counts the GC cycles
	// in FlatPhase.
	End       rssSample     `json:"end"`
	EndSlopes loadRSSSlopes `json:"end_slopes_mib_per_min"`
	BeforeGC  int64         `json:"rss_before_next_gc_bytes"`
	GCs       int64         `json:"gcs_in_flat_phase"`
	// Ceiling is FlatPhase's forced GC's: about the RSS the server settles
	// at under this load once the GC paces it (0: not measured).
	Ceiling             int64 `json:"rss_ceiling_bytes"`
	CeilingWithinBudget bool  `json:"rss_ceiling_within_budget"`
}

// loadRSSSlopes are least-squares slopes, MiB per minute.
type loadRSSSlopes struct {
	RSS         float64 `json:"rss"`
	GoHeapInuse float64 `json:"go_heap_inuse"`
	GoHeld      float64 `json:"go_held"`
	NonGo       float64 `json:"non_go"`
}

// rssSample is one reading of /proc/PID/status VmRSS, with the server's Go
// memory and thread figures from its /metrics read right after (0 when the
// scrape failed): GoHeapInuse is go_memstats_heap_inuse_bytes; GoHeld is
// go_memstats_sys_bytes less go_memstats_heap_released_bytes, what the Go
// runtime holds from the OS (an upper bound on its share of the RSS; the
// rest is C memory, such as the JPEG decoder's, and thread stacks).
// GoHeapAlloc (go_memstats_heap_alloc_bytes) counts live objects and
// garbage not yet collected; GoNextGC (go_memstats_next_gc_bytes) is the
// heap size at which the next GC starts, which the heap may grow to.
type rssSample struct {
	T           float64 `json:"t"` // seconds since the first sample
	Phase       string  `json:"phase"`
	Bytes       int64   `json:"bytes"`
	GoHeapInuse int64   `json:"go_heap_inuse_bytes,omitempty"`
	GoHeapAlloc int64   `json:"go_heap_alloc_bytes,omitempty"`
	GoNextGC    int64   `json:"go_next_gc_bytes,omitempty"`
	GoHeld      int64   `json:"go_held_bytes,omitempty"`
	GCCycles    int64   `json:"gc_cycles,omitempty"`
	Goroutines  int     `json:"goroutines,omitempty"`
	Threads     int     `json:"threads,omitempty"`
}

// nonGo is the RSS the Go runtime does not account for (at least).
func (s rssSample) nonGo() int64 { return s.Bytes - s.GoHeld }

// beforeGC is about the RSS the server may reach before its next GC: the
// heap grows by the garbage it makes until it reaches GoNextGC.
func (s rssSample) beforeGC() int64 { return s.Bytes + max(s.GoNextGC-s.GoHeapAlloc, 0) }

// loadBench runs the benchmark.
type loadBench struct {
	o       loadOpts
	exe     string
	srv     *scaleProc
	metrics string // the server's --metrics address

	mu      sync.Mutex
	samples []rssSample
	phase   atomic.Value // string: the phase the RSS samples are tagged with
}

// run starts the server, runs the rounds, and stops the server.
func (b *loadBench) run(ctx context.Context) (rep *loadReport, err error) {
	o := b.o
	rep = &loadReport{Dataset: o.data, Synthetic: o.synthetic, Transform: o.transform, BatchSize: o.batch, Prefetch: o.prefetch,
		Streams: o.streams, Slow: o.slow, SlowStep: o.slowStep.Seconds(), Seconds: o.seconds.Seconds(), Rounds: o.rounds,
		Workers: o.workers, MemoryBudget: o.memoryBudget, CPUs: runtime.NumCPU(), GoroutineMargin: o.goroutineMargin,
		Errors: []string{}}
	if b.metrics, err = freeLoopbackAddr(); err != nil {
		return nil, err
	}
	// start is bench scale's: `stoker serve` on 127.0.0.1:0, --addr-file,
	// --log-level warn, --grace 2s, killed should this process die.
	sb := &scaleBench{o: scaleOpts{data: o.data, exe: b.exe}}
	b.srv, err = sb.start(ctx, "server", "", "--workers", strconv.Itoa(o.workers), "--metrics", b.metrics, "--pprof",
		"--memory-budget", strconv.FormatInt(o.memoryBudget, 10),
		// All streams come from one host, and a closing phase's may
		// overlap the next one's for a moment.
		"--max-streams-per-client", strconv.Itoa(max(16, 2*o.streams+1)))
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			stopScaleProcs([]*scaleProc{b.srv})
		}
		if err != nil {
			if tail := b.srv.log.String(); tail != "" {
				err = fmt.Errorf("%w\n--- server log (end) ---\n%s", err, tail)
			}
		}
	}()

	b.phase.Store("warm-up")
	samplerDone := make(chan struct{})
	samplerCtx, stopSampler := context.WithCancel(ctx)
	go func() { defer close(samplerDone); b.sampleRSS(samplerCtx) }()
	defer func() { stopSampler(); <-samplerDone }()

	if rep.DatasetSize, err = b.warmUp(ctx); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if rep.Baseline, err = b.settle(ctx); err != nil {
		return nil, err
	}
	rep.BackToBaseline = true
	for round := 1; round <= o.rounds; round++ {
		for _, name := range []string{"A", "B"} {
			ph, err := b.runPhase(ctx, round, name)
			if err != nil {
				return nil, fmt.Errorf("round %d phase %s: %w", round, name, err)
			}
			for _, s := range ph.Streams {
				rep.SampleErrors += s.SampleErrors
				if s.Error != "" {
					rep.Errors = append(rep.Errors, fmt.Sprintf("round %d phase %s stream %d (%s): %s", round, name, s.Index, speed(s.Slow), s.Error))
				}
			}
			if ph.After.StreamsActive != rep.Baseline.StreamsActive || ph.After.Goroutines > rep.Baseline.Goroutines+float64(o.goroutineMargin) {
				rep.BackToBaseline = false
			}
			rep.After = ph.After
			rep.Phases = append(rep.Phases, ph)
			fmt.Fprintf(os.Stderr, "round %d phase %s: fast %.1f images/s, slow %.1f images/s; server %.0f goroutines, %.0f streams 2 s after\n",
				round, name, ph.FastImagesPerSec, ph.SlowImagesPerSec, ph.After.Goroutines, ph.After.StreamsActive)
		}
	}
	if o.idle > 0 {
		b.phase.Store("idle")
		select {
		case <-time.After(o.idle + time.Second): // the sample at o.idle included
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b.phase.Store("stop")
	stopped = true
	if serr := stopScaleProcs([]*scaleProc{b.srv}); serr != nil {
		rep.Errors = append(rep.Errors, "server stop: "+serr.Error())
	}
	rep.ServerLog = b.srv.log.String()
	stopSampler()
	<-samplerDone
	rep.summarize(b.samples)
	return rep, nil
}

func speed(slow bool) string {
	if slow {
		return "slow"
	}
	return "fast"
}

// spec is stream i's job in a phase: its own seed, so its own job.
func (b *loadBench) spec(seed uint64) *stokerv1.JobSpec {
	return &stokerv1.JobSpec{
		Dataset: "bench", Transform: &stokerv1.TransformSpec{Preset: b.o.transform},
		BatchSize: uint32(b.o.batch), Seed: seed, Shuffle: true,
	}
}

// warmUp runs a few batches on one stream, so that the files are in the
// page cache and the server's lazily started parts are up before the
// baseline is read; it returns the dataset's size.
func (b *loadBench) warmUp(ctx context.Context) (uint64, error) {
	c, err := client.New(b.srv.addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	l := c.Loader(b.spec(1), client.WithEpochs(0), client.WithPrefetch(b.o.prefetch), client.WithTimeout(time.Minute))
	defer l.Close()
	for range max(8, 2*b.o.prefetch) {
		bt, err := l.Next(ctx)
		if err != nil {
			return 0, err
		}
		bt.Release()
	}
	return l.Info().GetDatasetSize(), nil
}

// settle waits 2 s after the last stream closed and reads the counts.
func (b *loadBench) settle(ctx context.Context) (loadCounts, error) {
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return loadCounts{}, ctx.Err()
	}
	ms, err := ScrapeMetrics(ctx, b.metrics)
	if err != nil {
		return loadCounts{}, fmt.Errorf("server metrics: %w", err)
	}
	g, ok1 := ms["go_goroutines"]
	s, ok2 := ms["stoker_streams_active"]
	if !ok1 || !ok2 {
		return loadCounts{}, fmt.Errorf("server metrics: no go_goroutines (%v) or stoker_streams_active (%v)", ok1, ok2)
	}
	return loadCounts{Goroutines: g, StreamsActive: s, TrainerGoroutines: runtime.NumGoroutine()}, nil
}

// runPhase runs one phase: A, the fast streams alone; B, all of them, the
// first o.slow slow. Every stream stops when the phase's time is up.
func (b *loadBench) runPhase(ctx context.Context, round int, name string) (loadPhase, error) {
	o := b.o
	ph := loadPhase{Round: round, Name: name}
	b.phase.Store(fmt.Sprintf("%s%d", name, round))
	n, slow := o.streams-o.slow, 0
	if name == "B" {
		n, slow = o.streams, o.slow
	}
	ph.Streams = make([]loadStream, n)
	cpu0, err := scaleCPU([]*scaleProc{b.srv})
	if err != nil {
		return ph, err
	}
	trainer0 := cpu.ProcessTime()
	start := time.Now()
	pctx, cancel := context.WithDeadline(ctx, start.Add(o.seconds))
	defer cancel()
	phaseNo := uint64(0)
	if name == "B" {
		phaseNo = 1
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Late in the phase, under its full load; under ctx, not pctx: on
		// a busy machine the GC and its profile may outlast the phase.
		select {
		case <-time.After(o.seconds - min(5*time.Second, o.seconds/4)):
			ph.GC = b.forceGC(ctx, fmt.Sprintf("%s%d-gc", name, round))
		case <-pctx.Done():
		}
	}()
	for i := range n {
		s := &ph.Streams[i]
		// Seed 1 is the warm-up's; every stream of every phase has its own.
		s.Index, s.Slow, s.Seed = i, i < slow, 1000*uint64(round)+100*phaseNo+uint64(i)+2
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.stream(pctx, s)
		}()
	}
	wg.Wait()
	ph.Seconds = time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return ph, err // the whole benchmark was cut short, not the phase
	}
	cpu1, err := scaleCPU([]*scaleProc{b.srv})
	if err != nil {
		return ph, err
	}
	ph.ServerCores = (cpu1[0] - cpu0[0]).Seconds() / ph.Seconds
	ph.TrainerCores = (cpu.ProcessTime() - trainer0).Seconds() / ph.Seconds
	for i := range ph.Streams {
		s := &ph.Streams[i]
		s.ImagesPerSec = float64(s.Images) / ph.Seconds
		if s.Slow {
			ph.SlowImagesPerSec += s.ImagesPerSec
			ph.SlowSleptFrac += s.Slept / ph.Seconds / float64(slow)
			ph.SlowWaitedFrac += s.Waited / ph.Seconds / float64(slow)
		} else {
			ph.FastImagesPerSec += s.ImagesPerSec
		}
		ph.AllImagesPerSec += s.ImagesPerSec
	}
	if ph.ServerCores > 0 {
		ph.ImagesPerServerCPU = ph.AllImagesPerSec / ph.ServerCores
	}
	b.phase.Store(fmt.Sprintf("%s%d-settle", name, round))
	ph.After, err = b.settle(ctx)
	return ph, err
}

// stream is one trainer: its own connection and job, epoch after epoch
// until ctx's deadline; a slow one sleeps o.slowStep after every batch.
// Any error but ctx's end is recorded in s.Error.
func (b *loadBench) stream(ctx context.Context, s *loadStream) {
	c, err := client.New(b.srv.addr)
	if err != nil {
		s.Error = err.Error()
		return
	}
	defer c.Close()
	l := c.Loader(b.spec(s.Seed), client.WithEpochs(0), client.WithPrefetch(b.o.prefetch), client.WithTimeout(time.Minute))
	defer func() {
		s.Waited = l.Waited().Seconds()
		l.Close()
	}()
	for {
		bt, err := l.Next(ctx)
		if err == nil && ctx.Err() != nil {
			bt.Release() // after the phase's end: not counted
			return
		}
		if err != nil {
			if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
				if errors.Is(err, io.EOF) {
					err = fmt.Errorf("io.EOF from a loader of endless epochs: %w", err)
				}
				s.Error = err.Error()
			}
			return
		}
		if len(bt.Indices) == 0 || len(bt.Indices) > b.o.batch {
			s.Error = fmt.Sprintf("batch %d of epoch %d: %d samples in a job of batches of %d", bt.Number, bt.Epoch, len(bt.Indices), b.o.batch)
			return
		}
		s.Batches++
		s.Images += int64(len(bt.Indices))
		s.SampleErrors += int64(len(bt.Errors))
		bt.Release()
		if s.Slow && b.o.slowStep > 0 {
			t0 := time.Now()
			select {
			case <-time.After(b.o.slowStep):
			case <-ctx.Done():
			}
			s.Slept += time.Since(t0).Seconds()
		}
	}
}

// forceGC has the server collect its garbage (pprof's heap profile with
// gc=1) and reads its memory before and after. The RSS samples from the GC
// on are tagged phase: the GC's doing, not the load's, they are left out of
// the phase's figures (flatness, max).
func (b *loadBench) forceGC(ctx context.Context, phase string) *loadGC {
	g := &loadGC{}
	rss, err := vmRSS(fmt.Sprintf("/proc/%d/status", b.srv.cmd.Process.Pid))
	var before map[string]float64
	if err == nil {
		before, err = ScrapeMetrics(ctx, b.metrics)
	}
	if err == nil {
		b.phase.Store(phase)
		err = httpGet(ctx, "http://"+b.metrics+"/debug/pprof/heap?gc=1")
	}
	var after map[string]float64
	if err == nil {
		after, err = ScrapeMetrics(ctx, b.metrics)
	}
	if err != nil {
		g.Error = err.Error()
		return g
	}
	g.RSS, g.HeapInuse = rss, int64(before["go_memstats_heap_inuse_bytes"])
	g.Live, g.NextGC = int64(after["go_memstats_heap_alloc_bytes"]), int64(after["go_memstats_next_gc_bytes"])
	g.GOGCPercent = after["go_gc_gogc_percent"]
	g.Ceiling = g.RSS - g.HeapInuse + g.NextGC
	return g
}

// httpGet GETs url and discards the body; an error unless 200.
func httpGet(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// sampleRSS reads the server's VmRSS every second until ctx ends.
func (b *loadBench) sampleRSS(ctx context.Context) {
	path := fmt.Sprintf("/proc/%d/status", b.srv.cmd.Process.Pid)
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if rss, err := vmRSS(path); err == nil {
			s := rssSample{T: math.Round(time.Since(start).Seconds()*100) / 100, Phase: b.phase.Load().(string), Bytes: rss}
			if ms, err := ScrapeMetrics(ctx, b.metrics); err == nil {
				s.GoHeapInuse = int64(ms["go_memstats_heap_inuse_bytes"])
				s.GoHeapAlloc = int64(ms["go_memstats_heap_alloc_bytes"])
				s.GoNextGC = int64(ms["go_memstats_next_gc_bytes"])
				s.GCCycles = int64(ms["go_gc_duration_seconds_count"])
				s.GoHeld = int64(ms["go_memstats_sys_bytes"] - ms["go_memstats_heap_released_bytes"])
				s.Goroutines, s.Threads = int(ms["go_goroutines"]), int(ms["go_threads"])
			}
			b.mu.Lock()
			b.samples = append(b.samples, s)
			b.mu.Unlock()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

// vmRSS reads the VmRSS line of a /proc/PID/status file, in bytes.
func vmRSS(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
			return 0, fmt.Errorf("%s: unexpected VmRSS line %q", path, line)
		}
	}
	return 0, fmt.Errorf("%s: no VmRSS", path)
}

// summarize computes the ratio, the RSS figures and the verdict.
func (rep *loadReport) summarize(samples []rssSample) {
	var ratios, all, cpu []float64
	for i, ph := range rep.Phases {
		if ph.Name == "B" && i > 0 && rep.Phases[i-1].Name == "A" && rep.Phases[i-1].FastImagesPerSec > 0 {
			ratios = append(ratios, ph.FastImagesPerSec/rep.Phases[i-1].FastImagesPerSec)
			all = append(all, ph.AllImagesPerSec/rep.Phases[i-1].AllImagesPerSec)
			if a := rep.Phases[i-1].ImagesPerServerCPU; a > 0 {
				cpu = append(cpu, ph.ImagesPerServerCPU/a)
			}
		}
	}
	rep.FastRatio, rep.AllRatio, rep.CPURatio = median(ratios), median(all), median(cpu)
	rep.FastRatioMet = rep.FastRatio >= loadFastRatioGoal

	r := &rep.RSS
	r.Samples = samples
	byPhase := map[string][]rssSample{}
	for _, s := range samples {
		if s.Bytes > r.Max {
			r.Max, r.MaxPhase = s.Bytes, s.Phase
		}
		byPhase[s.Phase] = append(byPhase[s.Phase], s)
	}
	r.WithinBudget = len(samples) > 0 && r.Max <= rep.MemoryBudget
	for i := range rep.Phases {
		ph := &rep.Phases[i]
		for _, s := range byPhase[fmt.Sprintf("%s%d", ph.Name, ph.Round)] {
			ph.RSSMax = max(ph.RSSMax, s.Bytes)
		}
	}
	last := fmt.Sprintf("B%d", rep.Rounds)
	if ss := byPhase[last]; len(ss) >= 2 {
		r.FlatPhase = last
		h := len(ss) / 2
		for _, s := range ss[:h] {
			r.FirstHalfMax = max(r.FirstHalfMax, s.Bytes)
		}
		for _, s := range ss[h:] {
			r.LastHalfMax = max(r.LastHalfMax, s.Bytes)
		}
		r.LastOverFirst = float64(r.LastHalfMax) / float64(r.FirstHalfMax)
		perMin := func(f func(rssSample) int64) float64 { return slope(ss[h:], f) * 60 / (1 << 20) }
		r.SlopeMiBPerMin = perMin(func(s rssSample) int64 { return s.Bytes })
		r.End = ss[len(ss)-1]
		r.BeforeGC = r.End.beforeGC()
		r.GCs = r.End.GCCycles - ss[0].GCCycles
		for _, ph := range rep.Phases {
			if fmt.Sprintf("%s%d", ph.Name, ph.Round) == last && ph.GC != nil && ph.GC.Error == "" {
				r.Ceiling = ph.GC.Ceiling
				r.CeilingWithinBudget = r.Ceiling <= rep.MemoryBudget
			}
		}
		r.EndSlopes = loadRSSSlopes{RSS: r.SlopeMiBPerMin,
			GoHeapInuse: perMin(func(s rssSample) int64 { return s.GoHeapInuse }),
			GoHeld:      perMin(func(s rssSample) int64 { return s.GoHeld }),
			NonGo:       perMin(rssSample.nonGo)}
		if r.SlopeMiBPerMin > 0 {
			r.MinutesToBudget = max(mib(rep.MemoryBudget-r.End.Bytes), 0) / r.SlopeMiBPerMin
		}
		// Growth that the GC's pacing bounds below the budget is flat
		// enough: the heap fills with garbage up to its goal, then drops.
		r.Flat = r.LastOverFirst <= loadFlatGoal &&
			(r.MinutesToBudget == 0 || r.MinutesToBudget >= loadFlatHorizon.Minutes() || r.CeilingWithinBudget)
	}
	rep.summarizeIdle(samples)
	rep.OK = len(rep.Errors) == 0 && rep.BackToBaseline
}

// summarizeIdle fills rep.Idle from the samples of the idle time, if any.
func (rep *loadReport) summarizeIdle(samples []rssSample) {
	first := slices.IndexFunc(samples, func(s rssSample) bool { return s.Phase == "idle" })
	if first < 1 {
		return
	}
	id := &loadIdle{Start: samples[first-1]}
	next := 0.0
	for _, s := range samples[first:] {
		if s.Phase != "idle" {
			break
		}
		id.End = s
		if t := s.T - id.Start.T; t >= next {
			id.EveryTen = append(id.EveryTen, s.Bytes)
			next += 10
		}
	}
	id.Seconds = id.End.T - id.Start.T
	rep.Idle = id
}

// slope is the least-squares slope of f over time, per second.
func slope(ss []rssSample, f func(rssSample) int64) float64 {
	if len(ss) < 2 {
		return 0
	}
	var st, sb float64
	for _, s := range ss {
		st += s.T
		sb += float64(f(s))
	}
	mt, mb := st/float64(len(ss)), sb/float64(len(ss))
	var num, den float64
	for _, s := range ss {
		num += (s.T - mt) * (float64(f(s)) - mb)
		den += (s.T - mt) * (s.T - mt)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// print writes the human table.
func (rep *loadReport) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	synthetic := ""
	if rep.Synthetic {
		synthetic = ", synthetic"
	}
	fmt.Fprintf(tw, "stoker bench load\t%s (%d images%s)\n", rep.Dataset, rep.DatasetSize, synthetic)
	fmt.Fprintf(tw, "job\t%s, batch %d, prefetch %d; each stream its own connection and seed\n", rep.Transform, rep.BatchSize, rep.Prefetch)
	fmt.Fprintf(tw, "server\t%d decode goroutine(s), --memory-budget %.0f MiB; %d CPUs here (trainers in this process)\n", rep.Workers, mib(rep.MemoryBudget), rep.CPUs)
	fmt.Fprintf(tw, "phases\t%.0f s each, %d round(s): A = %d fast streams alone; B = the same beside %d slow ones (sleep %v after every batch)\n",
		rep.Seconds, rep.Rounds, rep.Streams-rep.Slow, rep.Slow, time.Duration(rep.SlowStep*float64(time.Second)))
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "round\tphase\tstream\tkind\timages\timages/s\twaited s\tslept s\terror")
	for _, ph := range rep.Phases {
		for _, s := range ph.Streams {
			e := "-"
			if s.Error != "" {
				e = s.Error
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%s\n", ph.Round, ph.Name, s.Index, speed(s.Slow), s.Images, s.ImagesPerSec, s.Waited, s.Slept, e)
		}
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "round\tphase\tfast images/s\tslow images/s\tall images/s\tserver cores\timages/server CPU-s\ttrainer cores\tRSS max MiB\tgoroutines after\tstreams after")
	for _, ph := range rep.Phases {
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.1f\t%.1f\t%.2f\t%.0f\t%.2f\t%.1f\t%.0f\t%.0f\n", ph.Round, ph.Name, ph.FastImagesPerSec, ph.SlowImagesPerSec,
			ph.AllImagesPerSec, ph.ServerCores, ph.ImagesPerServerCPU, ph.TrainerCores, mib(ph.RSSMax), ph.After.Goroutines, ph.After.StreamsActive)
	}
	tw.Flush()
	fmt.Fprintln(w)
	r := rep.RSS
	fmt.Fprintf(w, "fast streams, B over A: %.3f (goal >= %.2f: %s)\n", rep.FastRatio, loadFastRatioGoal, verdict(rep.FastRatioMet))
	fmt.Fprintf(w, "all streams, B over A: %.3f; images per server CPU-second, B over A: %.3f (about 1: the slow streams cost the server their images' work and no more)\n", rep.AllRatio, rep.CPURatio)
	for _, ph := range rep.Phases {
		if ph.Name == "B" && rep.Slow > 0 {
			fmt.Fprintf(w, "slow streams in B%d: %.0f%% of the phase asleep, %.0f%% waiting for batches\n", ph.Round, 100*ph.SlowSleptFrac, 100*ph.SlowWaitedFrac)
		}
	}
	fmt.Fprintf(w, "server RSS: max %.1f MiB (in %s) of a %.0f MiB budget (%s), %d samples\n", mib(r.Max), r.MaxPhase, mib(rep.MemoryBudget), verdict(r.WithinBudget), len(r.Samples))
	if r.FlatPhase != "" {
		fmt.Fprintf(w, "  flat over %s: max of the last half %.1f MiB over the first half's %.1f MiB = %.3f (goal <= %.2f); last-half slope %+.2f MiB/min",
			r.FlatPhase, mib(r.LastHalfMax), mib(r.FirstHalfMax), r.LastOverFirst, loadFlatGoal, r.SlopeMiBPerMin)
		if r.MinutesToBudget > 0 {
			fmt.Fprintf(w, ", at which it reaches the budget in %.0f min", r.MinutesToBudget)
		}
		fmt.Fprintf(w, " (goal: not within %v, or the GC ceiling below within the budget): %s\n", loadFlatHorizon, verdict(r.Flat))
		e, sl := r.End, r.EndSlopes
		fmt.Fprintf(w, "  at the end of %s: RSS %.1f MiB = Go runtime %.1f MiB (heap in use %.1f) + the rest %.1f MiB (C, thread stacks); %d goroutines, %d threads\n",
			r.FlatPhase, mib(e.Bytes), mib(e.GoHeld), mib(e.GoHeapInuse), mib(e.nonGo()), e.Goroutines, e.Threads)
		fmt.Fprintf(w, "  last-half slopes, MiB/min: RSS %+.2f, Go runtime %+.2f, Go heap in use %+.2f, the rest %+.2f\n", sl.RSS, sl.GoHeld, sl.GoHeapInuse, sl.NonGo)
	}
	for _, ph := range rep.Phases {
		g := ph.GC
		switch {
		case g == nil:
		case g.Error != "":
			fmt.Fprintf(w, "  GC forced in %s%d: not measured: %s\n", ph.Name, ph.Round, g.Error)
		default:
			within := "within"
			if g.Ceiling > rep.MemoryBudget {
				within = "OVER"
			}
			fmt.Fprintf(w, "  GC forced near the end of %s%d: live heap %.1f MiB (heap in use before %.1f MiB, RSS %.1f MiB); GOGC %.0f lets the heap reach %.1f MiB: RSS ceiling under this load about %.1f MiB (%s the budget)\n",
				ph.Name, ph.Round, mib(g.Live), mib(g.HeapInuse), mib(g.RSS), g.GOGCPercent, mib(g.NextGC), mib(g.Ceiling), within)
		}
	}
	if id := rep.Idle; id != nil {
		var ten []string
		for _, b := range id.EveryTen {
			ten = append(ten, fmt.Sprintf("%.0f", mib(b)))
		}
		fmt.Fprintf(w, "idle %.0f s after the last stream: RSS every 10 s, MiB: %s\n", id.Seconds, strings.Join(ten, " "))
		for _, e := range []struct {
			what string
			s    rssSample
		}{{"at its start", id.Start}, {"at its end", id.End}} {
			fmt.Fprintf(w, "  %s: RSS %.1f MiB = Go runtime %.1f MiB (heap in use %.1f) + the rest %.1f MiB (C, thread stacks); %d GC cycles so far\n",
				e.what, mib(e.s.Bytes), mib(e.s.GoHeld), mib(e.s.GoHeapInuse), mib(e.s.nonGo()), e.s.GCCycles)
		}
	}
	fmt.Fprintf(w, "server go_goroutines: baseline %.0f, 2 s after the last stream %.0f (margin %d); stoker_streams_active: baseline %.0f, after %.0f: back to baseline: %v\n",
		rep.Baseline.Goroutines, rep.After.Goroutines, rep.GoroutineMargin, rep.Baseline.StreamsActive, rep.After.StreamsActive, rep.BackToBaseline)
	fmt.Fprintf(w, "trainer goroutines (this process): baseline %d, after %d\n", rep.Baseline.TrainerGoroutines, rep.After.TrainerGoroutines)
	fmt.Fprintf(w, "sample errors: %d\n", rep.SampleErrors)
	if len(rep.Errors) == 0 {
		fmt.Fprintln(w, "unexpected errors: none")
	} else {
		fmt.Fprintf(w, "unexpected errors: %d\n", len(rep.Errors))
		for _, e := range rep.Errors {
			fmt.Fprintln(w, "  "+e)
		}
	}
	if rep.ServerLog != "" {
		fmt.Fprintf(w, "server log (warnings and worse, end):\n%s", rep.ServerLog)
	}
}
