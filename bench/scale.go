package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/cpu"
	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/internal/progress"
	transformpkg "github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// `stoker bench scale`: scale-out measured on real processes. N worker
// `stoker serve` processes make the batches that one coordinator `stoker
// serve --workers 0 --peers …` leases to them, while this process, the
// trainer, consumes whole epochs through client.Loader as fast as it can;
// a single `stoker serve` that makes its batches itself is the baseline.
// Every process's CPU time is read from /proc, and every server's /metrics
// scraped, before each run and at each epoch boundary as the trainer sees
// it (the first batch of the next epoch), so that epoch 1, which fills the
// workers' caches, is told apart from the epochs that use them. With
// --affinity on,off each peer count runs with the coordinator's cache
// affinity and without it, side by side.

// scaleOpts are bench scale's flags.
type scaleOpts struct {
	peers     []int
	rounds    int
	workers   int
	data      string
	synthetic bool
	n         int
	epochs    int
	batch     int
	transform string
	prefetch  int
	window    int
	pin       bool
	cpus      []string // per worker, for taskset -c
	coordCPUs string
	exe       string
	before    string // another stoker binary run beside exe, round by round
	perfDir   string // with --perf: where the recordings go
	perf      string // the perf binary
	taskset   string // the taskset binary when pinning
	shm       bool   // the trainer takes batches through the ring
	// affinity: each peer count is run once per value, "on" (the
	// coordinator's default) or "off" (--cache-affinity=false), every
	// round; the first is the one --before's runs are compared with.
	affinity []string
	// coefBudget is each worker's (and the baseline server's)
	// --coef-budget, 0: their default, -1: none; memoryBudget their --memory-budget
	// when the default would refuse coefBudget (0: the default).
	coefBudget, memoryBudget int64
}

const scaleUsage = "usage: stoker bench scale [--peers 1,2,4] [--rounds 3] [--workers 1] [--data DIR | --n 1000] [--epochs 1] [--affinity on,off] [--worker-coef-budget BYTES] [--pin [--cpus 0,1,...]] [--shm] [--before BIN] [--perf DIR] [--json]"

func runScale(args []string) error {
	ctx := signalContext()
	fs := flag.NewFlagSet("bench scale", flag.ExitOnError)
	fs.Usage = helptext.Usage(fs, helptext.Head("bench scale", "[flags]", "Measures scale-out through peer processes: images/s, CPU per image, protocol overhead."))
	peers := fs.String("peers", "1,2", "peer counts to sweep: worker processes behind one coordinator")
	rounds := fs.Int("rounds", 3, "rounds; each runs the baseline and every peer count once (once per --affinity value), interleaved, and the table shows medians")
	workers := fs.Int("workers", 1, "decode goroutines of each worker process and of the baseline server")
	data := fs.String("data", "", "ImageFolder or WebDataset to read (default: a synthetic one, made as stoker mkdata makes it, removed afterwards)")
	n := fs.Int("n", 1000, "images of the synthetic dataset")
	epochs := fs.Int("epochs", 1, "whole epochs measured per run (after a warm-up of a few batches); from 2, the workers' CPU per image is reported for epoch 1 and for the later epochs apart (a worker caches a file from its second decode, so its hits start in the third epoch it sees the file)")
	batch := fs.Int("batch", 32, "samples per batch")
	transform := fs.String("transform", "imagenet-train", "transform preset: "+strings.Join(transformpkg.PresetNames(), " or "))
	prefetch := fs.Int("prefetch", 8, "the trainer's credits")
	window := fs.Int("window", 0, "the coordinator's --window (0: two per ready peer)")
	pin := fs.Bool("pin", false, "run each worker (and the baseline server) under taskset -c on its own core, when taskset exists")
	cpus := fs.String("cpus", "", "with --pin: each worker's taskset -c CPU list in order, comma-separated (\"2,3,4\", or ranges: \"2-3,4-5\"); the baseline server takes the first; default: every core, one per worker")
	coordCPUs := fs.String("coord-cpus", "", "with --pin: a taskset -c list for the coordinator (default: not pinned)")
	shm := fs.Bool("shm", false, "the trainer takes its batches through the coordinator's shared-memory ring instead of gRPC chunks")
	perfDir := fs.String("perf", "", "record each server process with Linux perf over the measured epochs of every run, into DIR/r<round>-<config>-<process>.data (bench/perf_shares.py reads them)")
	before := fs.String("before", "", "another stoker binary (one built before a change) whose servers run each configuration too, right after this one's, every round: the report compares the two (this binary's with the first --affinity value); its coordinator is never given --cache-affinity, which a binary before it does not know: its runs lease as it does by default")
	affinity := fs.String("affinity", "on", "the coordinator's cache affinity, comma-separated: on (its default), off (--cache-affinity=false); each peer count runs once per value every round, interleaved, and the report compares them (on / off)")
	coefBudget := fs.Int64("worker-coef-budget", 0, "each worker's (and the baseline server's) --coef-budget in bytes, so that the workers' caches can together hold a dataset none holds alone; with --memory-budget 4 times it where their default memory budget would refuse it; 0: their default; -1: none (what is left of affinity's cost and gain without the cache)")
	timeout := fs.Duration("timeout", 15*time.Minute, "bound on the whole benchmark")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results")
	fs.Parse(args)

	o := scaleOpts{rounds: *rounds, workers: *workers, data: *data, n: *n, epochs: *epochs, batch: *batch,
		transform: *transform, prefetch: *prefetch, window: *window, pin: *pin, coordCPUs: *coordCPUs, shm: *shm, before: *before, perfDir: *perfDir}
	for _, s := range strings.Split(*peers, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || p < 1 || p > 64 {
			return fmt.Errorf("bench scale: --peers %q: want peer counts 1..64, comma-separated", *peers)
		}
		if !slices.Contains(o.peers, p) {
			o.peers = append(o.peers, p)
		}
	}
	slices.Sort(o.peers)
	for _, s := range strings.Split(*affinity, ",") {
		s = strings.TrimSpace(s)
		if s != "on" && s != "off" {
			return fmt.Errorf("bench scale: --affinity %q: want on, off or both, comma-separated", *affinity)
		}
		if !slices.Contains(o.affinity, s) {
			o.affinity = append(o.affinity, s)
		}
	}
	if o.coefBudget = *coefBudget; o.coefBudget < -1 {
		return fmt.Errorf("bench scale: --worker-coef-budget %d: want bytes >= 0 (0: the workers' default), or -1 (none)", o.coefBudget)
	}
	// serve refuses a coefficient cache over half its memory budget: give
	// the workers one 4 times the cache where their default (half of this
	// machine's memory, as they run here) is smaller.
	if o.coefBudget > 0 && 4*o.coefBudget > server.DefaultMemoryBudget() {
		o.memoryBudget = 4 * o.coefBudget
	}
	switch {
	case o.rounds < 1 || o.workers < 1 || o.epochs < 1 || o.batch < 1 || o.prefetch < 1 || o.window < 0:
		return errors.New("bench scale: --rounds, --workers, --epochs, --batch and --prefetch must be at least 1, --window at least 0\n" + scaleUsage)
	case o.data == "" && o.n < 1:
		return errors.New("bench scale: --n must be at least 1\n" + scaleUsage)
	case !slices.Contains(transformpkg.PresetNames(), o.transform):
		return fmt.Errorf("bench scale: --transform %q: want one of %v", o.transform, transformpkg.PresetNames())
	}
	if o.pin {
		path, err := exec.LookPath("taskset")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench scale: no taskset: the processes run unpinned")
			o.pin = false
		}
		o.taskset = path
		if *cpus == "" {
			for c := range runtime.NumCPU() {
				o.cpus = append(o.cpus, strconv.Itoa(c))
			}
		} else {
			o.cpus = strings.Split(*cpus, ",")
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.exe = exe
	if o.perfDir != "" {
		if o.perf, err = perfSetup(o.perfDir); err != nil {
			return err
		}
	}
	if o.before != "" {
		if o.before, err = exec.LookPath(o.before); err != nil {
			return fmt.Errorf("bench scale: --before: %w", err)
		}
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	synthetic, remove, err := benchData(ctx, "scale", &o.data, o.n)
	if err != nil {
		return err
	}
	defer remove()
	o.synthetic = synthetic

	rep, err := (&scaleBench{o: o}).run(ctx)
	if err != nil {
		return fmt.Errorf("bench scale: %w", err)
	}
	rep.print(os.Stdout)
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(rep)
	}
	return nil
}

// scaleBench runs the benchmark.
type scaleBench struct {
	o    scaleOpts
	spec *stokerv1.JobSpec
}

// run runs the rounds: in each, the baseline, then every peer count, each
// with this binary's servers (once per --affinity value) and then, with
// --before, the other's.
func (b *scaleBench) run(ctx context.Context) (*scaleReport, error) {
	o := b.o
	b.spec = &stokerv1.JobSpec{
		Dataset: "bench", Transform: &stokerv1.TransformSpec{Preset: o.transform},
		BatchSize: uint32(o.batch), Seed: 1, Shuffle: true,
	}
	rep := &scaleReport{Dataset: o.data, Synthetic: o.synthetic, Transform: o.transform, BatchSize: o.batch,
		Workers: o.workers, Epochs: o.epochs, Rounds: o.rounds, Prefetch: o.prefetch, Pinned: o.pin,
		CPUs: runtime.NumCPU(), ExactlyOnce: true, BeforeBinary: o.before, Affinity: o.affinity,
		WorkerCoefBudget: o.coefBudget, WorkerMemoryBudget: o.memoryBudget}
	configs := b.configs()
	// Runs take minutes in all: each line says how many are done, and when
	// the rest should be.
	start, total := time.Now(), o.rounds*len(configs)
	for round := 1; round <= o.rounds; round++ {
		for _, cfg := range configs {
			r, size, err := b.runOne(ctx, cfg, round)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round, r.name(), err)
			}
			rep.DatasetSize = size
			rep.SampleErrors += r.SampleErrors
			rep.Runs = append(rep.Runs, r)
			fmt.Fprintf(os.Stderr, "round %d %-30s %7.1f images/s  %d images in %.2fs  [%s]\n",
				round, r.name(), r.imagesPerSec(), r.Images, r.Seconds,
				progress.Text(progress.Update{Phase: "runs", Unit: "runs", Done: int64(len(rep.Runs)), Total: int64(total)}, time.Since(start)))
		}
	}
	rep.summarize(o.peers)
	return rep, nil
}

// scaleConfig is one run of a round: n peers behind a coordinator (0: the
// baseline server alone), from this binary or --before's, with the
// coordinator's cache affinity on or off ("" for the baseline, which has
// no coordinator, and for --before's runs, which lease as that binary
// does by default).
type scaleConfig struct {
	peers    int
	exe      string
	before   bool
	affinity string
}

// configs are the runs of one round, in order: the baseline, then each peer
// count once per --affinity value, each followed by --before's.
func (b *scaleBench) configs() []scaleConfig {
	cs := []scaleConfig{{peers: 0, exe: b.o.exe}}
	if b.o.before != "" {
		cs = append(cs, scaleConfig{peers: 0, exe: b.o.before, before: true})
	}
	for _, n := range b.o.peers {
		for _, a := range b.o.affinity {
			cs = append(cs, scaleConfig{peers: n, exe: b.o.exe, affinity: a})
		}
		if b.o.before != "" {
			cs = append(cs, scaleConfig{peers: n, exe: b.o.before, before: true})
		}
	}
	return cs
}

func configName(n int) string {
	switch n {
	case 0:
		return "baseline"
	case 1:
		return "1 peer"
	}
	return fmt.Sprintf("%d peers", n)
}

// runOne starts the processes of one configuration (n peers behind a
// coordinator, or the baseline server for n = 0), measures, and stops
// them.
func (b *scaleBench) runOne(ctx context.Context, cfg scaleConfig, round int) (run scaleRun, size uint64, err error) {
	n, exe := cfg.peers, cfg.exe
	run = scaleRun{Peers: n, Round: round, Before: cfg.before, Affinity: cfg.affinity}
	var procs []*scaleProc
	defer func() {
		if serr := stopScaleProcs(procs); err == nil {
			err = serr
		}
		if err != nil {
			for _, p := range procs {
				if tail := p.log.String(); tail != "" {
					err = fmt.Errorf("%w\n--- %s log (end) ---\n%s", err, p.name, tail)
				}
			}
		}
	}()
	var target, coord *scaleProc
	var workers []*scaleProc
	if n == 0 {
		target, err = b.startMaker(ctx, exe, "server", b.cpu(0))
		if err != nil {
			return run, 0, err
		}
		procs = append(procs, target)
	} else {
		addrs := make([]string, n)
		for i := range n {
			p, err := b.startMaker(ctx, exe, fmt.Sprintf("worker %d", i), b.cpu(i))
			if err != nil {
				return run, 0, err
			}
			procs = append(procs, p)
			workers = append(workers, p)
			addrs[i] = p.addr
		}
		metricsAddr, err := freeLoopbackAddr()
		if err != nil {
			return run, 0, err
		}
		coordCPUs := ""
		if b.o.pin {
			coordCPUs = b.o.coordCPUs
		}
		args := []string{"--workers", "0", "--peers", strings.Join(addrs, ","), "--window", strconv.Itoa(b.o.window), "--metrics", metricsAddr}
		if cfg.affinity == "off" {
			args = append(args, "--cache-affinity=false")
		}
		coord, err = b.startExe(ctx, exe, "coordinator", coordCPUs, args...)
		if err != nil {
			return run, 0, err
		}
		coord.metrics = metricsAddr
		target = coord
		procs = append(procs, coord)
		if err := waitScalePeers(ctx, metricsAddr, n, 20*time.Second); err != nil {
			return run, 0, err
		}
	}

	c, err := client.New(target.addr)
	if err != nil {
		return run, 0, err
	}
	defer c.Close()
	if err := b.warmUp(ctx, c); err != nil {
		return run, 0, fmt.Errorf("warm-up: %w", err)
	}

	stopPerf := func() error { return nil }
	if b.o.perfDir != "" {
		if stopPerf, err = b.perfRecord(procs, run); err != nil {
			return run, 0, err
		}
	}
	// A snapshot before the measured epochs, one at each boundary between
	// them as the trainer sees it, one after: epoch e is between snaps[e-1]
	// and snaps[e].
	snap0, err := snapScale(ctx, procs)
	if err != nil {
		stopPerf()
		return run, 0, err
	}
	snaps := []scaleSnap{snap0}
	boundary := func() error {
		s, err := snapScale(ctx, procs)
		snaps = append(snaps, s)
		return err
	}
	trainer0, start := cpu.ProcessTime(), time.Now()
	size, err = b.consume(ctx, c, &run, boundary)
	run.Seconds = time.Since(start).Seconds()
	run.TrainerCPU = (cpu.ProcessTime() - trainer0).Seconds()
	if perr := stopPerf(); err == nil {
		err = perr
	}
	if err != nil {
		return run, 0, err
	}
	end, err := snapScale(ctx, procs)
	if err != nil {
		return run, 0, err
	}
	snaps = append(snaps, end)
	if len(snaps) != len(run.Epochs)+1 {
		return run, 0, fmt.Errorf("%d snapshots for %d epochs: want one more than epochs", len(snaps), len(run.Epochs))
	}
	for i, p := range procs {
		d := (end.cpu[i] - snap0.cpu[i]).Seconds()
		switch {
		case n == 0:
			run.ServerCPU = d
		case p == coord:
			run.CoordinatorCPU = d
		default:
			run.WorkerCPU = append(run.WorkerCPU, d)
		}
	}
	for e := range run.Epochs {
		run.Epochs[e].account(procs, coord, snaps[e], snaps[e+1])
	}
	if coord != nil {
		i := slices.Index(procs, coord)
		for _, p := range workers {
			key := `stoker_leases_total{maker="` + p.addr + `"}`
			run.Leases = append(run.Leases, end.metrics[i][key]-snap0.metrics[i][key])
		}
		run.LeaseFailures = sumSeries(end.metrics[i], "stoker_lease_failures_total{", "") - sumSeries(snap0.metrics[i], "stoker_lease_failures_total{", "")
	}
	return run, size, nil
}

// startMaker starts a server that decodes: a worker, or the baseline
// server. Its metrics (the coefficient cache's, the samples it made) are
// served on a free loopback port.
func (b *scaleBench) startMaker(ctx context.Context, exe, name, cpus string) (*scaleProc, error) {
	metricsAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"--workers", strconv.Itoa(b.o.workers), "--metrics", metricsAddr}
	if b.o.coefBudget != 0 {
		args = append(args, "--coef-budget", strconv.FormatInt(b.o.coefBudget, 10))
	}
	if b.o.memoryBudget > 0 {
		args = append(args, "--memory-budget", strconv.FormatInt(b.o.memoryBudget, 10))
	}
	p, err := b.startExe(ctx, exe, name, cpus, args...)
	if err != nil {
		return nil, err
	}
	p.metrics = metricsAddr
	return p, nil
}

// cpu is worker i's taskset list, or "" when not pinning.
func (b *scaleBench) cpu(i int) string {
	if !b.o.pin || len(b.o.cpus) == 0 {
		return ""
	}
	return b.o.cpus[i%len(b.o.cpus)]
}

// warmUp runs the last few batches of epoch 0 to their EpochEnd: the
// connections are up, the buffers made, the files in the page cache, and
// nothing is left in flight when the measured epochs start.
func (b *scaleBench) warmUp(ctx context.Context, c *client.Client) error {
	info, err := c.Describe(ctx, b.spec, 0, 0)
	if err != nil {
		return err
	}
	warm := min(info.GetBatches(), uint64(max(8, 2*b.o.prefetch)))
	l := c.Loader(b.spec, client.WithEpoch(0), client.WithEpochs(1), client.WithPrefetch(b.o.prefetch),
		client.WithResume(info.GetBatches()-warm, nil, 0), client.WithTimeout(time.Minute), client.WithSharedMemory(b.o.shm))
	defer l.Close()
	for {
		bt, err := l.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		bt.Release()
	}
}

// consume runs epochs 1..epochs through one Loader as fast as it can,
// checking that each epoch delivers every index exactly once. It counts
// each epoch's images in run.Epochs, and calls boundary as the first batch
// of each epoch after the first arrives, before counting it.
func (b *scaleBench) consume(ctx context.Context, c *client.Client, run *scaleRun, boundary func() error) (size uint64, err error) {
	l := c.Loader(b.spec, client.WithEpoch(1), client.WithEpochs(uint64(b.o.epochs)), client.WithPrefetch(b.o.prefetch),
		client.WithTimeout(time.Minute), client.WithSharedMemory(b.o.shm))
	defer l.Close()
	defer func() {
		if tr, why := l.Transport(); err == nil && b.o.shm && tr != "shm" {
			err = fmt.Errorf("--shm, but the batches came in chunks: %s", why)
		}
	}()
	var counts []uint32 // per index, this epoch
	var errored []int64
	epoch := uint64(0)
	check := func() error {
		if counts == nil {
			return nil
		}
		err := exactlyOnce(epoch, counts, errored)
		clear(counts)
		errored = errored[:0]
		return err
	}
	for {
		bt, err := l.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return size, err
		}
		if counts == nil {
			size = l.Info().GetDatasetSize()
			counts = make([]uint32, size)
			epoch = bt.Epoch
			run.Epochs = append(run.Epochs, scaleEpoch{Epoch: epoch})
		}
		if bt.Epoch != epoch {
			if err := check(); err != nil {
				return size, err
			}
			if err := boundary(); err != nil {
				return size, err
			}
			epoch = bt.Epoch
			run.Epochs = append(run.Epochs, scaleEpoch{Epoch: epoch})
		}
		run.Epochs[len(run.Epochs)-1].Images += int64(len(bt.Indices))
		for _, idx := range bt.Indices {
			if idx < 0 || uint64(idx) >= size {
				return size, fmt.Errorf("epoch %d batch %d: index %d of a dataset of %d", bt.Epoch, bt.Number, idx, size)
			}
			counts[idx]++
		}
		for _, e := range bt.Errors {
			errored = append(errored, e.GetIndex())
		}
		run.Batches++
		run.Images += int64(len(bt.Indices))
		run.SampleErrors += int64(len(bt.Errors))
		bt.Release()
	}
	if err := check(); err != nil {
		return size, err
	}
	if ends := l.EpochEnds(); len(ends) != b.o.epochs {
		return size, fmt.Errorf("%d EpochEnds for %d epochs", len(ends), b.o.epochs)
	}
	run.TrainerWait = l.Waited().Seconds()
	return size, nil
}

// exactlyOnce checks one epoch of one rank of world size 1: every index
// delivered once. A sample that failed (reported in errored) had its slot
// padded with a copy of another of its batch: it counts as delivered, and
// its copy as a duplicate allowed.
func exactlyOnce(epoch uint64, counts []uint32, errored []int64) error {
	failed := make(map[int64]bool, len(errored))
	for _, i := range errored {
		failed[i] = true
	}
	var missing, dups []int64
	extra := 0
	for i, n := range counts {
		switch {
		case n == 0 && !failed[int64(i)]:
			missing = append(missing, int64(i))
		case n > 1:
			extra += int(n) - 1
			dups = append(dups, int64(i))
		}
	}
	if len(missing) == 0 && extra <= len(errored) {
		return nil
	}
	return fmt.Errorf("EXACTLY-ONCE VIOLATED in epoch %d: %d indices missing (first %v), %d indices delivered more than once (first %v), %d sample errors",
		epoch, len(missing), missing[:min(len(missing), 10)], len(dups), dups[:min(len(dups), 10)], len(errored))
}
