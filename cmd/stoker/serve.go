package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stoker-dev/stoker/internal/cpu"
	"github.com/stoker-dev/stoker/internal/version"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/source"
	"github.com/stoker-dev/stoker/pipeline/transform"
	"github.com/stoker-dev/stoker/server"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveFlags is `stoker serve`'s flag set, filling cfg. Deploy manifests
// are checked against it.
func serveFlags(cfg *server.Config) (*flag.FlagSet, *serveOpts) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	o := &serveOpts{}
	fs.Func("dataset", "NAME=PATH|URL: serve a dataset as NAME (repeatable). PATH is an ImageFolder (PATH/<class>/<image>, a folder per class) or a folder of WebDataset .tar shards (each sample KEY.jpg|png with its label in KEY.cls, as decimal text; uncompressed tars), or one .tar; a URL is either layout under s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or azblob://CONTAINER/PREFIX (credentials from each provider's standard chain; AWS_ENDPOINT_URL for an S3-compatible store)", func(v string) error {
		name, path, ok := strings.Cut(v, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("want NAME=PATH, the name trainers ask for and the dataset's path (--dataset imagenet=/data/imagenet/train)")
		}
		if prev, dup := cfg.Datasets[name]; dup {
			return fmt.Errorf("duplicate dataset name %q (already %s): give each dataset its own NAME", name, prev)
		}
		cfg.Datasets[name] = path
		return nil
	})
	fs.Func("annotations", "NAME=FILE|URL|.EXT: dataset NAME's annotations (repeatable; a local file or an s3://, gs://, azblob:// URL, the --dataset's images too). A COCO file (instances_*.json, person_keypoints_*.json): the dataset is the images in the --dataset directory that it names, sorted by image id, each sample's annotations its field \"coco\" (JSON: the image and its annotations, each with \"label\", its category's contiguous label); a file that is not COCO, or that names images not in the directory, is refused at start. A YOLO dataset YAML (.yaml, .yml: names, kpt_shape): the dataset is the images under the directory, sorted by path, each with its label file (images/SPLIT/x.jpg: labels/SPLIT/x.txt) as its field \"yolo\". .EXT (.json): the --dataset is WebDataset shards whose samples carry their annotations as the member key.EXT, COCO-style JSON ({\"annotations\": [{\"bbox\", \"category_id\", ...}]}, docs/detection.md). A malformed annotation fails its sample, naming the file, the annotation or line, and the field", func(v string) error {
		name, loc, ok := strings.Cut(v, "=")
		if !ok || name == "" || loc == "" {
			return fmt.Errorf("want NAME=FILE, a --dataset's name and its COCO annotations (--annotations coco=/data/coco/annotations/instances_train2017.json)")
		}
		if prev, dup := cfg.Annotations[name]; dup {
			return fmt.Errorf("duplicate annotations for dataset %q (already %s): give each dataset one", name, prev)
		}
		if cfg.Annotations == nil {
			cfg.Annotations = map[string]string{}
		}
		cfg.Annotations[name] = loc
		return nil
	})
	fs.Func("manifest", "NAME=PATH|URL: dataset NAME's manifest, written by stoker index --out (repeatable); default: the one beside the data (ROOT/.stoker/manifest) when there is one, else the dataset is listed and its shards read at start", func(v string) error {
		name, loc, ok := strings.Cut(v, "=")
		if !ok || name == "" || loc == "" {
			return fmt.Errorf("want NAME=PATH|URL, a --dataset's name and its manifest (--manifest imagenet=s3://bucket/imagenet.manifest)")
		}
		if prev, dup := cfg.Manifests[name]; dup {
			return fmt.Errorf("duplicate manifest for dataset %q (already %s): give each dataset one", name, prev)
		}
		if cfg.Manifests == nil {
			cfg.Manifests = map[string]string{}
		}
		cfg.Manifests[name] = loc
		return nil
	})
	fs.StringVar(&o.listen, "listen", "127.0.0.1:7070", "gRPC listen address (port 0: any free port)")
	fs.StringVar(&o.addrFile, "addr-file", "", "write the bound gRPC address to this file once listening")
	fs.StringVar(&o.whileLocked, "while-locked", "", "serve while some process holds a shared flock(2) on this file (tried every second); once none does, remove --addr-file and stop as on SIGTERM: the lifetime of the server stoker.Loader starts on its own host")
	fs.StringVar(&o.healthListen, "health-listen", "", "also serve grpc.health.v1 alone, in plaintext, on this address, for probes that speak no TLS (Kubernetes gRPC probes); empty: off")
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus /metrics on this address (empty: off)")
	fs.BoolVar(&o.pprof, "pprof", false, "also serve /debug/pprof/ on the --metrics address")
	fs.IntVar(&cfg.Workers, "workers", runtime.NumCPU(), "decode goroutines on this machine, shared by all streams and peers' leases; 0: decode nothing here, peers make every batch")
	fs.Var(negated{&cfg.NoCacheAffinity}, "cache-affinity", "lease each batch in parts, each sample to its home maker (a rendezvous hash of its index over the local executor and the peers), so that their caches (--coef-budget, a bucket's bytes) hold disjoint shares of the dataset: a pool caches what no one maker can; false: each batch to whichever maker would finish it soonest")
	fs.IntVar(&cfg.Window, "window", 0, "leases one job has in flight at once; 0: two per ready maker (local executor, each peer), at least 4")
	fs.StringVar(&cfg.Peers, "peers", "", "servers to lease batches to: ADDR,ADDR,... or dns:///NAME:PORT (re-resolved; a Kubernetes headless Service works as is)")
	fs.StringVar(&cfg.GPUs, "gpus", "all", "the trainer's GPUs the NVML monitor watches: all, none or 0,1 (without a driver: unavailable, and the trainer's wait alone drives the window)")
	fs.StringVar(&cfg.Schedule, "schedule", "stall", "how the local cores are shared between jobs: stall (by each job's input stall and GPU work per sample, with a floor) or fifo (for comparison)")
	fs.Float64Var(&cfg.ShareFloor, "share-floor", 0, "under --schedule stall, the least share of the cores a job gets among jobs of its kind (this server's trainers', or Work jobs); 0: 1/(2·jobs)")
	fs.Float64Var(&cfg.WorkShare, "work-share", 0, "under --schedule stall, the most of the local cores Work jobs (other servers' leases) take while this server's own trainers' jobs have samples waiting: 0 (the default) puts trainers first, Work jobs get the cores they leave; 1 puts Work jobs first")
	fs.Float64Var(&cfg.StallTarget, "stall-target", server.DefaultStallTarget, "input-stall ratio (trainer wait over wall time) each job's window controller aims under")
	fs.DurationVar(&cfg.AdviseWindow, "advise-window", server.DefaultAdviseWindow, "how long the advisor's worker recommendation must have been lower before stoker_workers_recommended falls (rises at once): an autoscaler on it does not flap")
	fs.IntVar(&cfg.MaxWorkersRecommended, "max-workers-recommended", server.DefaultMaxWorkersRecommended, "the most workers stoker_workers_recommended ever says")
	fs.Float64Var(&cfg.VerifyFraction, "verify-fraction", server.DefaultVerifyFraction, "share of peers' samples this coordinator makes again itself and compares byte for byte (peers' labels and indices are always checked); a peer that does not match is quarantined; negative: off")
	fs.DurationVar(&cfg.LeaseTimeout, "lease-timeout", server.DefaultLeaseTimeout, "how long a maker may go without progress on a batch (no sample of it begun or finished, no step of one; before any began, its executor making nothing) before its lease goes to another: the deadline follows the work, so a slow maker that keeps working is never raced by copies of its own lease")
	fs.DurationVar(&cfg.PeerRefresh, "peer-refresh", 5*time.Second, "how often a dns:/// --peers name is resolved again")
	fs.Int64Var(&cfg.MaxBatchBytes, "max-batch-bytes", server.DefaultMaxBatchBytes, "refuse jobs whose batches are larger")
	fs.Float64Var(&cfg.MaxCPUWeight, "max-cpu-weight", 1, "the most a job's cpu_weight (its weight in the executor's share of the cores, which is by CPU time) may ask, and 1/this the least; 1: every job weighs alike")
	fs.DurationVar(&cfg.MaxSampleCPU, "max-sample-cpu", transform.DefaultMaxSampleCPU, "refuse, when a job opens, a transform whose worst sample the cost model predicts at more CPU than this (every preset is under 10 ms); negative (-1s): no limit")
	fs.DurationVar(&cfg.MaxMeasuredCPU, "max-measured-cpu", 0, "fail a job whose samples measure more CPU than this on average on this server's workers (after 8 samples), with RESOURCE_EXHAUSTED naming what they measured: the cost model admitted it, its samples say otherwise; 0 (the default): 4 x --max-sample-cpu; negative: no bound")
	fs.IntVar(&cfg.MaxStreamsPerClient, "max-streams-per-client", server.DefaultMaxStreamsPerClient, "open Feed streams allowed per client: the subject of its verified certificate over mutual TLS (--tls-client-ca), else its host (never its connection)")
	fs.IntVar(&cfg.MaxStreams, "max-streams", server.DefaultMaxStreams, "open Feed (trainer) streams allowed in all; Work streams are counted apart (--max-work-streams)")
	fs.Var(acceptWork{&cfg.AcceptWork}, "accept-work", "make batches for other servers' coordinators (Work streams); default true, but false on a server given --peers (a coordinator: its cores are its trainer's)")
	fs.IntVar(&cfg.MaxWorkStreams, "max-work-streams", server.DefaultMaxWorkStreams, "open Work streams (coordinators leasing batches here) allowed in all, apart from Feed streams")
	fs.IntVar(&cfg.MaxWorkStreamsPerClient, "max-work-streams-per-client", server.DefaultMaxWorkStreamsPerClient, "open Work streams allowed per client (its certificate's subject over mutual TLS, else its host)")
	fs.Int64Var(&cfg.MaxWorkMemoryPerClient, "max-work-memory-per-client", 0, "bytes the Work streams of one client (its certificate's subject over mutual TLS, else its host) may make this server keep (their jobs, leases and buffers), refused past it with RESOURCE_EXHAUSTED; 0: a quarter of what --memory-budget gives batches")
	fs.DurationVar(&cfg.WorkIdleTimeout, "work-idle-timeout", server.DefaultWorkIdleTimeout, "end a Work stream that sends nothing this long while no lease of it is pending (coordinators ping within a third of it)")
	fs.DurationVar(&cfg.WorkJobIdle, "work-job-idle", server.DefaultWorkJobIdle, "end a Work stream's job that has had no lease this long (its coordinator registers it again if it comes back), freeing its queue and its share of the client's Work memory")
	fs.Int64Var(&cfg.MemoryBudget, "memory-budget", 0, "memory the server may use (Go's soft limit); with a dataset in object storage, 1/8 of it is the byte cache's memory and 1/16 the read-ahead's; batch buffers get 3/4 of what those, the coefficient cache (--coef-budget: a quarter by default) and the partner cache (--partner-budget: a sixteenth) leave; 0: half of the machine's (or cgroup's) memory; at least 384 MiB (402653184): under it the process's own memory would pass the budget")
	fs.DurationVar(&cfg.FirstMessageTimeout, "first-message-timeout", 10*time.Second, "how long a new stream may take to send its first message")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", server.DefaultIdleTimeout, "end a Feed stream whose trainer neither reads nor grants credit this long while a batch waits")
	fs.BoolVar(&cfg.Shm, "shm", true, "offer trainers on this machine their batches through a shared-memory ring (Linux; trainers elsewhere get gRPC chunks)")
	o.bench.flags(fs)
	fs.Int64Var(&cfg.PixelBudget, "pixel-budget", 64<<20, "refuse images with more pixels (from the header, before decoding)")
	fs.IntVar(&cfg.MaxScans, "max-scans", 100, "refuse progressive JPEGs with more scans")
	fs.StringVar(&cfg.Decode, "decode", "exact", "how jobs that do not say (JobSpec.decode, Loader(decode=...)) decode their JPEGs: exact (full scale, then torchvision's resampling: its pixels) or fast (a DCT scale of 1/2, 1/4 or 1/8 where the crop is at least that many times the output: faster on large photos, not torchvision's bytes)")
	fs.Int64Var(&cfg.MaxFileSize, "max-file-size", dataset.DefaultMaxFileSize, "refuse larger files")
	fs.Int64Var(&cfg.IndexBudget, "index-budget", 0, "memory for the decoder index (entropy-decoder checkpoints of each baseline JPEG decoded, so that later epochs decode only their crops), least recently used files dropped first; 0: 1/16 of --memory-budget; -1: no index")
	fs.Int64Var(&cfg.CoefBudget, "coef-budget", 0, "memory for the coefficient cache (each baseline JPEG's DCT coefficients, kept once decoded, so that later epochs copy them instead of entropy-decoding them: about 2-3x the JPEG's bytes per file, for datasets that fit; and each progressive JPEG rewritten losslessly as a baseline one, about its size, so that it gets the same), taken out of --memory-budget; files admitted on their second decode while it has room, then kept; 0: a quarter of --memory-budget where this server decodes (--workers > 0) and that is at least 64 MiB, else none; -1: none")
	fs.Int64Var(&cfg.PartnerBudget, "partner-budget", 0, "memory for the partner cache (the images the YOLO family's multi-image ops load, each photo decoded and resized to imgsz once and kept, so that the window of the epoch's order its partners are drawn from decodes each photo about once: about 0.9 MB a 640-pixel photo), taken out of --memory-budget; the least recently used evicted; 0: a sixteenth of --memory-budget where this server decodes (--workers > 0) and that is at least 64 MiB, else none; -1: none")
	fs.StringVar(&cfg.CacheDir, "cache-dir", "", "keep the byte cache of datasets in object storage on disk here too (ranges written once, proven by their MAC when read (--cache-key-file), kept across restarts, keyed by each object's version), within --cache-budget; empty: memory only")
	fs.Int64Var(&cfg.CacheBudget, "cache-budget", 0, "bytes of --cache-dir the byte cache may fill: ranges are admitted while it has room, then kept (needed with --cache-dir)")
	fs.StringVar(&cfg.CacheKeyFile, "cache-key-file", "", "the key --cache-dir's entries are proven with (a MAC, AES-256-GMAC; made on first use, mode 0600); keep it outside --cache-dir, readable by this user only: whoever can write the directory but not read the key cannot make the server serve other bytes; empty: stoker/cache-key in the user's configuration directory, else a key of this process (an earlier run's entries then read again)")
	fs.DurationVar(&cfg.StoreTimeout, "store-timeout", source.DefaultPolicy().RequestTimeout, "deadline of each try of a request to an object store, to its last byte: a stalled try fails at it and is retried (with backoff, up to --store-attempts); a store that holds every request fails a sample's read after at most attempts×timeout + backoff (3m3.1s by default: 6×30s + 3.1s), twice that when its read-ahead failed first; a lease (--lease-timeout) that runs out before then fails with its own deadline, not the store's answer")
	fs.IntVar(&cfg.StoreAttempts, "store-attempts", source.DefaultPolicy().Attempts, "most tries of one request to an object store (>= 1; throttling, 5xx, resets, cut bodies and stalls are retried, within a retry budget shared by the store's requests)")
	fs.StringVar(&cfg.IndexDir, "index-dir", "", "keep the decoder index in this directory: confirmed checkpoints saved on shutdown, loaded at start as evidence only (each is checked against its JPEG and compared as decodes pass it, never decoded from until confirmed: a file that lies costs no pixels, and a restart's first epoch decodes as a cold one); empty: not kept")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate: serve TLS (with --tls-key)")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&cfg.TLSClientCA, "tls-client-ca", "", "PEM CA: mutual TLS, clients must present a certificate it signed")
	fs.StringVar(&cfg.AuthTokens, "auth-tokens", "", "file of accepted bearer tokens, one per line (# comments); every method but health needs one; reread on SIGHUP, which cuts the open streams (Feed and Work) of tokens no longer in it")
	fs.StringVar(&cfg.PeerTokenFile, "peer-token-file", "", "file whose first token this server sends to its --peers")
	fs.StringVar(&cfg.PeerCA, "peer-ca", "", "PEM CA of the peers' certificates: dial peers with TLS, presenting --peer-cert (default --tls-cert) as a client certificate; a dns:/// --peers name is what their certificates must name")
	fs.StringVar(&cfg.PeerCert, "peer-cert", "", "PEM client certificate for peers that require mutual TLS, when it is not --tls-cert (with --peer-key and --peer-ca)")
	fs.StringVar(&cfg.PeerKey, "peer-key", "", "PEM private key of --peer-cert")
	fs.BoolVar(&cfg.PeerInsecureToken, "peer-insecure-token", false, "allow the peer token over plaintext to non-loopback peers")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "on SIGINT/SIGTERM, how long open Feed streams may finish before they are cut (Work streams take no new leases, finish those in flight, then end)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log lines as text or json")
	fs.TextVar(&o.level, "log-level", slog.LevelInfo, "debug, info, warn or error")
	fs.BoolVar(&o.helpBench, "help-bench", false, "list the flags for benchmarks only")
	fs.Usage = func() { serveUsage(fs.Output(), fs, false) }
	return fs, o
}

// acceptWork is --accept-work: a bool flag that leaves cfg.AcceptWork nil
// (the default for the server's role) unless given.
type acceptWork struct{ v **bool }

func (a acceptWork) IsBoolFlag() bool { return true }

func (a acceptWork) String() string {
	if a.v == nil || *a.v == nil {
		return ""
	}
	return strconv.FormatBool(**a.v)
}

func (a acceptWork) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*a.v = &b
	return nil
}

// negated is a bool flag that sets its field to the opposite: a flag
// true by default over a field whose zero value is the default.
type negated struct{ v *bool }

func (n negated) IsBoolFlag() bool { return true }

func (n negated) String() string {
	if n.v == nil {
		return "false" // the zero Value: --help shows the default
	}
	return strconv.FormatBool(!*n.v)
}

func (n negated) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*n.v = !b
	return nil
}

type serveOpts struct {
	listen, addrFile, metrics, logFormat string
	whileLocked                          string
	healthListen                         string
	pprof, helpBench                     bool
	grace                                time.Duration
	level                                slog.Level
	bench                                benchOpts
}

// runServe is `stoker serve`: flags into a server.Config, then the gRPC
// server, the metrics endpoint and the signal handling around server.New.
func runServe(args []string) error {
	ctx := cmdContext() // first, so that a signal never finds the default handler
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	cfg := server.Config{Datasets: map[string]string{}, Manifests: map[string]string{}}
	fs, o := serveFlags(&cfg)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if o.helpBench {
		serveUsage(fs.Output(), fs, true)
		return flag.ErrHelp
	}
	if err := errors.Join(cfg.Validate(), server.CheckMemoryFloor(cfg.MemoryBudget), o.bench.validate()); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	users, err := openUsers(o.whileLocked)
	if err != nil {
		return err
	}
	cpu.SpareP(cfg.Workers)

	hopts := &slog.HandlerOptions{Level: o.level}
	log := slog.New(slog.NewTextHandler(os.Stderr, hopts))
	switch o.logFormat {
	case "json":
		log = slog.New(slog.NewJSONHandler(os.Stderr, hopts))
	case "text":
	default:
		return fmt.Errorf("serve: --log-format %q: want text or json", o.logFormat)
	}
	log.Info("stoker serve", "version", version.String(), "go", runtime.Version())
	o.bench.apply(&cfg, log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(runtimeCollectors()...)
	srv, err := server.NewContext(ctx, cfg, log, reg)
	if err != nil {
		return err
	}
	defer srv.Close() // after the gRPC server has stopped (defers run last-in first-out)
	if os.Getenv("GOMEMLIMIT") == "" {
		// Garbage must not take the process past its budget: GOGC alone
		// lets the heap grow to twice what is live.
		debug.SetMemoryLimit(srv.GoMemoryLimit())
	}
	gs, hs, err := srv.GRPCServer()
	if err != nil {
		return err
	}

	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	warnListen(log, lis.Addr(), cfg)
	errc := make(chan error, 3)
	go func() { errc <- gs.Serve(lis) }()
	if o.healthListen != "" {
		// The same health server: a drain's NOT_SERVING shows here too.
		hlis, err := net.Listen("tcp", o.healthListen)
		if err != nil {
			gs.Stop()
			return err
		}
		hgs := grpc.NewServer()
		healthpb.RegisterHealthServer(hgs, hs)
		defer hgs.Stop()
		go func() { errc <- hgs.Serve(hlis) }()
		log.Info("health", "addr", hlis.Addr().String())
	}
	if o.metrics != "" {
		mlis, err := net.Listen("tcp", o.metrics)
		if err != nil {
			gs.Stop()
			return err
		}
		hsrv := &http.Server{Handler: metricsMux(reg, reg, o.pprof), ReadHeaderTimeout: 10 * time.Second}
		defer hsrv.Close()
		go func() { errc <- hsrv.Serve(mlis) }()
		log.Info("metrics", "addr", mlis.Addr().String(), "pprof", o.pprof)
		if o.pprof {
			warnPprof(log, mlis.Addr())
		}
	}
	addr := lis.Addr().String()
	if o.addrFile != "" {
		if err := writeFileAtomic(o.addrFile, addr+"\n"); err != nil {
			gs.Stop()
			return err
		}
	}
	if users != nil {
		ctx = whileLocked(ctx, users, o.addrFile, log)
	}
	log.Info("listening", "addr", addr, "workers", cfg.Workers, "datasets", len(cfg.Datasets), "peers", cfg.Peers,
		"tls", cfg.TLSCert != "", "mtls", cfg.TLSClientCA != "", "auth", cfg.AuthTokens != "")

	for stop := false; !stop; {
		select {
		case <-ctx.Done():
			stop = true
		case <-hup:
			if err := srv.ReloadTokens(); err != nil {
				log.Error("SIGHUP: tokens not reloaded, the old ones stay", "err", err)
			}
		case err := <-errc:
			gs.Stop()
			return err
		}
	}
	// Drain: health says NOT_SERVING so balancers move away; Work streams
	// finish the leases they hold and end; Feed streams get the grace
	// period to finish their epoch, then are cut.
	log.Info("stopping", "grace", o.grace)
	hs.Shutdown()
	srv.Drain()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(o.grace):
		log.Warn("grace period over, closing open streams")
		srv.Stopping()
		gs.Stop()
		<-stopped
	}
	log.Info("stopped")
	return nil
}

// metricsMux answers /metrics from g (its own metrics registered on reg),
// and /debug/pprof/ when asked; 404 elsewhere.
func metricsMux(g prometheus.Gatherer, reg prometheus.Registerer, withPprof bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: reg}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// writeFileAtomic writes data to path through a rename, so that a reader
// polling for the file never sees it half-written.
func writeFileAtomic(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addr-*")
	if err != nil {
		return err
	}
	_, err = tmp.WriteString(data)
	if err = errors.Join(err, tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
