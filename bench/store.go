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
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/helptext"
	"github.com/stoker-dev/stoker/internal/progress"
	transformpkg "github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"google.golang.org/protobuf/proto"
)

// `stoker bench store`: a dataset read from object storage against the
// same files read from local disk. A real S3 server (the pinned versitygw,
// on loopback) holds the data; stoker reaches it through a proxy in this
// process that can add a region's latency to every request (both the lab's,
// bench/lab.go: bin/stoker-lab runs this benchmark). One `stoker
// serve` per configuration reads the dataset from the local directory,
// from the bucket directly, and from the bucket with added latency, in
// interleaved rounds; the trainer (this process) consumes whole epochs,
// each through a Loader of its own, and the server's CPU time, requests
// and bytes are read between epochs.

// storeOpts are bench store's flags.
type storeOpts struct {
	data      string
	synthetic bool
	n         int
	layout    string // imagefolder or webdataset
	perShard  int
	latency   time.Duration
	workers   int
	epochs    int
	rounds    int
	batch     int
	prefetch  int
	shuffle   string // global or block
	window    int
	transform string
	cpus      string
	taskset   string
	exe       string
	// fields: with --fields, the job's fields; the shards are then
	// image-text ones (store_captions.go) and every configuration runs
	// with them and without (store_fields.go).
	fields []string
	peers  int // with --fields: peers behind a relaying coordinator (0: no relay)
}

const storeUsage = "usage: stoker bench store [--data DIR | --n 1000] [--layout imagefolder|webdataset] [--shuffle global|block] [--latency 30ms] [--workers 1] [--epochs 2] [--rounds 3] [--cpus 0] [--fields txt,json,__key__ [--peers 1]] [--json]"

func runStore(args []string) error {
	ctx := signalContext()
	fs := flag.NewFlagSet("bench store", flag.ExitOnError)
	fs.Usage = helptext.Usage(fs, helptext.Head("bench store", "[flags]", "Measures a dataset read from object storage (a real S3 server on loopback, behind a proxy adding latency) against the same files on local disk (bin/stoker-lab only)."))
	data := fs.String("data", "", "ImageFolder to serve (default: a synthetic one, made as stoker mkdata makes it, removed afterwards)")
	n := fs.Int("n", 1000, "images of the synthetic dataset")
	layout := fs.String("layout", "imagefolder", "how the data sits in the bucket and on disk: imagefolder (an object per image) or webdataset (tar shards made from the ImageFolder)")
	perShard := fs.Int("per-shard", 100, "with --layout webdataset: samples per shard")
	latency := fs.Duration("latency", 30*time.Millisecond, "latency the proxy adds to every request of the third configuration")
	workers := fs.Int("workers", 1, "decode goroutines of the server")
	epochs := fs.Int("epochs", 2, "epochs per run, each measured apart")
	rounds := fs.Int("rounds", 3, "rounds; each runs every configuration once, interleaved; the table shows medians")
	batch := fs.Int("batch", 32, "samples per batch")
	prefetch := fs.Int("prefetch", 8, "the trainer's credits")
	shuffle := fs.String("shuffle", "global", "the job's shuffle: global (a permutation of all samples) or block (shards permuted, then samples within windows of --window shards; needs --layout webdataset)")
	window := fs.Int("window", 0, "with --shuffle block: shards per window (0: the server's default)")
	transform := fs.String("transform", "imagenet-train", "transform preset: "+strings.Join(transformpkg.PresetNames(), " or "))
	cpus := fs.String("cpus", "", "a taskset -c list the server runs on (default: not pinned)")
	versitygw := fs.String("versitygw", "", "the versitygw binary (default: $STOKER_VERSITYGW, else .bin/versitygw of the checkout make setup installed it into)")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound on the whole benchmark")
	fields := fs.String("fields", "", "compare a job with these fields (comma-separated, e.g. txt,json,__key__) against the same job without: the shards are written as image-text ones (each KEY.jpg beside a caption KEY.txt and metadata KEY.json, no .cls), the configurations are the bucket with and without the fields (and the relay's with --peers); needs --layout webdataset")
	peers := fs.Int("peers", 0, "with --fields: also run each job through a coordinator (--workers 0) relaying the batches of this many peers, all reading the bucket")
	asJSON := fs.Bool("json", false, "end with one JSON line of the results")
	fs.Parse(args)

	o := storeOpts{data: *data, n: *n, layout: *layout, perShard: *perShard, latency: *latency, workers: *workers,
		epochs: *epochs, rounds: *rounds, batch: *batch, prefetch: *prefetch, shuffle: *shuffle, window: *window,
		transform: *transform, cpus: *cpus, peers: *peers}
	if *fields != "" {
		o.fields = strings.Split(*fields, ",")
	}
	switch {
	case o.fields != nil && o.layout != "webdataset":
		return errors.New("bench store: --fields needs --layout webdataset: the captions and metadata are members of tar shards")
	case o.peers < 0 || o.peers > 16 || (o.peers > 0 && o.fields == nil):
		return errors.New("bench store: --peers is 0..16, and needs --fields")
	case o.rounds < 1 || o.workers < 1 || o.epochs < 1 || o.batch < 1 || o.prefetch < 1 || o.perShard < 1 || o.window < 0 || o.latency < 0:
		return errors.New("bench store: --rounds, --workers, --epochs, --batch, --prefetch and --per-shard must be at least 1, --window and --latency at least 0\n" + storeUsage)
	case o.layout != "imagefolder" && o.layout != "webdataset":
		return fmt.Errorf("bench store: --layout %q: want imagefolder or webdataset\n%s", o.layout, storeUsage)
	case o.shuffle != "global" && o.shuffle != "block":
		return fmt.Errorf("bench store: --shuffle %q: want global or block\n%s", o.shuffle, storeUsage)
	case o.shuffle == "block" && o.layout != "webdataset":
		return errors.New("bench store: --shuffle block needs --layout webdataset: an ImageFolder has no shards to permute")
	case !slices.Contains(transformpkg.PresetNames(), o.transform):
		return fmt.Errorf("bench store: --transform %q: want one of %v", o.transform, transformpkg.PresetNames())
	}
	if *versitygw != "" {
		os.Setenv("STOKER_VERSITYGW", *versitygw)
	}
	if o.cpus != "" {
		path, err := exec.LookPath("taskset")
		if err != nil {
			return errors.New("bench store: --cpus needs taskset, which is not on PATH")
		}
		o.taskset = path
	}
	lab, err := needLab("bench store", "a real S3 server on loopback and a proxy adding latency")
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.exe = exe

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	synthetic, remove, err := benchData(ctx, "store", &o.data, o.n)
	if err != nil {
		return err
	}
	defer remove()
	o.synthetic = synthetic

	t := newBenchT(ctx)
	rep, err := func() (rep *storeReport, err error) {
		defer t.close(&err)
		return (&storeBench{o: o, t: t, lab: lab}).run(ctx)
	}()
	if err != nil {
		return fmt.Errorf("bench store: %w", err)
	}
	rep.print(os.Stdout)
	if *asJSON {
		return json.NewEncoder(os.Stdout).Encode(rep)
	}
	return nil
}

// storeBench runs the benchmark.
type storeBench struct {
	o    storeOpts
	t    *benchT
	lab  Lab
	spec *stokerv1.JobSpec
}

// storeConfig is one way of reading the dataset.
type storeConfig struct {
	Name    string   `json:"name"`
	Dataset string   `json:"dataset"` // --dataset's value
	env     []string // the AWS variables, for a bucket
	// Fields: the job asks for --fields; Peers: a coordinator relays
	// the batches of this many peers (0: one server makes them).
	Fields bool `json:"fields,omitempty"`
	Peers  int  `json:"peers,omitempty"`
}

// setUp starts the S3 server and the proxies, puts the data into the
// bucket (as tar shards with --layout webdataset, written on local disk
// too), indexes it, and returns the configurations.
func (b *storeBench) setUp(ctx context.Context) ([]storeConfig, error) {
	o, t := b.o, b.t
	tmp, err := os.MkdirTemp("", "stoker-bench-store-")
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	local := o.data
	if o.layout == "webdataset" {
		local = filepath.Join(tmp, "shards")
		if o.fields == nil {
			b.lab.WriteShards(t, o.data, local, o.perShard)
		} else if _, err := writeCaptionShards(o.data, local, o.perShard); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(os.Stderr, "bench store: putting %s into s3://bench/data/\n", local)
	bk, err := b.lab.Bucket(t, filepath.Join(tmp, "s3"), local, []time.Duration{0, o.latency})
	if err != nil {
		return nil, err
	}
	url := bk.URL

	// The manifest, once, beside the data: the servers start without a
	// listing.
	idx := exec.CommandContext(ctx, o.exe, "index", url)
	idx.Env = append(os.Environ(), bk.Direct...)
	if out, err := idx.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("stoker index %s: %v\n%s", url, err, out)
	}
	if o.fields != nil {
		return fieldConfigs(url, bk.Via[0], o.peers), nil
	}
	return []storeConfig{
		{Name: "local disk", Dataset: local},
		{Name: "bucket", Dataset: url, env: bk.Via[0]},
		{Name: fmt.Sprintf("bucket +%v", o.latency), Dataset: url, env: bk.Via[1]},
	}, nil
}

// run runs the rounds: in each, every configuration once.
func (b *storeBench) run(ctx context.Context) (*storeReport, error) {
	o := b.o
	b.spec = &stokerv1.JobSpec{
		Dataset: "bench", Transform: &stokerv1.TransformSpec{Preset: o.transform},
		BatchSize: uint32(o.batch), Seed: 1, Shuffle: true,
	}
	if o.shuffle == "block" {
		b.spec.ShuffleMode, b.spec.ShuffleWindow = stokerv1.ShuffleMode_SHUFFLE_MODE_BLOCK, uint32(o.window)
	}
	configs, err := b.setUp(ctx)
	if err != nil {
		return nil, err
	}
	rep := &storeReport{Dataset: o.data, Synthetic: o.synthetic, Layout: o.layout, Shuffle: o.shuffle,
		Window: o.window, Transform: o.transform, BatchSize: o.batch, Workers: o.workers, Epochs: o.epochs,
		Rounds: o.rounds, Latency: o.latency.String(), CPUs: runtime.NumCPU(), Pinned: o.cpus, Configs: configs,
		Fields: o.fields, Peers: o.peers}
	// Each run's last line says how many are done, and when the rest
	// should be, as bench scale's do.
	start, total := time.Now(), o.rounds*len(configs)
	for round := 1; round <= o.rounds; round++ {
		for _, c := range b.roundOrder(configs, round) {
			r, err := b.runOne(ctx, c, round)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s: %w", round, c.Name, err)
			}
			rep.Runs = append(rep.Runs, r)
			for e, ep := range r.Epochs {
				fmt.Fprintf(os.Stderr, "round %d %-16s epoch %d %7.1f images/s %6.2f ms CPU/image %6.3f GETs/image %6.2f ms peers' CPU/image\n",
					round, c.Name, e+1, ep.imagesPerSec(), ep.cpuPerImage()*1e3, ep.getsPerImage(), ep.peerCPUPerImage()*1e3)
			}
			fmt.Fprintf(os.Stderr, "[%s]\n", progress.Text(progress.Update{Phase: "runs", Unit: "runs",
				Done: int64(len(rep.Runs)), Total: int64(total)}, time.Since(start)))
		}
	}
	rep.summarize()
	return rep, nil
}

// runOne starts the server of configuration c (or its peers and their
// coordinator), runs the epochs, and stops them.
func (b *storeBench) runOne(ctx context.Context, c storeConfig, round int) (run storeRun, err error) {
	run = storeRun{Config: c.Name, Round: round}
	var procs []*scaleProc // the peers, then the server the trainer reads
	defer func() {
		if serr := stopScaleProcs(procs); err == nil {
			err = serr
		}
		if err != nil {
			for _, p := range procs {
				err = fmt.Errorf("%w\n--- %s log (end) ---\n%s", err, p.name, p.log.String())
			}
		}
	}()
	start := func(name string, args ...string) (*scaleProc, error) {
		metricsAddr, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		p, err := startServe(ctx, serveProc{exe: b.o.exe, name: name, cpus: b.o.cpus, taskset: b.o.taskset, env: c.env},
			append([]string{"--dataset", "bench=" + c.Dataset, "--metrics", metricsAddr}, args...)...)
		if p != nil {
			p.metrics = metricsAddr
			procs = append(procs, p)
		}
		return p, err
	}
	var addrs []string
	for i := range c.Peers {
		p, err := start(fmt.Sprintf("peer %d", i), "--workers", strconv.Itoa(b.o.workers))
		if err != nil {
			return run, err
		}
		addrs = append(addrs, p.addr)
	}
	var p *scaleProc
	if c.Peers == 0 {
		p, err = start("server", "--workers", strconv.Itoa(b.o.workers))
	} else if p, err = start("coordinator", "--workers", "0", "--peers", strings.Join(addrs, ",")); err == nil {
		err = waitScalePeers(ctx, p.metrics, c.Peers, 20*time.Second)
	}
	if err != nil {
		return run, err
	}
	cl, err := client.New(p.addr)
	if err != nil {
		return run, err
	}
	defer cl.Close()
	for e := 1; e <= b.o.epochs; e++ {
		s0, err := snapStore(ctx, procs)
		if err != nil {
			return run, err
		}
		start := time.Now()
		ep, err := b.epoch(ctx, cl, c, uint64(e))
		ep.Seconds = time.Since(start).Seconds()
		if err != nil {
			return run, fmt.Errorf("epoch %d: %w", e, err)
		}
		s1, err := snapStore(ctx, procs)
		if err != nil {
			return run, err
		}
		ep.account(s0, s1)
		run.Epochs = append(run.Epochs, ep)
	}
	return run, nil
}

// account fills ep's CPU (the last process's: the server the trainer
// reads), its peers' CPU (the others'), and the store's figures (summed
// over all) from the snapshots before and after it.
func (ep *storeEpoch) account(s0, s1 storeSnap) {
	last := len(s1.cpu) - 1
	for i := range s1.cpu {
		d := (s1.threads[i] - s0.threads[i]).Seconds()
		if i == last {
			ep.CPU = d
			ep.CPUTicks = (s1.cpu[i] - s0.cpu[i]).Seconds()
		} else {
			ep.PeerCPU += d
		}
		m0, m1 := s0.metrics[i], s1.metrics[i]
		diff := func(prefix, label string) float64 { return sumSeries(m1, prefix, label) - sumSeries(m0, prefix, label) }
		ep.GETs += diff("stoker_store_requests_total{", `op="get"`)
		ep.Bytes += diff("stoker_store_bytes_total{", "")
		ep.ReadAheadWaited += diff("stoker_read_ahead_reads_total{", `outcome="waited"`)
		ep.ReadAheadMissed += diff("stoker_read_ahead_reads_total{", `outcome="missed"`)
	}
}

// sumSeries adds the values of the series whose names start with prefix
// and contain label.
func sumSeries(m map[string]float64, prefix, label string) float64 {
	var s float64
	for k, v := range m {
		if strings.HasPrefix(k, prefix) && strings.Contains(k, label) {
			s += v
		}
	}
	return s
}

// epoch consumes epoch e whole through a Loader of its own, checking that
// it delivers every index exactly once.
func (b *storeBench) epoch(ctx context.Context, c *client.Client, cfg storeConfig, e uint64) (ep storeEpoch, err error) {
	spec := b.spec
	if cfg.Fields {
		spec = proto.CloneOf(b.spec)
		spec.Fields = b.o.fields
	}
	l := c.Loader(spec, client.WithEpoch(e), client.WithEpochs(1), client.WithPrefetch(b.o.prefetch),
		client.WithTimeout(2*time.Minute))
	defer l.Close()
	var counts []uint32
	var errored []int64
	for {
		bt, err := l.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ep, err
		}
		if counts == nil {
			counts = make([]uint32, l.Info().GetDatasetSize())
		}
		for _, idx := range bt.Indices {
			if idx < 0 || int(idx) >= len(counts) {
				return ep, fmt.Errorf("batch %d: index %d of a dataset of %d", bt.Number, idx, len(counts))
			}
			counts[idx]++
		}
		if err := checkBatchFields(bt, spec.GetFields()); err != nil {
			return ep, err
		}
		for _, se := range bt.Errors {
			errored = append(errored, se.GetIndex())
		}
		ep.Images += int64(len(bt.Indices))
		ep.SampleErrors += int64(len(bt.Errors))
		bt.Release()
	}
	return ep, exactlyOnce(e, counts, errored)
}
