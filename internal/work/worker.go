package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/peer"
	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// maxWorkJobs bounds the jobs alive at once on one Work stream: a bound
// on a hostile coordinator, never reached by one that ends its jobs.
const maxWorkJobs = 4096

// workJobIdle is how long a job may go without a lease before the worker
// ends it. Coordinators end their jobs (JobEnd), and a coordinator that
// vanished takes its stream and every job on it along (keepalive); this
// catches a job whose coordinator is there but never ends it (one older
// than JobEnd). A minute: a job that leases at all leases every few
// seconds, and one whose trainer paused longer (a validation pass, a
// checkpoint) pays one round trip to register again; a dead job stops
// holding a queue and a share of the cores (the stall schedule's floor is
// split among all jobs) within a minute.
const workJobIdle = time.Minute

// workMaxLeases is how many leases a Work stream may have in flight on a
// server with the given executor size: enough to keep the executor busy
// while finished batches are sent, few enough to bound the buffers.
func workMaxLeases(workers int) int { return min(max(2, 2*workers), 16) }

// errDrained ends a Work stream whose server drains, once every lease it
// took was answered.
var errDrained = errors.New("drained")

// Work implements stokerv1.WorkServiceServer: a coordinator's stream of
// leases, each made on the local executor and sent back as a LeaseDone
// header and chunks. A worker keeps, per stream, only the jobs registered
// on it, until the coordinator ends them (JobEnd), no lease names them for
// a while, or the stream ends. The stream is bounded like a Feed stream,
// apart from them: a per-client and a total cap, its first request within
// FirstMessageTimeout, and no silence longer than WorkIdleTimeout while no
// lease is pending. When the server drains (Drain), the stream answers new
// leases with UNAVAILABLE, finishes those in flight, and ends cleanly.
func (s *Server) Work(stream stokerv1.WorkService_WorkServer) error {
	switch {
	case s.exec == nil:
		return status.Error(codes.FailedPrecondition, "this server makes no batches (--workers 0): it only coordinates")
	case !s.cfg.acceptsWork():
		s.refusals.refuse("accept_work", "Work stream refused: --accept-work=false", "client", clientHost(stream.Context()))
		return status.Error(codes.FailedPrecondition, "this server makes no batches for other servers (--accept-work=false, the default for a server with --peers)")
	case s.isDraining():
		return status.Error(codes.Unavailable, errDrainingMsg)
	}
	release, aerr := s.acquireStream(stream.Context(), false)
	if aerr != nil {
		return aerr
	}
	defer release()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	w := &worker{
		s: s, stream: stream, jobs: make(map[uint64]*workJob), cancels: make(map[uint64]context.CancelFunc),
		name:  "work-" + strconv.FormatUint(s.streamID.Add(1), 10),
		slots: make(chan *pipeline.Batch, workMaxLeases(s.exec.Workers())),
		out:   make(chan workOut, workMaxLeases(s.exec.Workers())),
		idle:  make(chan struct{}, 1),
	}
	for range cap(w.slots) {
		w.slots <- new(pipeline.Batch)
	}
	if err := stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Worker{Worker: &stokerv1.WorkerInfo{
		Workers: uint32(s.exec.Workers()), MaxLeases: uint32(cap(w.slots)), MaxChunkBytes: MaxChunkBytes,
		Decoder: peer.IdentityProto(s.cfg.decoderIdentity()), IdleTimeoutMs: uint32(s.cfg.WorkIdleTimeout.Milliseconds()),
	}}}); err != nil {
		return err
	}
	log := s.log.With("coordinator", clientHost(ctx))
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
		w.endJob(id) // queued samples dropped at once
	}
	w.wg.Wait()
	close(w.out)
	if serr := <-sendErr; err == nil || errors.Is(err, errDrained) && serr != nil {
		err = serr
	}
	if errors.Is(err, errDrained) {
		log.Info("work stream drained", "finished", w.done.Load()-w.doneAtDrain, "turned_away", w.turnedAway.Load())
		return nil
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		log.Info("work stream close")
		return nil
	}
	log.Warn("work stream close", "err", err)
	return toStatus(err)
}

// worker is one Work stream at work.
type worker struct {
	s      *Server
	stream stokerv1.WorkService_WorkServer
	wg     sync.WaitGroup
	slots  chan *pipeline.Batch // a lease in flight holds one
	out    chan workOut

	name string // the stream's, for its jobs' queues

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
	// lastJob is the largest job id registered: ids increase, so a lease
	// naming a smaller one that is not in jobs names a job that ended.
	lastJob uint64

	mu      sync.Mutex // guards cancels: the lease goroutines delete theirs
	cancels map[uint64]context.CancelFunc
}

type workJob struct {
	j    *job
	err  error    // why the job is refused
	exec *execJob // its queue on the executor; nil when refused
	// last is when a lease last named the job (guarded by recvMu);
	// leasing counts its leases being made.
	last    time.Time
	leasing atomic.Int64
}

// workOut is a finished lease for the send loop.
type workOut struct {
	lease uint64
	epoch uint64
	k     int
	j     *job
	b     *pipeline.Batch // nil when failed
	bytes int64           // of the memory budget, held until b is sent
	err   error
}

// wait returns when the stream is to end: with receive's error when the
// coordinator ends (or breaks) it, with errDrained when the server drains
// and every lease taken has been answered, with DEADLINE_EXCEEDED when the
// first request does not come in time or the stream idles too long. On
// its way it ends the jobs no lease named for workJobIdle.
func (w *worker) wait(log *slog.Logger, recvErr <-chan error) error {
	cfg := &w.s.cfg
	drain := w.s.draining
	opened := time.Now()
	tick := time.NewTicker(max(min(cfg.FirstMessageTimeout, cfg.WorkIdleTimeout, cfg.workJobIdle, 4*time.Second)/4, time.Millisecond))
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
		}
		if drain == nil && w.end(false) {
			return errDrained
		}
	}
}

// timedOut ends the stream (and returns why) when its first request is
// late, or when it sent nothing for WorkIdleTimeout while no lease was
// pending.
func (w *worker) timedOut(now, opened time.Time) error {
	cfg := &w.s.cfg
	host := clientHost(w.stream.Context())
	last := w.lastRecv.Load()
	if last == 0 {
		if now.Sub(opened) < cfg.FirstMessageTimeout || !w.end(true) {
			return nil
		}
		w.s.refusals.refuse("work_first_message_timeout", "Work stream closed: no first request in time", "coordinator", host, "timeout", cfg.FirstMessageTimeout)
		return status.Errorf(codes.DeadlineExceeded, "no first request within %v (--first-message-timeout)", cfg.FirstMessageTimeout)
	}
	if w.pending.Load() > 0 || now.Sub(time.Unix(0, last)) < cfg.WorkIdleTimeout || !w.end(false) {
		return nil
	}
	w.s.refusals.refuse("work_idle_timeout", "Work stream closed: idle", "coordinator", host, "timeout", cfg.WorkIdleTimeout)
	return status.Errorf(codes.DeadlineExceeded, "no request for %v while no lease was pending (--work-idle-timeout)", cfg.WorkIdleTimeout)
}

// endIdleJobs ends the jobs no lease named for workJobIdle and that have
// none being made.
func (w *worker) endIdleJobs(now time.Time, log *slog.Logger) {
	w.recvMu.Lock()
	defer w.recvMu.Unlock()
	if w.ended {
		return
	}
	for id, wj := range w.jobs {
		if wj.leasing.Load() == 0 && now.Sub(wj.last) >= w.s.cfg.workJobIdle {
			log.Info("work job ended: no lease", "job", id, "for", w.s.cfg.workJobIdle)
			w.endJob(id)
		}
	}
}

// end marks the stream ended if no lease is pending (or even if one is,
// with force): receive then handles no more requests.
func (w *worker) end(force bool) bool {
	w.recvMu.Lock()
	defer w.recvMu.Unlock()
	if !force && w.pending.Load() > 0 {
		return false
	}
	w.ended = true
	return true
}

// endJob drops job id's state: its queue closes (what it has queued fails
// at once) and leaves the stall schedule. Called with recvMu held, or once
// the stream has ended.
func (w *worker) endJob(id uint64) {
	wj := w.jobs[id]
	if wj == nil {
		return
	}
	delete(w.jobs, id)
	if wj.exec != nil {
		wj.exec.close()
	}
	w.s.m.workJobs.Dec()
}

// answered counts a lease as no longer pending.
func (w *worker) answered() {
	if w.pending.Add(-1) == 0 {
		select {
		case w.idle <- struct{}{}:
		default:
		}
	}
}

// receive reads the coordinator's requests until the stream ends.
func (w *worker) receive(ctx context.Context) error {
	for {
		req, err := w.stream.Recv()
		if err != nil {
			return err
		}
		w.lastRecv.Store(time.Now().UnixNano())
		w.recvMu.Lock()
		if w.ended {
			w.recvMu.Unlock()
			return errDrained
		}
		err = w.handle(ctx, req)
		w.recvMu.Unlock()
		if err != nil {
			return err
		}
	}
}

// handle handles one request, with recvMu held.
func (w *worker) handle(ctx context.Context, req *stokerv1.WorkRequest) error {
	switch m := req.GetMsg().(type) {
	case *stokerv1.WorkRequest_Job:
		id := m.Job.GetId()
		switch {
		case id <= w.lastJob:
			return status.Errorf(codes.InvalidArgument, "job %d: registered after job %d (job ids increase on a stream)", id, w.lastJob)
		case len(w.jobs) >= maxWorkJobs:
			return status.Errorf(codes.InvalidArgument, "job %d: more than %d jobs alive on one Work stream (end jobs with JobEnd)", id, maxWorkJobs)
		}
		w.lastJob = id
		j, err := w.s.newJob(m.Job.GetSpec())
		wj := &workJob{j: j, err: err, last: time.Now()}
		if err != nil {
			w.s.log.Warn("work job refused", "job", id, "err", err)
		} else {
			j.id = w.name + "/" + strconv.FormatUint(id, 10)
			wj.exec = openExecJob(w.s.exec, w.s.shares, j.id)
		}
		w.jobs[id] = wj
		w.s.m.workJobs.Inc()
	case *stokerv1.WorkRequest_Lease:
		if err := w.lease(ctx, m.Lease); err != nil {
			return err
		}
	case *stokerv1.WorkRequest_Cancel:
		w.mu.Lock()
		if c := w.cancels[m.Cancel.GetId()]; c != nil {
			c()
		}
		w.mu.Unlock()
	case *stokerv1.WorkRequest_End:
		if id := m.End.GetId(); id > w.lastJob {
			return status.Errorf(codes.InvalidArgument, "JobEnd names job %d, which was not registered", id)
		}
		w.endJob(m.End.GetId()) // ended already (no lease for a while): nothing to do
	case *stokerv1.WorkRequest_Ping:
	default:
		return status.Errorf(codes.InvalidArgument, "unexpected %T on a Work stream", m)
	}
	return nil
}

// lease starts making one leased batch, or answers it with LeaseFailed.
// Only a coordinator that breaks the protocol gets an error (the stream
// ends).
func (w *worker) lease(ctx context.Context, l *stokerv1.Lease) error {
	if n := w.failing.Load(); n >= maxFailing {
		return status.Errorf(codes.ResourceExhausted, "%d refused leases not yet read: the coordinator does not read its answers", n)
	}
	wj, ok := w.jobs[l.GetJob()]
	switch {
	case !ok && l.GetJob() > w.lastJob:
		return status.Errorf(codes.InvalidArgument, "lease %d names job %d, which was not registered", l.GetId(), l.GetJob())
	case !ok:
		w.fail(l.GetId(), status.Errorf(codes.Aborted, "lease %d names job %d, which ended here (no lease named it for %v, or JobEnd): register it again", l.GetId(), l.GetJob(), w.s.cfg.workJobIdle))
		return nil
	}
	wj.last = time.Now()
	switch {
	case w.draining:
		w.turnedAway.Add(1)
		w.fail(l.GetId(), status.Error(codes.Unavailable, errDrainingMsg))
		return nil
	case wj.err != nil:
		w.fail(l.GetId(), wj.err)
		return nil
	case len(l.GetIndices()) == 0 || len(l.GetIndices()) > int(wj.j.spec.GetBatchSize()):
		w.fail(l.GetId(), status.Errorf(codes.InvalidArgument, "lease %d has %d samples; the job's batch size is %d", l.GetId(), len(l.GetIndices()), wj.j.spec.GetBatchSize()))
		return nil
	}
	var b *pipeline.Batch
	select {
	case b = <-w.slots:
	default:
		w.fail(l.GetId(), status.Errorf(codes.ResourceExhausted, "more than %d leases in flight on one Work stream", cap(w.slots)))
		return nil
	}
	bytes := int64(len(l.GetIndices())) * int64(wj.j.t.SampleBytes())
	if !w.s.budget.try(bytes) {
		w.slots <- b
		w.s.refusals.refuse("memory_budget", "lease refused: memory budget", "coordinator", clientHost(ctx), "bytes", bytes)
		w.fail(l.GetId(), status.Errorf(codes.ResourceExhausted, "memory budget: a lease of %d bytes does not fit; %d of %d bytes in use (--memory-budget)", bytes, w.s.budget.inUse(), w.s.budget.limit))
		return nil
	}
	lctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.cancels[l.GetId()] = cancel
	w.mu.Unlock()
	wj.leasing.Add(1)
	w.pending.Add(1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer wj.leasing.Add(-1)
		j := wj.j
		err := wj.exec.fill(lctx, j, l.GetEpoch(), l.GetIndices(), pipeline.JobDemand{Stall: l.GetStall(), Work: l.GetWork()}, b)
		w.mu.Lock()
		delete(w.cancels, l.GetId())
		w.mu.Unlock()
		cancelled := lctx.Err() != nil
		cancel()
		switch {
		case cancelled:
			w.s.m.workLeases.WithLabelValues("cancelled").Inc()
			w.s.budget.release(bytes)
			w.slots <- b
			w.answered() // nothing to send
		case err != nil:
			w.s.budget.release(bytes)
			w.slots <- b
			w.out <- workOut{lease: l.GetId(), err: err}
		default: // the send loop releases the bytes once b is sent
			w.out <- workOut{lease: l.GetId(), epoch: l.GetEpoch(), k: int(l.GetNumber()), j: j, b: b, bytes: bytes}
		}
	}()
	return nil
}

// fail queues a LeaseFailed answer.
func (w *worker) fail(id uint64, err error) {
	w.failing.Add(1)
	w.pending.Add(1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.failing.Add(-1)
		w.out <- workOut{lease: id, err: err}
	}()
}

// errDrainingMsg is the answer to a lease or a Work stream on a draining
// server.
const errDrainingMsg = "this worker is draining (shutting down): it takes no new leases; lease elsewhere"

// maxFailing bounds the refusals waiting to be sent on one Work stream: a
// coordinator that sends leases it is refused and does not read the
// answers is cut off rather than allowed to pile them up.
const maxFailing = 256

// sendLoop sends finished leases until out is closed. A batch's pixels
// are lent to gRPC, not copied (rpc.OutChunk): its buffer goes back to the
// stream's slots once gRPC has let go of them, which it does before their
// last bytes leave, so before the coordinator can send the lease that
// takes the slot again. After a send error it keeps draining out
// (returning buffers) so no lease goroutine blocks.
func (w *worker) sendLoop(cancel context.CancelFunc) error {
	var sendErr error
	for o := range w.out {
		if sendErr == nil {
			sendErr = w.send(o)
			if sendErr != nil {
				cancel()
			}
		} else if o.b != nil {
			w.slots <- o.b
		}
		if o.b != nil {
			w.s.budget.release(o.bytes)
			if sendErr == nil {
				w.done.Add(1)
			}
		}
		w.answered()
	}
	return sendErr
}

// send sends a lease's answer; a batch's buffer goes back to the slots
// once gRPC lets go of its pixels.
func (w *worker) send(o workOut) error {
	m := w.s.m.workLeases
	if o.err != nil {
		m.WithLabelValues("failed").Inc()
		st := status.Convert(toStatus(o.err))
		return w.stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Failed{Failed: &stokerv1.LeaseFailed{
			Lease: o.lease, Code: uint32(st.Code()), Message: st.Message(),
		}}})
	}
	m.WithLabelValues("done").Inc()
	b := o.b
	pin := rpc.NewPin(func() { w.slots <- b }) // never blocks: the slots have room for every buffer
	defer pin.Done()
	h := o.j.header(o.epoch, o.k, b)
	if err := w.stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Done{Done: &stokerv1.LeaseDone{Lease: o.lease, Batch: h}}}); err != nil {
		return err
	}
	return sendChunks(w.stream.SendMsg, pin, o.lease, b.Data)
}
