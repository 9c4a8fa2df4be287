package bench

// `stoker bench backpressure`: the runner of a scenario: its processes,
// simulated trainers and phases.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/cpu"
)

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
		return cpu.ProcessTime(), nil
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
		tr.l = c.Loader(r.b.spec(tr.dataset), client.WithEpochs(0), client.WithPrefetch(r.b.o.prefetch), client.WithTimeout(time.Minute),
			client.WithSharedMemory(r.b.o.shm))
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
		m.server, _ = ScrapeMetrics(ctx, target.metrics)
	}
	return m
}

// phase runs one phase: the trainers' steps set, then during (if any)
// called, for d in all.
func (r *bpRunner) phase(ctx context.Context, name string, d time.Duration, steps []time.Duration, during func() error) error {
	r.mu.Lock()
	r.phaseNow = name
	trainers := slices.Clone(r.trainers)
	r.mu.Unlock()
	// The steps first, then the phase's start: mark scrapes the server,
	// which on a loaded machine takes long enough for a trainer still at
	// the last phase's pace to take several batches, counted in this one.
	for i, tr := range trainers {
		tr.step.Store(int64(steps[min(i, len(steps)-1)]))
	}
	m0 := r.mark(ctx)
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
	if err := r.firstBatches(ctx, name, trainers, m0); err != nil {
		return err
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

// firstBatches waits, at a phase's end, until every trainer has taken a
// batch in it (one that stopped fails the phase with its error): a phase
// lasts its time and, on a machine too loaded to deliver a batch within
// it, until the first one, so that each phase has figures to report. ctx
// (the bench's run) bounds the wait.
func (r *bpRunner) firstBatches(ctx context.Context, phase string, trainers []*bpTrainer, m0 bpMark) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting := false
		for i, tr := range trainers {
			select {
			case <-tr.done:
				if tr.err != nil {
					return fmt.Errorf("trainer %s: %w", tr.name, tr.err)
				}
				continue
			default:
			}
			var before int64 // a trainer started during the phase: none before
			if i < len(m0.batches) {
				before = m0.batches[i]
			}
			waiting = waiting || tr.batches.Load() <= before
		}
		if !waiting {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("phase %s: a trainer took no batch before the run's end: %w", phase, ctx.Err())
		}
	}
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
