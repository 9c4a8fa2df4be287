package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stoker-dev/stoker/internal/gpu"
	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/transform"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/limits"
	"github.com/stoker-dev/stoker/server/internal/makers"
)

// Defaults for the zero values of Config's fields.
const (
	DefaultWindow       = coord.DefaultWindow
	DefaultLeaseTimeout = 10 * time.Second
	DefaultMaxStreams   = 256
	DefaultStallTarget  = coord.DefaultStallTarget
	DefaultIdleTimeout  = 10 * time.Minute
	// DefaultMeasuredBound is MaxMeasuredCPU's default over MaxSampleCPU.
	DefaultMeasuredBound = job.DefaultMeasuredBound
	// DefaultAdviseWindow is how long a lower worker recommendation must
	// hold before it is published (the HPA's scale-down stabilization).
	DefaultAdviseWindow = 60 * time.Second
	// DefaultMaxWorkersRecommended bounds the published recommendation.
	DefaultMaxWorkersRecommended = 64
	// DefaultVerifyFraction is the share of peers' samples re-made and
	// compared (makers.DefaultVerifyFraction).
	DefaultVerifyFraction = makers.DefaultVerifyFraction
	// maxStatusMessage bounds the message of any status the server
	// returns: it travels in a header, and clients refuse large ones
	// (grpc-go's limit is 16 KiB, Python's 8 KiB, after percent-encoding).
	maxStatusMessage = 2048
	// maxWindow bounds a job's window, configured or automatic.
	maxWindow                  = coord.MaxWindow
	DefaultMaxBatchBytes       = 256 << 20
	DefaultMaxStreamsPerClient = 16
	// DefaultMaxWorkStreams and DefaultMaxWorkStreamsPerClient bound the
	// Work streams (coordinators leasing batches here), counted apart from
	// Feed streams: one per coordinator process, so a worker shared by a
	// large cluster has many, each small (its buffers come out of the
	// memory budget).
	DefaultMaxWorkStreams          = 1024
	DefaultMaxWorkStreamsPerClient = 16
	// DefaultWorkIdleTimeout ends a Work stream that sends nothing for
	// this long while no lease is pending (coordinators ping within a
	// third of it).
	DefaultWorkIdleTimeout = time.Minute
	DefaultWorkJobIdle     = work.DefaultJobIdle // Config.WorkJobIdle's default
	// MaxChunkBytes is the largest Chunk the server sends (job.MaxChunkBytes).
	MaxChunkBytes = job.MaxChunkBytes
	// maxRecvMsgBytes bounds what a client may send: its messages are small.
	maxRecvMsgBytes = 1 << 20
)

// Config configures a Server. Zero values take the defaults named on each
// field.
type Config struct {
	// Datasets maps the names clients use to dataset paths (an ImageFolder
	// root, a WebDataset shard or a folder of shards) or object-storage
	// URLs (s3://bucket/prefix, gs://bucket/prefix,
	// azblob://container/prefix, in either layout). Clients never see
	// the paths.
	Datasets map[string]string
	// Manifests names the manifest (a path or URL that `stoker index
	// --out` wrote) of some of the Datasets, by dataset name. A dataset
	// without one here uses the manifest beside its data when there is
	// one, else is listed (and its shards read) at start.
	Manifests map[string]string
	// Annotations names the COCO annotations file of some of the
	// Datasets, by dataset name: that dataset is the directory of images
	// the file names (dataset.OpenCOCO), each sample's annotations its
	// field "coco". A file that is not COCO is refused at start.
	Annotations map[string]string
	// Workers is the local executor's goroutine count, shared by all
	// streams and by the peers that lease batches here. 0 means no local
	// executor: the server only coordinates (its jobs' batches are all made
	// by peers) and refuses Work streams.
	Workers int
	// NoCacheAffinity turns off routing by cache affinity: by default a
	// job with two makers or more leases each batch in parts, each sample
	// made at its home maker (rendezvous hashing of its index over the
	// makers the job can use), so that the makers' caches hold disjoint
	// shares of the dataset and a pool caches what no one maker can.
	NoCacheAffinity bool
	// Window is how many leases one job has in flight at once. 0 means
	// automatic: two per ready maker (the local executor, each connected
	// peer), at least DefaultWindow.
	Window int
	// Peers are the servers this one leases batches to: "ADDR,ADDR,…" or
	// "dns:///NAME:PORT" (or "dns://RESOLVER/NAME:PORT"), re-resolved every
	// PeerRefresh. Empty: none.
	Peers string
	// PeerRefresh is how often a dns:/// peer target is resolved again.
	// Default 5 s.
	PeerRefresh time.Duration
	// GPUs are the trainer's GPUs the NVML monitor watches: "all", "none"
	// or "0,1". Empty: none. Without a driver (or cgo) the monitor reports
	// unavailable and the trainer's wait alone drives the controller.
	GPUs string
	// Schedule is how the local executor shares its cores between jobs:
	// "stall" (default: by each job's input stall and its trainer's GPU work
	// per sample, every stalled job keeping at least ShareFloor) or "fifo"
	// (batches in arrival order, for comparison).
	Schedule string
	// ShareFloor is the least share of the cores a job gets under the
	// stall schedule, among the jobs of its kind (this server's own
	// trainers' jobs, or Work jobs: WorkShare); 0 means 1/(2·jobs).
	ShareFloor float64
	// WorkShare is the most of the local cores that Work jobs (other
	// servers' coordinators' leases) take while this server's own Feed
	// jobs have samples waiting for them, under the stall schedule: 0,
	// the default, puts Feed jobs first (Work jobs get the cores they
	// leave); 0.25 gives Work jobs a quarter while both want more; 1 puts
	// Work jobs first. Either kind gets all the cores the other leaves.
	WorkShare float64
	// StallTarget is the input-stall ratio (trainer wait over wall time)
	// each job's window controller aims under: it widens the window while
	// the stall is above it. Default DefaultStallTarget.
	StallTarget float64
	// AdviseWindow is how long the advisor's recommendation must have been
	// lower before stoker_workers_recommended falls (rises are published
	// at once). Default DefaultAdviseWindow.
	AdviseWindow time.Duration
	// MaxWorkersRecommended bounds stoker_workers_recommended. Default
	// DefaultMaxWorkersRecommended.
	MaxWorkersRecommended int
	// VerifyFraction is the share of peers' samples the coordinator makes
	// again itself and compares byte for byte (peers' labels and indices
	// are always checked). 0 means DefaultVerifyFraction; negative turns
	// the byte comparison off.
	VerifyFraction float64
	// LeaseTimeout is how long a maker may go without progress on a batch
	// (batch.Progress) before its lease goes to another. Default
	// DefaultLeaseTimeout.
	LeaseTimeout time.Duration
	// MaxBatchBytes refuses jobs whose batches would be larger. Default
	// DefaultMaxBatchBytes (256 MiB).
	MaxBatchBytes int64
	// MaxSampleCPU refuses, at open, jobs whose worst sample the cost
	// model predicts at more CPU (transform.Transform.Cost). Default
	// transform.DefaultMaxSampleCPU (250 ms); negative: no limit.
	MaxSampleCPU time.Duration
	// MaxMeasuredCPU fails a job whose samples measure more CPU than this
	// on average (job.CheckMeasured). Default DefaultMeasuredBound x
	// MaxSampleCPU (none when that is negative); negative: no bound.
	MaxMeasuredCPU time.Duration
	// MaxCPUWeight bounds what a job's JobSpec.cpu_weight may ask: it is
	// clamped to [1/MaxCPUWeight, MaxCPUWeight]. Default (0) and 1: every
	// job weighs 1 (a client cannot raise its share).
	MaxCPUWeight float64
	// MaxStreamsPerClient bounds the open Feed streams per client: the
	// subject of its verified certificate over mutual TLS, else its host
	// (rpc.LimitID; never its connection). Default
	// DefaultMaxStreamsPerClient.
	MaxStreamsPerClient int
	// MaxStreams bounds the open Feed streams in all (Work streams are
	// counted apart: MaxWorkStreams). Default DefaultMaxStreams.
	MaxStreams int
	// AcceptWork says whether the server makes batches for other servers'
	// coordinators (Work streams). nil: yes, unless Peers is set (a
	// coordinator's cores are its trainer's, and its host is a GPU host).
	// A server with Workers 0 refuses Work streams whatever it says.
	AcceptWork *bool
	// MaxWorkStreams and MaxWorkStreamsPerClient bound the open Work
	// streams, in all and per client (as MaxStreamsPerClient counts
	// one), apart from Feed streams: so
	// that coordinators can never starve trainers of streams, or the
	// reverse. Defaults DefaultMaxWorkStreams and
	// DefaultMaxWorkStreamsPerClient.
	MaxWorkStreams, MaxWorkStreamsPerClient int
	// MaxWorkMemoryPerClient bounds the memory the Work streams of one
	// client (as MaxStreamsPerClient counts one) make this server keep (their jobs' state, their
	// leases' batches, the buffers kept for their next leases), within
	// the batch budget all of them share (MemoryBudget): past it a lease
	// is refused, and a job's registration ends its stream, with
	// RESOURCE_EXHAUSTED. 0 means a quarter of the batch budget.
	MaxWorkMemoryPerClient int64
	// WorkIdleTimeout ends a Work stream that sends nothing for this long
	// while no lease of it is pending; its first request must come within
	// FirstMessageTimeout. Default DefaultWorkIdleTimeout.
	WorkIdleTimeout time.Duration
	// WorkJobIdle ends a Work stream's job that had no lease this long,
	// freeing its queue and Work memory. Default DefaultWorkJobIdle.
	WorkJobIdle time.Duration
	// MemoryBudget is the memory the server may use. Batch buffers, which
	// are nearly all of it (Feed jobs' reorder buffers and Work leases),
	// come out of three quarters of what the coef and partner caches
	// and, with a dataset in object storage, the byte cache (1/8) and the
	// read-ahead (1/16) leave; stoker serve sets Go's soft memory limit to
	// it, so that garbage does not take the process past it. Default half
	// of the machine's memory (or of its cgroup limit).
	MemoryBudget int64
	// FirstMessageTimeout is how long a new stream may take to send its
	// first message (OpenJob). Default 10 s.
	FirstMessageTimeout time.Duration
	// IdleTimeout ends a Feed stream whose trainer has granted no credit, or
	// not read what was sent, for this long while a batch waits for it.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Making, when set, wraps how the local executor makes each job's
	// batches, its own trainers' and its peers' leases alike: it is
	// called once per job with the job's dataset, its batch size and the
	// executor's own MakeFunc, and returns the one to use. stoker serve's
	// benchmark flags set it (--bench-replay, --bench-rate: bench/making);
	// nil: the executor's.
	Making func(ds dataset.Dataset, batchSize int, make MakeFunc) MakeFunc
	// GPU, when set, is the monitor of the trainer's GPUs in place of
	// NVML's (GPUs is then ignored), closed with the server: stoker
	// serve's --bench-gpu-idle-file sets it to a file a simulated trainer
	// rewrites.
	GPU gpu.Monitor
	// Shm offers same-host trainers delivery through a shared-memory ring
	// (Linux); off, every batch goes in chunks.
	Shm bool

	// PixelBudget refuses images with more pixels (checked from the header,
	// before decoding). Default 64 Mpx.
	PixelBudget int64
	// MaxScans refuses progressive JPEGs with more scans. Default 100.
	MaxScans int
	// Decode is how jobs that leave JobSpec.decode unspecified decode
	// their JPEGs: "exact" (the default, also ""), at full scale as
	// torchvision does, or "fast", at a DCT scale where the crop is at
	// least twice the output (transform.DecodeFast).
	Decode string
	// decode is Decode parsed (withDefaults).
	decode transform.DecodeMode
	// MaxFileSize refuses larger files. Default dataset.DefaultMaxFileSize.
	MaxFileSize int64
	// IndexBudget bounds the local executor's decoder index (checkpoints
	// of the entropy decoder in each baseline JPEG decoded, so that later
	// epochs decode only what their crops need; index.Index). Default
	// (0) MemoryBudget/16; negative: no index.
	IndexBudget int64
	// IndexDir is where the decoder index is saved when the server closes
	// and loaded from when it starts, in a file named by the datasets'
	// fingerprints. Empty: not kept.
	IndexDir string
	// CoefBudget is memory for the local executor's coefficient cache
	// (each baseline JPEG's quantized DCT coefficients, kept once decoded,
	// so that later epochs copy them instead of entropy-decoding them;
	// and each progressive JPEG's lossless sequential transcode, so that
	// it gets the same; codec.CoefCache), taken out of MemoryBudget.
	// About two to three times a JPEG's bytes per file. 0, the default: a quarter of
	// MemoryBudget (DefaultCoefShare) on a server that decodes (Workers >
	// 0), where that is at least MinDefaultCoefBudget (less holds too few
	// files to pay for itself); negative: none.
	CoefBudget int64
	// coefCache is the coefficient cache's bytes CoefBudget comes to
	// (withDefaults): 0 for none.
	coefCache int64
	// PartnerBudget is memory for the partner cache (cv.PartnerCache), out of
	// MemoryBudget; 0: limits.PartnerCacheBytes' default (1/16); negative: none.
	PartnerBudget, partnerCache int64 // partnerCache: what it comes to (withDefaults)
	// CacheDir keeps the byte cache of datasets in object storage on disk
	// too: each range read from a store is written once (atomically, with
	// a MAC under CacheKeyFile's key proven at every read) and kept across
	// restarts (keyed by the object's version). Empty: memory only. The memory tier and the
	// read-ahead take 1/8 and 1/16 of MemoryBudget on a server with a
	// remote dataset.
	CacheDir string
	// CacheBudget bounds CacheDir's bytes; needed with CacheDir.
	CacheBudget int64
	// CacheKeyFile holds the key CacheDir's entries are proven with
	// (source.LoadCacheKey: made on first use, 0600, never inside
	// CacheDir). Empty: source.DefaultCacheKeyFile (the user's
	// configuration directory), or, where that cannot be written, a key of
	// this process alone (logged: an earlier run's entries are then read
	// from the store again).
	CacheKeyFile string
	// StoreTimeout is the deadline of each try of a request to an object
	// store, to its last byte, and StoreAttempts the most tries of one
	// request (source.Policy's RequestTimeout and Attempts); 0: the
	// default (30 s, 6). A store that holds every request fails a read
	// after at most source.Policy.MaxWait.
	StoreTimeout  time.Duration
	StoreAttempts int

	// TLSCert and TLSKey are PEM files: serve TLS. With TLSClientCA
	// (mutual TLS) clients must present a certificate it signed.
	TLSCert, TLSKey, TLSClientCA string
	// AuthTokens is a file of accepted bearer tokens, one per line (blank
	// lines and # comments allowed), reread by ReloadTokens, which cuts the
	// open streams of the tokens no longer in it. When set, every method
	// but health needs one.
	AuthTokens string
	// PeerTokenFile holds the token this server sends to its peers.
	PeerTokenFile string
	// PeerCA is a PEM file of the CA that signed the peers' certificates:
	// peers are dialed with TLS, presenting PeerCert/PeerKey (default
	// TLSCert/TLSKey) as a client certificate when set. Empty: plaintext.
	// A dns:/// Peers target's certificates are checked against its name,
	// static addresses' against the address.
	PeerCA string
	// PeerCert and PeerKey are the client certificate presented to peers,
	// when it is not the one served (a coordinator that serves its trainer
	// in plaintext on loopback and its workers require mutual TLS).
	PeerCert, PeerKey string
	// PeerInsecureToken allows the peer token over plaintext to non-loopback peers.
	PeerInsecureToken bool

	// For tests: the decoder identity the server claims (WorkerInfo) and compares its peers' with; nil: local.
	identity *pipeline.Identity
	// For tests: resolves a dns:/// Peers name; nil: DNS.
	lookup func(ctx context.Context, host string) ([]string, error)
}

// MakeFunc makes one job's batch of the samples indices of epoch into b
// (Config.Making; makers.MakeFunc).
type MakeFunc = makers.MakeFunc

// acceptsWork is AcceptWork resolved.
func (c Config) acceptsWork() bool {
	if c.AcceptWork != nil {
		return *c.AcceptWork
	}
	return c.Peers == ""
}

// decoderIdentity is the identity the server claims.
func (c Config) decoderIdentity() pipeline.Identity {
	if c.identity != nil {
		return *c.identity
	}
	return pipeline.LocalIdentity()
}

// Validate reports what is wrong with c, all of it.
func (c Config) Validate() error {
	var errs []error
	if len(c.Datasets) == 0 {
		errs = append(errs, errors.New("no datasets: give at least one NAME=PATH"))
	}
	errs = append(errs, c.datasetErrors()...)
	errs = append(errs, c.annotationErrors()...)
	if c.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers %d: want >= 0 (0: no local decoding, peers make every batch)", c.Workers))
	}
	if c.Window < 0 || c.Window > maxWindow {
		errs = append(errs, fmt.Errorf("window %d: want 0..%d (0 means automatic)", c.Window, maxWindow))
	}
	errs = append(errs, c.peerErrors()...)
	if c.Workers == 0 && c.Peers == "" {
		errs = append(errs, errors.New("workers 0 and no peers: nothing would make batches"))
	}
	if c.GPUs != "" {
		if _, err := gpu.ParseSelection(c.GPUs); err != nil {
			errs = append(errs, fmt.Errorf("gpus: %w", err))
		}
	}
	if c.Schedule != "" {
		if _, err := pipeline.ParseSchedule(c.Schedule); err != nil {
			errs = append(errs, err)
		}
	}
	// Written so that NaN fails them too.
	if !(c.ShareFloor >= 0 && c.ShareFloor <= 1) {
		errs = append(errs, fmt.Errorf("share floor %v: want 0..1 (0 means 1/(2·jobs))", c.ShareFloor))
	}
	if !(c.WorkShare >= 0 && c.WorkShare <= 1) {
		errs = append(errs, fmt.Errorf("work share %v: want 0..1 (0: this server's own Feed jobs first)", c.WorkShare))
	}
	if c.MaxWorkMemoryPerClient < 0 {
		errs = append(errs, fmt.Errorf("max work memory per client %d: want >= 0 (0: a quarter of the batch budget)", c.MaxWorkMemoryPerClient))
	}
	if !(c.StallTarget >= 0 && c.StallTarget < 1) {
		errs = append(errs, fmt.Errorf("stall target %v: want 0..1 (0 means %v)", c.StallTarget, DefaultStallTarget))
	}
	if math.IsNaN(c.VerifyFraction) || c.VerifyFraction > 1 {
		errs = append(errs, fmt.Errorf("verify fraction %v: want 0..1 (0: the default, %v; negative: off)", c.VerifyFraction, DefaultVerifyFraction))
	}
	if c.AdviseWindow < 0 || c.MaxWorkersRecommended < 0 {
		errs = append(errs, fmt.Errorf("advise window %v, max workers recommended %d: want >= 0 (0: the default)", c.AdviseWindow, c.MaxWorkersRecommended))
	}
	if c.LeaseTimeout < 0 {
		errs = append(errs, fmt.Errorf("lease timeout %v: want > 0", c.LeaseTimeout))
	}
	if c.MaxStreams < 0 || c.MemoryBudget < 0 || c.FirstMessageTimeout < 0 || c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("max streams %d, memory budget %d, first message timeout %v, idle timeout %v: want >= 0 (0: the default)",
			c.MaxStreams, c.MemoryBudget, c.FirstMessageTimeout, c.IdleTimeout))
	}
	if c.CacheBudget < 0 || c.CacheDir != "" && c.CacheBudget == 0 || c.CacheDir == "" && c.CacheBudget > 0 {
		errs = append(errs, fmt.Errorf("cache dir %q, cache budget %d: give --cache-dir with --cache-budget, the bytes of disk it may fill, > 0", c.CacheDir, c.CacheBudget))
	}
	if c.CacheKeyFile != "" && c.CacheDir == "" {
		errs = append(errs, errors.New("--cache-key-file is the key of --cache-dir's entries: give it with --cache-dir"))
	}
	if c.StoreTimeout < 0 || c.StoreAttempts < 0 {
		errs = append(errs, fmt.Errorf("--store-timeout %v, --store-attempts %d: want > 0", c.StoreTimeout, c.StoreAttempts))
	}
	if c.Decode != "" {
		if _, err := transform.ParseDecodeMode(c.Decode); err != nil {
			errs = append(errs, fmt.Errorf("--decode %q: want exact (full scale, torchvision's pixels) or fast (DCT scaling where the crop is at least twice the output)", c.Decode))
		}
	}
	if c.PixelBudget < 0 || c.MaxScans < 0 || c.MaxFileSize < 0 {
		errs = append(errs, fmt.Errorf("pixel budget %d, max scans %d, max file size %d: want >= 0 (0: the default)", c.PixelBudget, c.MaxScans, c.MaxFileSize))
	}
	errs = append(errs, c.tlsErrors()...)
	if !(c.MaxCPUWeight == 0 || c.MaxCPUWeight >= 1 && c.MaxCPUWeight <= 1e3) {
		errs = append(errs, fmt.Errorf("max cpu weight %v: want 1..1000 (0 means 1)", c.MaxCPUWeight))
	}
	if c.MaxBatchBytes < 0 {
		errs = append(errs, fmt.Errorf("max batch bytes %d: want >= 0 (0 means %d)", c.MaxBatchBytes, DefaultMaxBatchBytes))
	}
	if c.MaxStreamsPerClient < 0 {
		errs = append(errs, fmt.Errorf("max streams per client %d: want >= 0 (0 means %d)", c.MaxStreamsPerClient, DefaultMaxStreamsPerClient))
	}
	if c.MaxWorkStreams < 0 || c.MaxWorkStreamsPerClient < 0 || c.WorkIdleTimeout < 0 || c.WorkJobIdle < 0 {
		errs = append(errs, fmt.Errorf("max work streams %d, max work streams per client %d, work idle timeout %v, work job idle %v: want >= 0 (0: the default)",
			c.MaxWorkStreams, c.MaxWorkStreamsPerClient, c.WorkIdleTimeout, c.WorkJobIdle))
	}
	return errors.Join(errs...)
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	if c.LeaseTimeout == 0 {
		c.LeaseTimeout = DefaultLeaseTimeout
	}
	if c.VerifyFraction == 0 {
		c.VerifyFraction = DefaultVerifyFraction
	}
	if c.AdviseWindow == 0 {
		c.AdviseWindow = DefaultAdviseWindow
	}
	if c.MaxWorkersRecommended == 0 {
		c.MaxWorkersRecommended = DefaultMaxWorkersRecommended
	}
	if c.PeerRefresh == 0 {
		c.PeerRefresh = 5 * time.Second
	}
	if c.StallTarget == 0 {
		c.StallTarget = DefaultStallTarget
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MemoryBudget == 0 {
		c.MemoryBudget = limits.DefaultMemoryBudget()
	}
	if c.FirstMessageTimeout == 0 {
		c.FirstMessageTimeout = 10 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.MaxSampleCPU == 0 {
		c.MaxSampleCPU = transform.DefaultMaxSampleCPU
	}
	if c.MaxMeasuredCPU == 0 && c.MaxSampleCPU > 0 {
		c.MaxMeasuredCPU = DefaultMeasuredBound * c.MaxSampleCPU
	}
	if c.MaxStreamsPerClient == 0 {
		c.MaxStreamsPerClient = DefaultMaxStreamsPerClient
	}
	if c.MaxWorkStreams == 0 {
		c.MaxWorkStreams = DefaultMaxWorkStreams
	}
	if c.MaxWorkStreamsPerClient == 0 {
		c.MaxWorkStreamsPerClient = DefaultMaxWorkStreamsPerClient
	}
	if c.WorkIdleTimeout == 0 {
		c.WorkIdleTimeout = DefaultWorkIdleTimeout
	}
	if c.WorkJobIdle == 0 {
		c.WorkJobIdle = DefaultWorkJobIdle
	}
	c.coefCache = limits.CoefCacheBytes(c.CoefBudget, c.MemoryBudget, c.Workers)
	c.partnerCache = limits.PartnerCacheBytes(c.PartnerBudget, c.MemoryBudget, c.Workers)
	c.decode, _ = transform.ParseDecodeMode(c.Decode)
	if c.Decode == "" {
		c.decode = transform.DecodeExact
	}
	return c
}

// The memory budget's floor and the coefficient cache's default share of
// it, as the tools outside server name them (server/internal/limits).
const (
	DefaultCoefShare     = limits.DefaultCoefShare
	MinDefaultCoefBudget = limits.MinDefaultCoefBudget
	MinMemoryBudget      = limits.MinMemoryBudget
)
