package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stoker-dev/stoker/internal/gpu"
	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/annot"
	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/limits"
	"github.com/stoker-dev/stoker/server/internal/makers"
	"github.com/stoker-dev/stoker/server/internal/plan"
	"github.com/stoker-dev/stoker/server/internal/shm"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Server implements stokerv1.FeedService (trainers) and
// stokerv1.WorkService (other servers' coordinators) over the datasets of
// its Config. Its jobs' batches are made by its makers: the local executor,
// shared by all streams, and the peers of Config.Peers.
type Server struct {
	stokerv1.UnimplementedFeedServiceServer
	stokerv1.UnimplementedWorkServiceServer

	cfg      Config
	log      *slog.Logger
	m        *metrics
	exec     *pipeline.Executor // nil with Workers 0
	makers   *coord.Makers
	disc     *discovery
	datasets map[string]dataset.Dataset
	names    []string // sorted

	tokens   tokens
	budget   *limits.Budget
	scratch  *scratchAccount // the workers' sample scratch in budget (scratch.go)
	workMem  *workClients    // what Work streams hold of budget, by client (rpc.LimitID)
	peerDial func(addr string) []work.Option
	jobs     sync.WaitGroup // coordinators and Work streams still running
	// gpuIdle is the trainer's GPUs' idle share, and whether it is known
	// (NVML); without a monitor, unknown.
	gpuIdle  func() (float64, bool)
	coord    *coord.Env       // what its coordinators share
	verify   *makers.Verifier // the coordinators' verifier of peers' batches
	worker   *work.Worker     // serves Work streams; nil with no executor
	active   sync.Map         // job name -> *coord.Coordinator, for Status
	gpu      gpu.Monitor      // nil without --gpus
	shm      *shm.Hub         // nil when shared memory is off
	shmOff   string           // why it is off
	shares   *makers.Shares   // nil with the fifo schedule or no executor
	index    *decoderIndex    // nil with no executor or a negative IndexBudget
	coefs    *codec.CoefCache // nil with no executor or no coefficient cache (CoefBudget)
	partners *cv.PartnerCache // nil with no executor or no partner cache (PartnerBudget)
	remote   *remoteReads     // nil with no dataset in object storage
	stop     chan struct{}    // closed by Close
	refusals refusalLog
	badFiles badFileLog // each file no sample could be made of, logged once

	streamID atomic.Uint64
	stopping atomic.Bool
	// draining is closed by Drain: Work streams finish their leases and
	// end.
	draining  chan struct{}
	drainOnce sync.Once
	// feedStreams and workStreams count the open streams of each service
	// apart, so that neither can take the other's.
	feedStreams, workStreams streamCount

	// tokenStreams are the open streams by token, cut when a reload
	// removes theirs.
	tokenStreams tokenStreams

	// dsSizes caches each held dataset's largest image and file for the
	// open-time scratch check (scratch.go's datasetSizes).
	dsSizes sync.Map
}

// streamCount is the open streams of one service, in all and by client
// (rpc.LimitID: its certificate's subject, else its host).
type streamCount struct {
	mu        sync.Mutex
	n         int
	perClient map[string]int
}

var (
	_ stokerv1.FeedServiceServer = (*Server)(nil)
	_ stokerv1.WorkServiceServer = (*Server)(nil)
)

// New validates cfg, loads its tokens and certificates, opens its
// datasets, starts the executor and peer discovery, and registers the
// metrics on reg. Close the Server when the gRPC server has stopped.
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	return NewContext(context.Background(), cfg, log, reg)
}

// NewContext is New, with ctx bounding the opening of the datasets (the
// listing of a bucket without a manifest may take minutes). It builds the
// server in steps, each of which may refuse cfg: the server's state and
// its memory budget, its credentials, its datasets, its executor and
// local maker, shared memory and the GPU monitor, and last what its
// coordinators share and peer discovery.
func NewContext(ctx context.Context, cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	s, err := newServer(cfg, log, reg)
	if err != nil {
		return nil, err
	}
	if err := s.dialing(reg); err != nil {
		return nil, err
	}
	if err := s.openDatasets(ctx, reg); err != nil {
		s.closeDatasets()
		return nil, err
	}
	s.makers = coord.NewMakers()
	if s.cfg.Workers > 0 {
		if err := s.startExecutor(reg); err != nil {
			s.closeDatasets()
			return nil, err
		}
	}
	s.startShm()
	s.startGPU()
	s.startCoordination()
	if err := s.m.registerPeersReady(reg, s.peersReady); err != nil {
		s.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	// Last: discovery's peers use the coordinators' environment.
	if t, _ := parsePeers(s.cfg.Peers); t.static != nil || t.host != "" {
		s.disc = s.startDiscovery(t)
	}
	return s, nil
}

// newServer is the Server of cfg (validated, its defaults filled in) with
// its metrics registered on reg and its memory budget divided: what the
// coefficient and partner caches and the remote stores' byte cache and read-ahead take
// is set apart, and batches have three quarters of the rest.
func newServer(cfg Config, log *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.coefCache > cfg.MemoryBudget/2 {
		return nil, fmt.Errorf("coef budget %d is more than half of the memory budget %d: the coefficient cache is taken out of --memory-budget, and batches need the rest", cfg.coefCache, cfg.MemoryBudget)
	}
	if err := checkRemoteMemory(cfg); err != nil {
		return nil, err
	}
	byteCache, readAhead := remoteMemory(cfg)
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		log:      log,
		m:        m,
		datasets: make(map[string]dataset.Dataset, len(cfg.Datasets)),
		names:    slices.Sorted(maps.Keys(cfg.Datasets)),
		draining: make(chan struct{}),
		budget:   limits.NewBudget((cfg.MemoryBudget - cfg.coefCache - cfg.partnerCache - byteCache - readAhead) / 4 * 3),
		gpuIdle:  func() (float64, bool) { return 0, false },
	}
	s.scratch = &scratchAccount{b: s.budget}
	s.refusals.log, s.refusals.m = log, m.refusals
	s.workMem = newWorkClients(s.budget, workMemoryPerClient(cfg.MaxWorkMemoryPerClient, s.budget.Limit()), &s.refusals, m.workMemory)
	return s, nil
}

// dialing loads the server's tokens, how it dials its peers and the
// remote stores' reads (their metrics registered on reg).
func (s *Server) dialing(reg prometheus.Registerer) error {
	if err := s.ReloadTokens(); err != nil {
		return err
	}
	var err error
	if s.peerDial, err = peerDialer(s.cfg); err != nil {
		return err
	}
	if s.remote, err = newRemoteReads(s.cfg, s.log); err != nil {
		return err
	}
	if err := reg.Register(newRemoteCollector(s.remote)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// startExecutor starts the executor of cfg.Workers decode goroutines
// (with its decoder index and coefficient cache), the stall schedule
// that shares it, and the local maker on it.
func (s *Server) startExecutor(reg prometheus.Registerer) error {
	cfg := s.cfg
	var opts []pipeline.Option
	if cfg.PixelBudget > 0 {
		opts = append(opts, pipeline.WithPixelBudget(cfg.PixelBudget))
	}
	if cfg.MaxScans > 0 {
		opts = append(opts, pipeline.WithMaxScans(cfg.MaxScans))
	}
	sched := pipeline.ScheduleWeighted
	if cfg.Schedule != "" {
		sched, _ = pipeline.ParseSchedule(cfg.Schedule)
	}
	var err error
	if s.index, err = openIndex(cfg, s.datasets, s.log, reg); err != nil {
		return err
	}
	if s.index != nil {
		opts = append(opts, pipeline.WithIndex(s.index.ix))
	}
	if cfg.coefCache > 0 {
		s.coefs = codec.NewCoefCache(cfg.coefCache)
		if err := registerCoefMetrics(reg, s.coefs); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		opts = append(opts, pipeline.WithCoefCache(s.coefs))
	}
	if cfg.partnerCache > 0 {
		s.partners = cv.NewPartnerCache(cfg.partnerCache)
		if err := registerPartnerMetrics(reg, s.partners); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		opts = append(opts, pipeline.WithPartnerCache(s.partners))
	}
	queued, read, decode := s.m.sampleStages.WithLabelValues("queue"), s.m.sampleStages.WithLabelValues("read"), s.m.sampleStages.WithLabelValues("decode")
	// The weighted schedule shares the cores by the CPU each job's
	// samples take (a thread clock around each sample), not by samples.
	opts = append(opts, pipeline.WithCPUClock(pipeline.ThreadCPUClock))
	opts = append(opts, pipeline.WithSchedule(sched), pipeline.WithStageObserver(func(q, r, d time.Duration) {
		queued.Observe(q.Seconds())
		read.Observe(r.Seconds())
		decode.Observe(d.Seconds())
	}))
	opts = append(opts, pipeline.WithScratchBudget(s.scratch, scratchWait))
	s.exec = pipeline.NewExecutor(cfg.Workers, opts...)
	exec := s.exec
	if err := registerAll(reg, scratchMetrics(s.budget, s.scratch)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := registerAll(reg, []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_samples_abandoned_total",
			Help: "Samples told to stop while a worker was making them: their batch's lease was cancelled or timed out, its stream ended, or its job closed."},
			func() float64 { told, _ := exec.Abandoned(); return float64(told) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "stoker_samples_abandoned_returned_total",
			Help: "Of stoker_samples_abandoned_total, those whose worker came back from them: the two are equal when no core works on for a batch no one waits for."},
			func() float64 { _, back := exec.Abandoned(); return float64(back) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "stoker_samples_running",
			Help: "Samples the executor's workers are making now."},
			func() float64 { return float64(exec.Running()) }),
	}); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	s.stop = make(chan struct{})
	if sched == pipeline.ScheduleWeighted {
		floor := cfg.ShareFloor
		if floor == 0 {
			floor = -1 // StallShares: 1/(2·jobs)
		}
		s.shares = makers.NewShares(floor, cfg.StallTarget, cfg.WorkShare, s.m.executorSamples)
		go s.shares.Run(s.stop)
	}
	s.makers.Add(makers.NewLocal(s.exec, s.shares, cfg.Making, maxWindow))
	return nil
}

// startShm opens shared-memory delivery when cfg.Shm asks for it; when it
// is off, shmOff says why.
func (s *Server) startShm() {
	s.shmOff = "--shm=false"
	if s.cfg.Shm {
		var err error
		if s.shm, err = shm.NewHub(s.log, s.refusals.refuse); err != nil {
			s.shmOff = err.Error()
			s.log.Info("shared-memory delivery off", "reason", err)
		}
	}
}

// startGPU starts the GPU monitor cfg names, if any, and reads the GPUs'
// idle share from it.
func (s *Server) startGPU() {
	sel, _ := gpu.ParseSelection(s.cfg.GPUs)
	switch {
	case s.cfg.GPU != nil:
		s.gpu = s.cfg.GPU
	case s.cfg.GPUs != "" && !sel.None():
		s.gpu = gpu.NewMonitor(sel, coord.TelemetryWindow)
	}
	if s.gpu == nil {
		return
	}
	if smp := s.gpu.Sample(); !smp.Available {
		s.log.Info("GPU monitor unavailable: the trainer's wait alone drives the window", "reason", smp.Reason)
	}
	s.gpuIdle = func() (float64, bool) {
		smp := s.gpu.Sample()
		return smp.IdleRatio, smp.Available && smp.IdleRatio >= 0
	}
}

// startCoordination makes what the server's coordinators share (their
// configuration, makers, metrics and the verifier) and, on a server that
// decodes, the worker that serves Work streams.
func (s *Server) startCoordination() {
	cfg := s.cfg
	s.verify = makers.NewVerifier(max(cfg.VerifyFraction, 0), s.exec, s.log, s.makers.Poke)
	s.coord = &coord.Env{
		Config: coord.Config{
			Window: cfg.Window, LeaseTimeout: cfg.LeaseTimeout, StallTarget: cfg.StallTarget,
			AdviseWindow: cfg.AdviseWindow, MaxRecommended: cfg.MaxWorkersRecommended,
			Affinity: !cfg.NoCacheAffinity,
		},
		Makers: s.makers, Metrics: s.m.coord, GPUIdle: s.gpuIdle, Verifier: s.verify,
	}
	if s.exec != nil {
		s.coord.Config.Workers = s.exec.Workers()
		s.worker = s.newWorker()
	}
}

// MemoryBudget is the server's memory budget, its default resolved.
func (s *Server) MemoryBudget() int64 { return s.cfg.MemoryBudget }

// GoMemoryLimit is what of the memory budget is Go's: all of it but the
// coefficient cache's, which is C memory.
func (s *Server) GoMemoryLimit() int64 { return s.cfg.MemoryBudget - s.cfg.coefCache }

// Stopping marks the server as cutting its streams at the end of a grace
// period, so that their logs say so.
func (s *Server) Stopping() { s.stopping.Store(true) }

// Drain starts a worker's shutdown: its Work streams answer new leases
// with UNAVAILABLE (coordinators lease them elsewhere and stop asking),
// finish the leases they have in flight, send the batches, and end; new
// Work streams are refused. Feed streams are not affected: they keep the
// grace period of the gRPC server's GracefulStop. Safe to call again.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

func (s *Server) isDraining() bool {
	select {
	case <-s.draining:
		return true
	default:
		return false
	}
}

// Close stops discovery, the peers and the executor, and closes the
// datasets. Call it after the gRPC server has stopped: streams still
// running would fail.
func (s *Server) Close() error {
	s.jobs.Wait() // a stream cut by a timeout may still be winding down
	if s.shm != nil {
		s.shm.Close()
	}
	if s.disc != nil {
		s.disc.close()
	}
	if s.gpu != nil {
		s.gpu.Close()
	}
	s.verify.Close()
	if s.exec != nil {
		close(s.stop)
		s.exec.Close()
		s.index.save()
		if s.coefs != nil {
			s.coefs.Close()
		}
	}
	return s.closeDatasets()
}

func (s *Server) closeDatasets() error {
	s.remote.close() // the read-ahead stops before the datasets close their stores
	var errs []error
	for _, ds := range s.datasets {
		errs = append(errs, ds.Close())
	}
	return errors.Join(errs...)
}

// ListDatasets implements stokerv1.FeedServiceServer.
func (s *Server) ListDatasets(context.Context, *stokerv1.ListDatasetsRequest) (*stokerv1.ListDatasetsResponse, error) {
	resp := &stokerv1.ListDatasetsResponse{}
	for _, name := range s.names {
		ds := s.datasets[name]
		resp.Datasets = append(resp.Datasets, &stokerv1.DatasetInfo{
			Name:        name,
			Size:        uint64(ds.Len()),
			Classes:     ds.Classes(),
			Fingerprint: ds.Fingerprint(),
			Format:      job.Format(ds),
			Fields:      job.FieldNames(ds),
			CategoryIds: categoryIDs(ds),
		})
	}
	return resp, nil
}

// categoryIDs is a COCO dataset's categories' ids in its classes' order
// (DatasetInfo.category_ids), nil for another.
func categoryIDs(ds dataset.Dataset) []int64 {
	c, ok := ds.(interface{ Annotations() *annot.COCO })
	if !ok || c.Annotations() == nil {
		return nil
	}
	var ids []int64
	for _, ct := range c.Annotations().Categories() {
		ids = append(ids, ct.ID)
	}
	return ids
}

// newJob validates spec against the server's datasets and limits
// (job.New), its errors statuses by the server's error table.
func (s *Server) newJob(spec *stokerv1.JobSpec, o job.Origin) (*job.Job, error) {
	j, err := job.New(spec, job.Env{Datasets: s.datasets, Names: s.names, MaxBatchBytes: s.cfg.MaxBatchBytes, MaxSampleCPU: s.cfg.MaxSampleCPU, MaxMeasuredCPU: s.cfg.MaxMeasuredCPU, MaxCPUWeight: s.cfg.MaxCPUWeight, Decode: s.cfg.decode}, o)
	if err != nil {
		return nil, toStatus(err)
	}
	return j, nil
}

// Plan and PlanSpec are the epoch plan's (server/internal/plan), for the
// tests and tools outside server that check a stream against its plan.
type (
	Plan     = plan.Plan
	PlanSpec = plan.Spec
)

// NewPlan is plan.New: the plan of s.
func NewPlan(s PlanSpec) Plan { return plan.New(s) }

// acquireStream counts a stream against its service's limits: a Feed
// stream (feed) against MaxStreams and MaxStreamsPerClient, a Work stream
// against MaxWorkStreams and MaxWorkStreamsPerClient. A client is
// rpc.LimitID: the subject of its verified certificate, else its host
// (not its connection, which a client multiplies at will). The returned
// function releases it.
func (s *Server) acquireStream(ctx context.Context, feed bool) (release func(), err error) {
	c, limit, perClient := &s.workStreams, s.cfg.MaxWorkStreams, s.cfg.MaxWorkStreamsPerClient
	what, flag, flagPer, policy := "Work", "--max-work-streams", "--max-work-streams-per-client", "max_work_streams"
	if feed {
		c, limit, perClient = &s.feedStreams, s.cfg.MaxStreams, s.cfg.MaxStreamsPerClient
		what, flag, flagPer, policy = "Feed", "--max-streams", "--max-streams-per-client", "max_streams"
	}
	client := rpc.LimitID(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n >= limit {
		s.refusals.refuse(policy, "stream refused: server stream limit", "client", client, "service", what, "limit", limit)
		return nil, status.Errorf(codes.ResourceExhausted, "the server has %d open %s streams, the limit is %d (%s)", c.n, what, limit, flag)
	}
	if n := c.perClient[client]; n >= perClient {
		s.refusals.refuse(policy+"_per_client", "stream refused: per-client stream limit", "client", client, "service", what, "limit", perClient)
		return nil, status.Errorf(codes.ResourceExhausted, "client %s has %d open %s streams, the limit is %d per client (%s; a client is its certificate's subject over mutual TLS, else its host)",
			client, n, what, perClient, flagPer)
	}
	if c.perClient == nil {
		c.perClient = make(map[string]int)
	}
	c.n++
	c.perClient[client]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n--
		if c.perClient[client]--; c.perClient[client] <= 0 {
			delete(c.perClient, client)
		}
	}, nil
}
