package work

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// maxWorkJobs bounds the jobs alive at once on one Work stream: a bound
// on a hostile coordinator, never reached by one that ends its jobs.
const maxWorkJobs = 4096

// DefaultJobIdle is how long a job may go without a lease before the worker
// ends it. Coordinators end their jobs (JobEnd), and a coordinator that
// vanished takes its stream and every job on it along (keepalive); this
// catches a job whose coordinator is there but never ends it (one older
// than JobEnd). A minute: a job that leases at all leases every few
// seconds, and one whose trainer paused longer (a validation pass, a
// checkpoint) pays one round trip to register again; a dead job stops
// holding a queue and a share of the cores (the stall schedule's floor is
// split among all jobs) within a minute.
const DefaultJobIdle = time.Minute

// MaxLeases is how many leases a Work stream may have in flight on a
// server with the given executor size: enough to keep the executor busy
// while finished batches are sent, few enough to bound the buffers.
func MaxLeases(executors int) int { return min(max(2, 2*executors), 16) }

// errDrained ends a Work stream whose server drains, once every lease it
// took was answered.
var errDrained = errors.New("drained")

// Host is what a worker needs of the server it runs in.
type Host interface {
	// Open validates a job the coordinator at client (its host)
	// registered and makes its queue on the executor, named name. Its
	// error, a status, is the answer to every lease of the job.
	Open(spec *stokerv1.JobSpec, name, client string) (JobQueue, error)
	// Refuse counts and logs (rate-limited) a refusal by the policy that
	// made it.
	Refuse(policy, msg string, attrs ...any)
	// Status is the status error a lease's failure is sent as.
	Status(err error) error
}

// JobQueue is one registered job's queue on the worker's executor.
type JobQueue interface {
	// Fill makes lease l's batch into b, reusing b's buffers; the lease's
	// demand weighs the queue from now on.
	Fill(ctx context.Context, l *lease.Lease, b *pipeline.Batch) error
	// Header is the BatchHeader of batch k of epoch, as made into b (its
	// targets packed into b.Packed).
	Header(epoch uint64, k int, b *pipeline.Batch) (*stokerv1.BatchHeader, error)
	// BatchSize is the job's batch size: a lease names at most that many
	// samples.
	BatchSize() int
	// SampleBytes is what one sample of a lease may hold (its pixels,
	// and its fields at their bound): what the stream's Memory is charged
	// for each sample of a lease in flight.
	SampleBytes() int
	// StateBytes is the memory the job holds while it lives, whether or
	// not a lease of it is being made (its spec as kept, its queue, its
	// place in the stall schedule): what the stream's Memory is charged
	// for it.
	StateBytes() int64
	// Close drops the queue: what it still has queued fails at once. It
	// may wait for the samples being made.
	Close()
}

// Memory is what one Work stream's state comes out of: its client's share
// of the server's memory budget. Everything the client makes the worker
// keep is charged to it while it is kept: each job's state, each lease's
// batch, the batch buffers kept for reuse.
type Memory interface {
	// Take takes n bytes for what (as a refusal names it). When they do
	// not fit, in the client's share or in the server's budget, it takes
	// nothing and returns a RESOURCE_EXHAUSTED status that says what did
	// not fit, how much, and the limit it met.
	Take(n int64, what string) error
	// Release gives n bytes back.
	Release(n int64)
}

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	Host    Host
	Metrics *WorkerMetrics
	Log     *slog.Logger
	// Executors is the executor's goroutine count (--workers): said in
	// WorkerInfo, and what a stream's lease limit is sized by.
	Executors int
	// Identity is the decoder identity said in WorkerInfo.
	Identity pipeline.Identity
	// MaxChunkBytes bounds the chunks a batch is sent in.
	MaxChunkBytes int
	// FirstMessageTimeout bounds the wait for a stream's first request,
	// IdleTimeout a stream's silence while no lease is pending, JobIdle a
	// job's time without a lease.
	FirstMessageTimeout, IdleTimeout, JobIdle time.Duration
	// Draining is closed when the server drains.
	Draining <-chan struct{}
}

// Worker is the worker's side of the Work protocol: it serves Work
// streams, making their leases on its server's executor.
type Worker struct {
	cfg WorkerConfig
}

// NewWorker returns a Worker configured by cfg.
func NewWorker(cfg WorkerConfig) *Worker { return &Worker{cfg: cfg} }

// Serve serves one Work stream, named name (its jobs' queues are named
// after it): a coordinator's stream of leases, each made on the executor
// and sent back as a LeaseDone header and chunks. A worker keeps, per
// stream, only the jobs registered on it, until the coordinator ends them
// (JobEnd), no lease names them for a while, or the stream ends. Their
// state, the leases' batches and the buffers kept for reuse are charged to
// mem while they are kept (and all given back when the stream ends): a
// lease that does not fit is refused with RESOURCE_EXHAUSTED, and a job
// whose state does not fit ends the stream with it. Its first request must
// come within FirstMessageTimeout, and it may not be silent for longer
// than IdleTimeout while no lease is pending. When the server drains, the
// stream answers new leases with UNAVAILABLE, finishes those in flight,
// and ends cleanly. The caller bounds how many streams are served at
// once.
func (wk *Worker) Serve(stream stokerv1.WorkService_WorkServer, name string, mem Memory) error {
	cfg := &wk.cfg
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	w := &workStream{
		cfg: cfg, stream: stream, mem: mem, jobs: make(map[uint64]*workJob), cancels: make(map[uint64]context.CancelFunc),
		name:   name,
		client: rpc.ClientHost(ctx),
		slots:  make(chan *slot, MaxLeases(cfg.Executors)),
		out:    make(chan workOut, MaxLeases(cfg.Executors)),
		idle:   make(chan struct{}, 1),
	}
	w.all = make([]*slot, cap(w.slots))
	for i := range w.all {
		w.all[i] = new(slot)
		w.slots <- w.all[i]
	}
	if err := stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Worker{Worker: &stokerv1.WorkerInfo{
		Workers: uint32(cfg.Executors), MaxLeases: uint32(cap(w.slots)), MaxChunkBytes: uint32(cfg.MaxChunkBytes),
		Decoder: IdentityProto(cfg.Identity), IdleTimeoutMs: uint32(cfg.IdleTimeout.Milliseconds()),
	}}}); err != nil {
		return err
	}
	log := cfg.Log.With("coordinator", w.client)
	log.Info("work stream open")
	sendErr := make(chan error, 1)
	go func() { sendErr <- w.sendLoop(cancel) }()
	// Recv blocks on a goroutine of its own, so that a drain or a timeout
	// can end the stream while no request comes (etcd's watch server does
	// the same); it returns once the handler has.
	recvErr := make(chan error, 1)
	go func() { recvErr <- w.receive(ctx) }()
	err := w.wait(log, recvErr)
	cancel()
	for id := range w.jobs {
		if q := w.endJob(id); q != nil {
			q.Close() // queued samples dropped at once
		}
	}
	w.wg.Wait()
	close(w.out)
	if serr := <-sendErr; err == nil || errors.Is(err, errDrained) && serr != nil {
		err = serr
	}
	w.releaseSlots()
	if errors.Is(err, errDrained) {
		log.Info("work stream drained", "finished", w.done.Load()-w.doneAtDrain, "turned_away", w.turnedAway.Load())
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		log.Info("work stream close")
		return nil
	}
	log.Warn("work stream close", "err", err)
	return cfg.Host.Status(err)
}

// workStream is one Work stream at work.
type workStream struct {
	cfg    *WorkerConfig
	stream stokerv1.WorkService_WorkServer
	mem    Memory
	wg     sync.WaitGroup
	slots  chan *slot // a lease in flight holds one
	all    []*slot    // every slot, wherever it is
	out    chan workOut

	name   string // the stream's, for its jobs' queues
	client string // the coordinator's host

	failing atomic.Int64 // refusals not yet handed to the send loop

	// pending counts the leases taken and not yet answered (or cancelled);
	// idle is poked when it drops to 0.
	pending atomic.Int64
	idle    chan struct{}
	// done counts the batches sent, turnedAway the leases refused for the
	// drain; doneAtDrain is done when the drain began.
	done, turnedAway atomic.Int64
	doneAtDrain      int64

	// lastRecv is when the last request came (Unix ns), 0 before the
	// first.
	lastRecv atomic.Int64

	// recvMu is held while receive handles a request: the handler takes it
	// to start the drain, to end idle jobs, and to end the stream (ended)
	// so that receive touches nothing more.
	recvMu   sync.Mutex
	draining bool
	ended    bool

	// Guarded by recvMu.
	jobs map[uint64]*workJob
	// byLast lists jobs, the one a lease named longest ago first.
	byLast jobList
	// lastJob is the largest job id registered: ids increase, so a lease
	// naming a smaller one that is not in jobs names a job that ended.
	lastJob uint64
	// leases counts the leases taken; slotsFreedAt is its value when the
	// kept buffers were last checked for idleness (freeIdleSlots).
	leases, slotsFreedAt uint64

	mu      sync.Mutex // guards cancels: the lease goroutines delete theirs
	cancels map[uint64]context.CancelFunc
}

type workJob struct {
	id  uint64
	q   JobQueue // nil when refused
	err error    // why the job is refused
	// bytes is what the job's state is charged to the stream's Memory.
	bytes int64
	// last is when a lease last named the job, and prev and next its
	// neighbours in byLast (guarded by recvMu); leasing counts its leases
	// being made.
	last       time.Time
	prev, next *workJob
	leasing    atomic.Int64
}

// workOut is a finished lease for the send loop.
type workOut struct {
	lease uint64
	// progress: a LeaseProgress, not an answer (Lease.progress_ms).
	progress bool
	epoch    uint64
	k        int
	q        JobQueue
	s        *slot // nil when failed
	err      error
}

// wait returns when the stream is to end: with receive's error when the
// coordinator ends (or breaks) it, with errDrained when the server drains
// and every lease taken has been answered, with DEADLINE_EXCEEDED when the
// first request does not come in time or the stream idles too long. On
// its way it ends the jobs no lease named for JobIdle.
func (w *workStream) wait(log *slog.Logger, recvErr <-chan error) error {
	cfg := w.cfg
	drain := cfg.Draining
	opened := time.Now()
	tick := time.NewTicker(max(min(cfg.FirstMessageTimeout, cfg.IdleTimeout, cfg.JobIdle, 4*time.Second)/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-recvErr:
			return err
		case <-w.stream.Context().Done(): // cut from outside: its token revoked (streamAuth)
			w.end(true) // receive may be handling a request: it touches nothing more
			return context.Cause(w.stream.Context())
		case <-drain:
			drain = nil
			w.recvMu.Lock()
			w.draining = true
			w.doneAtDrain = w.done.Load()
			w.recvMu.Unlock()
			log.Info("work stream draining", "in_flight", w.pending.Load())
		case <-w.idle:
		case now := <-tick.C:
			if err := w.timedOut(now, opened); err != nil {
				return err
			}
			w.endIdleJobs(now, log)
			w.freeIdleSlots()
		}
		if drain == nil && w.end(false) {
			return errDrained
		}
	}
}

// timedOut ends the stream (and returns why) when its first request is
// late, or when it sent nothing for WorkIdleTimeout while no lease was
// pending.
func (w *workStream) timedOut(now, opened time.Time) error {
	cfg := w.cfg
	host := rpc.ClientHost(w.stream.Context())
	last := w.lastRecv.Load()
	if last == 0 {
		if now.Sub(opened) < cfg.FirstMessageTimeout || !w.end(true) {
			return nil
		}
		cfg.Host.Refuse("work_first_message_timeout", "Work stream closed: no first request in time", "coordinator", host, "timeout", cfg.FirstMessageTimeout)
		return status.Errorf(codes.DeadlineExceeded, "no first request within %v (--first-message-timeout)", cfg.FirstMessageTimeout)
	}
	if w.pending.Load() > 0 || now.Sub(time.Unix(0, last)) < cfg.IdleTimeout || !w.end(false) {
		return nil
	}
	cfg.Host.Refuse("work_idle_timeout", "Work stream closed: idle", "coordinator", host, "timeout", cfg.IdleTimeout)
	return status.Errorf(codes.DeadlineExceeded, "no request for %v while no lease was pending (--work-idle-timeout)", cfg.IdleTimeout)
}

// endIdleJobs ends the jobs no lease named for JobIdle and that have none
// being made (one that has is counted as named now). It looks at the jobs
// a lease named longest ago only, so an idle stream of many jobs costs
// nothing until they are due. Their queues are closed once recvMu is let
// go: a close waits for the samples being made, and receive must not.
func (w *workStream) endIdleJobs(now time.Time, log *slog.Logger) {
	var ended []JobQueue
	w.recvMu.Lock()
	for n := len(w.jobs); n > 0 && !w.ended; n-- {
		wj := w.byLast.head
		if wj == nil || now.Sub(wj.last) < w.cfg.JobIdle {
			break
		}
		if wj.leasing.Load() > 0 {
			w.byLast.touch(wj, now)
			continue
		}
		log.Info("work job ended: no lease", "job", wj.id, "for", w.cfg.JobIdle)
		if q := w.endJob(wj.id); q != nil {
			ended = append(ended, q)
		}
	}
	w.recvMu.Unlock()
	for _, q := range ended {
		q.Close()
	}
}

// end marks the stream ended if no lease is pending (or even if one is,
// with force): receive then handles no more requests.
func (w *workStream) end(force bool) bool {
	w.recvMu.Lock()
	defer w.recvMu.Unlock()
	if !force && w.pending.Load() > 0 {
		return false
	}
	w.ended = true
	return true
}

// endJob drops job id's state and returns its queue, for the caller to
// close (what it has queued then fails at once, and it leaves the stall
// schedule) once it has let go of recvMu; nil when the job was refused
// or is not there. Called with recvMu held, or once the stream has
// ended.
func (w *workStream) endJob(id uint64) JobQueue {
	wj := w.jobs[id]
	if wj == nil {
		return nil
	}
	delete(w.jobs, id)
	w.byLast.remove(wj)
	w.mem.Release(wj.bytes)
	w.cfg.Metrics.Jobs.Dec()
	return wj.q
}

// answered counts a lease as no longer pending.
func (w *workStream) answered() {
	if w.pending.Add(-1) == 0 {
		select {
		case w.idle <- struct{}{}:
		default:
		}
	}
}
