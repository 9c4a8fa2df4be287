package bench

// `stoker bench backpressure --scenario autoscale`: the advisor's
// stoker_workers_recommended followed by an autoscaler, up and down
// (issue 17), on real `stoker serve` processes on loopback.
//
//   - The trainer is simulated in this process and behaves like CUDA (see
//     simGPU): a Go client.Loader feeds a "GPU" that consumes a batch per
//     fixed step from a queue of two steps' run-ahead, so that the trainer
//     waits in Next while the GPU still works. The GPU's real idle share
//     over the last 3 s goes to a file the coordinator reads as its GPU
//     monitor (--bench-gpu-idle-file), in place of NVML.
//   - Workers have a known capacity whatever this machine: each is a
//     `stoker serve --workers 1 --bench-replay --bench-rate R` (a copy per
//     batch instead of a decode, and a server of R batches per second), so
//     eight of them on two cores each make the R they claim.
//   - The coordinator (--workers 0 --verify-fraction -1: replayed pixels are
//     not the plan's; indices and labels are checked) follows the workers
//     through a DNS name
//     (--peers dns://RESOLVER/workers:PORT, --peer-refresh 1s) that a DNS
//     server in this process (the lab's, bench/lab.go: bin/stoker-lab runs
//     this scenario) answers with the addresses of the workers up,
//     127.0.0.2, .3, ... on one port, as a Kubernetes headless Service does.
//   - An HPA-like loop: every --hpa-period (15 s, the HPA's sync period),
//     replicas <- stoker_workers_recommended scraped from the coordinator's
//     /metrics, bounded by 1 and --max-replicas; new workers start and join
//     the name, removed ones leave it and get SIGTERM (they drain). The loop
//     has no stabilization of its own: the server publishes rises at once
//     and falls only after they held for --advise-window (60 s), which is
//     where the stabilization is (a real HPA adds its own behavior on top).
//
// Each run starts from a number of workers (--autoscale-starts 1,8) and
// lasts --autoscale-seconds; the verdict: the replicas settle on the count
// that just saturates the simulated GPU (ceil of its rate over a worker's),
// within 3 minutes going up and 5 going down, without reversing direction.

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/freeport"
	"github.com/stoker-dev/stoker/internal/opspec"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// asOpts are the autoscale scenario's flags.
type asOpts struct {
	starts       []int
	seconds      time.Duration
	workerRate   float64 // batches per second per worker (--bench-rate)
	gpuIPS       float64 // images per second the simulated GPU consumes
	period       time.Duration
	adviseWindow time.Duration
	maxReplicas  int
	runAhead     int
	launch       float64 // the trainer's own time per step, a share of the GPU's step
	peerRefresh  time.Duration
}

// asGPUWindow is the window of the simulated GPU's idle share, the one the
// NVML monitor uses (the coordinator's telemetry window).
const asGPUWindow = 3 * time.Second

// asSampleEvery is how often a run is sampled.
const asSampleEvery = time.Second

// asGPUDefault is the simulated GPU's default demand, in workers' worth:
// between 4 and 5 workers, so that 5 just saturate it (and 4 do not, by
// 7%), with room either side of the advisor's 5% headroom.
const asGPUDefault = 4.3

// Limits of the verdict (issue 17): settle within these, from the start.
const (
	asUpLimit   = 3 * time.Minute
	asDownLimit = 5 * time.Minute
)

// bpAutoscaleResult is the scenario's result: its settings and each run.
type bpAutoscaleResult struct {
	WorkerBatchesPerSec float64 `json:"worker_batches_per_sec"`
	WorkerImagesPerSec  float64 `json:"worker_images_per_sec"`
	GPUImagesPerSec     float64 `json:"gpu_images_per_sec"`
	GPUStepMs           float64 `json:"gpu_step_ms"`
	// Needed is the count that just saturates the GPU: the GPU's rate
	// over a worker's, rounded up.
	Needed              int     `json:"needed"`
	CropSize            int     `json:"crop_size"`
	RunAhead            int     `json:"run_ahead_steps"`
	LaunchShare         float64 `json:"trainer_launch_share"`
	HPAPeriodSeconds    float64 `json:"hpa_period_seconds"`
	AdviseWindowSeconds float64 `json:"advise_window_seconds"`
	PeerRefreshSeconds  float64 `json:"peer_refresh_seconds"`
	MaxReplicas         int     `json:"max_replicas"`
	SecondsPerRun       float64 `json:"seconds_per_run"`

	Runs []*bpAutoscaleRun `json:"runs"`
	// Settled: every run settled as required.
	Settled bool `json:"settled"`
}

// bpAutoscaleRun is one run from a number of workers.
type bpAutoscaleRun struct {
	Start int `json:"start"`
	// Steps are the HPA loop's decisions, Samples the run every second,
	// from the trainer's start.
	Steps   []bpHPAStep `json:"steps"`
	Samples []bpASample `json:"samples"`
	Events  []bpEvent   `json:"events"`

	Final int `json:"final_replicas"`
	// Changes are the steps that changed the replicas; Reversals the
	// changes in the other direction than the one before.
	Changes   int `json:"changes"`
	Reversals int `json:"reversals"`
	// SettledAt is when the replicas last changed (0: never changed), in
	// seconds from the trainer's start; Limit is the limit for the
	// direction the run had to go (180 s up, 300 s down, 0 none).
	SettledAt    float64 `json:"settled_at_seconds"`
	LimitSeconds float64 `json:"limit_seconds"`
	// HeldSeconds is how long the final count held to the run's end.
	HeldSeconds float64 `json:"held_seconds"`
	Settled     bool    `json:"settled"`
	// The settled state, medians over the samples from 2 GPU windows after
	// the last change: the GPU's idle share (simulated), the trainer's wait
	// share, images/s the GPU consumed, the recommendation and the makers'
	// busy rate (at the HPA steps).
	SettledGPUIdle      float64 `json:"settled_gpu_idle"`
	SettledWait         float64 `json:"settled_trainer_wait"`
	SettledImagesPerSec float64 `json:"settled_images_per_sec"`
	SettledRecommended  float64 `json:"settled_recommended"`
	SettledBusyRate     float64 `json:"settled_busy_batches_per_sec"`
	// CPU cores: the bench's processes' median, the machine's (every
	// process's, others' work included) median and peak.
	BenchCoresMedian   float64  `json:"bench_cores_median"`
	MachineCoresMedian float64  `json:"machine_cores_median"`
	MachineCoresMax    float64  `json:"machine_cores_max"`
	ScrapeErrors       int      `json:"scrape_errors"`
	Errors             []string `json:"errors"`
}

// bpHPAStep is one decision of the HPA-like loop.
type bpHPAStep struct {
	T           float64 `json:"t"`
	Replicas    int     `json:"replicas"`
	PeersReady  float64 `json:"peers_ready"`
	Recommended float64 `json:"recommended"` // -1: none published
	Desired     int     `json:"desired"`
	Advice      string  `json:"advice"`
	Signal      string  `json:"signal"`
	Starvation  float64 `json:"starvation"`
	GPUIdle     float64 `json:"gpu_idle"`             // the simulated GPU's, over 3 s
	Wait        float64 `json:"trainer_wait"`         // the trainer's, over 3 s
	ImagesPerS  float64 `json:"images_per_sec"`       // the GPU consumed, over the last period
	BusyRate    float64 `json:"busy_batches_per_sec"` // the ready makers' median
	BusyRatio   float64 `json:"busy_ratio"`           // the ready makers' median
	// Made is what the makers delivered, in batches per second, in all.
	Made   float64        `json:"made_batches_per_sec"`
	Makers []bpMakerState `json:"makers"`
}

// bpMakerState is one maker as the coordinator's status has it.
type bpMakerState struct {
	Name      string  `json:"name"`
	Ready     bool    `json:"ready"`
	Made      float64 `json:"batches_per_sec"`
	BusyRate  float64 `json:"busy_batches_per_sec"`
	BusyRatio float64 `json:"busy_ratio"`
	InFlight  uint32  `json:"in_flight"`
}

// bpASample is the run at one instant.
type bpASample struct {
	T            float64 `json:"t"`
	Replicas     int     `json:"replicas"`
	PeersReady   float64 `json:"peers_ready"`
	Recommended  float64 `json:"recommended"` // -1: none published
	GPUIdle      float64 `json:"gpu_idle"`
	ServerIdle   float64 `json:"server_gpu_idle"` // -1: none published
	Wait         float64 `json:"trainer_wait"`
	Stall        float64 `json:"server_stall"`
	Window       float64 `json:"window"`
	ImagesPerSec float64 `json:"images_per_sec"`
	MachineCores float64 `json:"machine_cores"`
	BenchCores   float64 `json:"bench_cores"` // this process, the coordinator and the workers
}

// autoscale runs the scenario from each start.
func (b *bpBench) autoscale(ctx context.Context) (*bpAutoscaleResult, error) {
	o, as := b.o, b.o.as
	res := &bpAutoscaleResult{
		WorkerBatchesPerSec: as.workerRate, WorkerImagesPerSec: as.workerRate * float64(o.batch),
		GPUImagesPerSec: as.gpuIPS, GPUStepMs: round3(float64(o.batch) / as.gpuIPS * 1000),
		CropSize: b.cropSize(), RunAhead: as.runAhead, LaunchShare: as.launch,
		HPAPeriodSeconds: as.period.Seconds(), AdviseWindowSeconds: as.adviseWindow.Seconds(), PeerRefreshSeconds: as.peerRefresh.Seconds(),
		MaxReplicas: as.maxReplicas, SecondsPerRun: as.seconds.Seconds(), Runs: []*bpAutoscaleRun{},
	}
	res.Needed = int(math.Ceil(as.gpuIPS/res.WorkerImagesPerSec - 1e-9))
	res.Settled = true
	for _, start := range as.starts {
		run, err := b.autoscaleOnce(ctx, start, res)
		if run != nil {
			res.Runs = append(res.Runs, run)
			res.Settled = res.Settled && run.Settled
		}
		if err != nil {
			res.Settled = false
			return res, fmt.Errorf("from %d: %w", start, err)
		}
		if ctx.Err() != nil {
			res.Settled = false
			return res, ctx.Err()
		}
	}
	return res, nil
}

// cropSize is the jobs' crop: --size, or 64 for this scenario (what is
// measured is the advisor and the loop, not relaying pixels: small
// batches keep the coordinator's and the trainer's relay cheap on a small
// machine).
func (b *bpBench) cropSize() int {
	if b.o.size > 0 {
		return b.o.size
	}
	return 64
}

// asRunner is one run's state.
type asRunner struct {
	b     *bpBench
	run   *bpAutoscaleRun
	start time.Time

	port  int
	ips   []string
	dns   LabDNS
	data  string
	coord *scaleProc
	cmet  string // the coordinator's /metrics address

	l *client.Loader
	g *simGPU

	mu      sync.Mutex
	workers []*scaleProc // up, in the order of ips
	waits   []waitPoint  // the trainer's cumulative wait, over the last asGPUWindow
}

func (r *asRunner) event(what string) {
	t := round2(time.Since(r.start).Seconds())
	r.mu.Lock()
	r.run.Events = append(r.run.Events, bpEvent{T: t, What: what})
	r.mu.Unlock()
	fmt.Fprintf(os.Stderr, "  autoscale from %d %7.2fs: %s\n", r.run.Start, t, what)
}

func (r *asRunner) replicas() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.workers)
}

// scaleTo starts or stops workers until n are up, and publishes their
// addresses under the name: new ones once they listen, removed ones before
// they get SIGTERM (a Kubernetes endpoint leaves the Service as its pod
// terminates; the worker drains what it holds).
func (r *asRunner) scaleTo(ctx context.Context, n int) error {
	as := r.b.o.as
	r.mu.Lock()
	cur := len(r.workers)
	r.mu.Unlock()
	sb := &scaleBench{o: scaleOpts{data: r.data, exe: r.b.o.exe}}
	var errs []error
	for i := cur; i < n; i++ {
		addr := r.ips[i] + ":" + strconv.Itoa(r.port)
		p, err := sb.start(ctx, "worker "+r.ips[i], "", "--listen", addr, "--workers", "1", "--bench-replay",
			"--bench-rate", strconv.FormatFloat(as.workerRate, 'g', -1, 64), "--gpus", "none")
		if err != nil {
			errs = append(errs, err)
			break
		}
		r.mu.Lock()
		r.workers = append(r.workers, p)
		r.mu.Unlock()
	}
	r.mu.Lock()
	var gone []*scaleProc
	if n < len(r.workers) {
		gone = slices.Clone(r.workers[n:])
		r.workers = r.workers[:n]
	}
	var up []string
	for _, p := range r.workers {
		host, _, _ := net.SplitHostPort(p.addr)
		up = append(up, host)
	}
	r.mu.Unlock()
	r.dns.Set(up...)
	if len(gone) > 0 {
		if err := stopScaleProcs(gone); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("scaling to %d: %v", n, errs)
	}
	return nil
}

func (r *asRunner) stopAll() error {
	r.mu.Lock()
	ps := slices.Clone(r.workers)
	r.workers = nil
	r.mu.Unlock()
	if r.coord != nil {
		ps = append([]*scaleProc{r.coord}, ps...)
	}
	return stopScaleProcs(ps)
}

// autoscaleOnce is one run from start workers.
func (b *bpBench) autoscaleOnce(ctx context.Context, start int, res *bpAutoscaleResult) (run *bpAutoscaleRun, err error) {
	o, as := b.o, b.o.as
	run = &bpAutoscaleRun{Start: start, Steps: []bpHPAStep{}, Samples: []bpASample{}, Events: []bpEvent{}, Errors: []string{}}
	r := &asRunner{b: b, run: run, start: time.Now(), data: o.data}
	for i := range as.maxReplicas {
		r.ips = append(r.ips, "127.0.0."+strconv.Itoa(2+i))
	}
	if r.port, err = freeport.On(r.ips...); err != nil {
		return nil, fmt.Errorf("workers listen on %s..%s, one port: %w (Linux routes all of 127/8 to lo; this machine does not?)", r.ips[0], r.ips[len(r.ips)-1], err)
	}
	if r.dns, err = b.lab.DNS("workers"); err != nil {
		return nil, err
	}
	defer r.dns.Close()
	dir, err := os.MkdirTemp("", "stoker-autoscale-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	idleFile := filepath.Join(dir, "gpu-idle")
	defer func() {
		if serr := r.stopAll(); serr != nil {
			run.Errors = append(run.Errors, serr.Error())
		}
	}()

	fmt.Fprintf(os.Stderr, "bench backpressure: autoscale from %d worker(s), %v\n", start, as.seconds)
	if err := r.scaleTo(ctx, start); err != nil {
		return run, err
	}
	if r.cmet, err = freeLoopbackAddr(); err != nil {
		return run, err
	}
	sb := &scaleBench{o: scaleOpts{data: o.data, exe: o.exe}}
	r.coord, err = sb.start(ctx, "coordinator", "", b.serverArgs(0, r.cmet,
		"--peers", fmt.Sprintf("dns://%s/workers:%d", r.dns.Addr(), r.port), "--peer-refresh", as.peerRefresh.String(),
		"--bench-gpu-idle-file", idleFile, "--advise-window", as.adviseWindow.String(),
		// Replayed pixels are not the plan's: check the workers' indices
		// and labels, not their pixels.
		"--verify-fraction", "-1")...)
	if err != nil {
		return run, err
	}
	if err := waitScalePeers(ctx, r.cmet, start, 30*time.Second); err != nil {
		return run, err
	}

	// The trainer, its GPU and the file the coordinator reads.
	c, err := client.New(r.coord.addr)
	if err != nil {
		return run, err
	}
	defer c.Close()
	spec := b.spec("bench")
	spec.Transform = cropSpec(uint32(b.cropSize()))
	l := c.Loader(spec, client.WithEpochs(0), client.WithPrefetch(o.prefetch), client.WithTimeout(time.Minute), client.WithSharedMemory(o.shm))
	defer l.Close()
	step := time.Duration(float64(o.batch) / as.gpuIPS * float64(time.Second))
	g := newSimGPU(step, as.runAhead, asGPUWindow)
	r.l, r.g = l, g
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	r.start = time.Now()
	g.start, g.lastEnd = r.start, r.start
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Go(func() { g.run(tctx) })
	wg.Go(func() {
		if err := g.writeIdle(tctx, idleFile, 250*time.Millisecond); err != nil {
			errc <- fmt.Errorf("GPU idle file: %w", err)
		}
	})
	wg.Go(func() {
		if err := simTrain(tctx, l, g, time.Duration(as.launch*float64(step))); err != nil && tctx.Err() == nil {
			errc <- fmt.Errorf("trainer: %w", err)
		}
	})
	wg.Go(func() { r.sample(tctx) })
	defer wg.Wait()
	defer stop()

	// The HPA-like loop.
	tick := time.NewTicker(as.period)
	defer tick.Stop()
	end := time.NewTimer(as.seconds)
	defer end.Stop()
	var last struct {
		images int64
		at     time.Time
	}
	last.at = r.start
	for done := false; !done; {
		select {
		case <-tick.C:
			if err := r.hpaStep(ctx, c, &last.images, &last.at); err != nil {
				return run, err
			}
		case <-end.C:
			done = true
		case err := <-errc:
			return run, err
		case <-ctx.Done():
			return run, ctx.Err()
		}
	}
	stop()
	wg.Wait()
	r.analyze(res.Needed)
	return run, nil
}

// cropSpec is RandomResizedCrop(n) and a flip.
func cropSpec(n uint32) *stokerv1.TransformSpec {
	return &stokerv1.TransformSpec{Ops: []*stokerv1.Op{
		opspec.Wire("RandomResizedCrop", "size", int(n)), opspec.Wire("RandomHorizontalFlip"),
	}}
}

// simTrain is the trainer's loop: take a batch, spend launch on the CPU
// (the step's kernels launched), hand the step to the GPU, which blocks
// while it is runAhead steps behind.
func simTrain(ctx context.Context, l *client.Loader, g *simGPU, launch time.Duration) error {
	for {
		bt, err := l.Next(ctx)
		if err != nil {
			return err
		}
		if launch > 0 {
			t := time.NewTimer(launch)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				bt.Release()
				return ctx.Err()
			}
		}
		if err := g.submit(ctx, simStep{images: len(bt.Indices), release: bt.Release}); err != nil {
			bt.Release()
			return err
		}
	}
}

// hpaStep is one decision: replicas <- the recommendation.
// scrape reads the coordinator's metrics: all of them, stoker_peers_ready,
// and the bench job's stoker_workers_recommended (-1: none yet). A failed
// scrape is counted, unless ctx ended; ok is false then.
func (r *asRunner) scrape(ctx context.Context) (ms map[string]float64, peers, rec float64, ok bool) {
	ms, err := ScrapeMetrics(ctx, r.cmet)
	if err != nil {
		if ctx.Err() == nil {
			r.mu.Lock()
			r.run.ScrapeErrors++
			r.mu.Unlock()
		}
		return nil, 0, -1, false
	}
	rec = -1
	if v, ok := jobSeries(ms, "stoker_workers_recommended", "bench"); ok && !math.IsNaN(v) {
		rec = v
	}
	return ms, ms["stoker_peers_ready"], rec, true
}

func (r *asRunner) hpaStep(ctx context.Context, c *client.Client, lastImages *int64, lastAt *time.Time) error {
	as, g := r.b.o.as, r.g
	now := time.Now()
	st := bpHPAStep{T: round2(now.Sub(r.start).Seconds()), Replicas: r.replicas(), Recommended: -1, Starvation: -1}
	st.Desired = st.Replicas
	if _, peers, rec, ok := r.scrape(ctx); ok {
		st.PeersReady, st.Recommended = peers, rec
		if rec >= 0 {
			st.Desired = min(max(int(math.Ceil(rec-1e-9)), 1), as.maxReplicas)
		}
	}
	st.GPUIdle = round4(g.idle(now))
	st.Wait = r.waitShare()
	imgs := g.images.Load()
	if secs := now.Sub(*lastAt).Seconds(); secs > 0 {
		st.ImagesPerS = round2(float64(imgs-*lastImages) / secs)
	}
	*lastImages, *lastAt = imgs, now
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, serr := c.Status(sctx)
	cancel()
	if serr == nil && len(resp.GetJobs()) > 0 {
		js := resp.GetJobs()[0]
		st.Advice, st.Signal, st.Starvation = js.GetAdvice(), js.GetStarvationSignal(), round4(js.GetStarvation())
		var rates, ratios []float64
		for _, m := range js.GetMakers() {
			st.Makers = append(st.Makers, bpMakerState{Name: m.GetName(), Ready: m.GetReady(), Made: round3(m.GetBatchesPerSecond()),
				BusyRate: round3(m.GetBusyBatchesPerSecond()), BusyRatio: round3(m.GetBusyRatio()), InFlight: m.GetInFlight()})
			st.Made += m.GetBatchesPerSecond()
			if m.GetReady() && m.GetBusyBatchesPerSecond() > 0 {
				rates = append(rates, m.GetBusyBatchesPerSecond())
				ratios = append(ratios, m.GetBusyRatio())
			}
		}
		st.Made = round2(st.Made)
		if len(rates) > 0 {
			st.BusyRate, st.BusyRatio = round3(median(rates)), round3(median(ratios))
		}
	}
	r.mu.Lock()
	r.run.Steps = append(r.run.Steps, st)
	r.mu.Unlock()
	if st.Desired != st.Replicas {
		r.event(fmt.Sprintf("HPA: recommended %g: %d -> %d workers (%s)", st.Recommended, st.Replicas, st.Desired, st.Advice))
		return r.scaleTo(ctx, st.Desired)
	}
	return nil
}

// waitShare is the trainer's wait share over the last asGPUWindow (or
// since it started): its time blocked in Next over wall time.
func (r *asRunner) waitShare() float64 {
	now := time.Now()
	w := r.l.Waited()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, waitPoint{now, w})
	i := 0
	for i+1 < len(r.waits) && !r.waits[i+1].at.After(now.Add(-asGPUWindow)) {
		i++
	}
	r.waits = r.waits[i:]
	first := r.waits[0]
	if !now.After(first.at) {
		return 0
	}
	return round4(min(max((w-first.waited).Seconds()/now.Sub(first.at).Seconds(), 0), 1))
}

type waitPoint struct {
	at     time.Time
	waited time.Duration
}
