package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/rpc"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/limits"
	"github.com/stoker-dev/stoker/server/internal/shm"
)

// Feed implements stokerv1.FeedServiceServer: it validates the job the
// first message opens and runs a coordinator for it, adapting the
// coordinator's output to the stream: JobInfo, batches as headers and
// chunks as credits allow, EpochEnd, epoch after epoch.
func (s *Server) Feed(stream stokerv1.FeedService_FeedServer) error {
	ctx := stream.Context()
	release, err := s.acquireStream(ctx, true)
	if err != nil {
		return err
	}
	defer release()
	s.m.streamsActive.Inc()
	defer s.m.streamsActive.Dec()

	req, err := s.recvWithin(ctx, stream.Recv, "first message")
	if err != nil {
		return err
	}
	o := req.GetOpen()
	if o == nil {
		return status.Errorf(codes.InvalidArgument, "the first message on a Feed stream must be OpenJob, got %T", req.GetMsg())
	}
	id := strconv.FormatUint(s.streamID.Add(1), 10)
	log := s.log.With("job", id, "dataset", job.SpecName(o.GetJob()), "client", rpc.ClientHost(ctx))
	j, err := s.newJob(o.GetJob(), job.Origin{Stream: id, EpochWorld: int(o.GetEpochWorldSize()), TokenResumes: o.GetTokenResumes(), Client: rpc.ClientID(ctx)})
	if err == nil {
		var st coord.Stream
		if st, err = streamOf(o, j); err == nil {
			return s.runJob(ctx, stream, j, st, o.GetShm(), id, log)
		}
	}
	s.refusals.refuse("invalid_job", "job refused", "job", id, "dataset", job.SpecName(o.GetJob()), "client", rpc.ClientHost(ctx), "err", err)
	return err
}

// recvWithin receives a stream's next message (its first, or its answer
// to a shared-memory offer: what) within FirstMessageTimeout. Recv cannot
// be interrupted, so it runs aside; the handler's return ends the stream,
// and with it that Recv.
func (s *Server) recvWithin(ctx context.Context, recv func() (*stokerv1.FeedRequest, error), what string) (*stokerv1.FeedRequest, error) {
	type got struct {
		m   *stokerv1.FeedRequest
		err error
	}
	c := make(chan got, 1)
	go func() {
		m, err := recv()
		c <- got{m, err}
	}()
	select {
	case g := <-c:
		if errors.Is(g.err, io.EOF) {
			return nil, status.Errorf(codes.InvalidArgument, "stream closed before its %s", what)
		}
		return g.m, toStatus(g.err)
	case <-time.After(s.cfg.FirstMessageTimeout):
		s.refusals.refuse("first_message_timeout", "stream closed: no "+what+" in time", "client", rpc.ClientHost(ctx), "timeout", s.cfg.FirstMessageTimeout)
		return nil, status.Errorf(codes.DeadlineExceeded, "no %s within %v (--first-message-timeout)", what, s.cfg.FirstMessageTimeout)
	}
}

// runJob runs job j on the stream: a coordinator that makes and orders
// its batches, a send loop that sends them (so a slow trainer's Send never
// holds up leasing, collecting or the controller), a receiver of the
// trainer's credits, and a watchdog that ends a stream whose trainer
// neither reads nor grants credits for IdleTimeout while a batch waits.
// The handler returns only once its send loop has ended, but for a Send
// stuck on a trainer that stopped reading: that one is left to end with
// the stream, and no other Send begins after the handler decided to return
// (grpc-go forbids Send after the handler returned).
func (s *Server) runJob(ctx context.Context, stream stokerv1.FeedService_FeedServer, j *job.Job, st coord.Stream, shmReq *stokerv1.ShmRequest, id string, log *slog.Logger) error {
	mem := limits.NewStreamMemory(s.budget)
	// The job needs at least two batch buffers (one being made, one being
	// sent); more come out of the budget as the window grows.
	batchBytes := j.SlotBytes(shmReq.GetTargetsInSlot())
	if err := mem.Acquire(ctx, coord.ReservedBytes(j.BatchBytes()), 2*time.Second, "a job of "+strconv.FormatInt(j.BatchBytes(), 10)+"-byte batches"); err != nil {
		s.refusals.refuse("memory_budget", "job refused: memory budget", "job", id, "err", err)
		return toStatus(err)
	}
	if err := s.checkScratch(j); err != nil {
		mem.Close()
		s.refusals.refuse("memory_budget", "job refused: memory budget", "job", id, "err", err)
		return toStatus(err)
	}
	log = log.With("rank", j.Rank(), "world_size", j.World())
	log.Info("job open", "epoch", st.Epoch, "epochs", st.Epochs, "batch_size", j.Spec().GetBatchSize(),
		"start_batch", st.Start, "skip", len(st.Skip), "consumed", st.Consumed, "transform", j.Transform().String(), "credits", st.Credits,
		"shuffle", j.Shuffle())
	for i, err := range j.TokenErrors() { // batch_tokens: left out of every batch; the first said
		log.Warn("batch_tokens: samples left out of every batch", "count", len(j.TokenErrors()), "sample", j.PlanItemName(i), "err", err)
		break
	}
	var r *shm.Ring
	if shmReq != nil {
		var err error
		if r, err = s.shmHandshake(ctx, stream, shmReq, st.Credits, batchBytes, s.coord.PoolCeiling(st.Credits), mem, log); err != nil {
			mem.Close()
			return toStatus(err)
		}
	}
	st.Memory = mem
	if r != nil {
		st.Ring = r // batches are made in its slots
	}
	c := coord.New(s.coord, j, st, j.ID(), log)
	f := &feed{s: s, j: j, c: c, stream: stream, begin: time.Now(), shm: r != nil, targetsInSlot: shmReq.GetTargetsInSlot(), errs: sampleErrors{limit: j.ErrorLimit()}}
	s.active.Store(c.Name(), c)
	defer s.active.Delete(c.Name())

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The receiver blocks in Recv, which returns once the handler has
	// returned, so it is not waited for; it touches only the coordinator's
	// credits and ring slots, and the metrics.
	go f.receive(c, cancel)
	coordDone := make(chan error, 1)
	s.jobs.Add(2)
	go func() {
		defer s.jobs.Done()
		coordDone <- c.Run(ctx)
	}()
	sendDone := make(chan error, 1)
	go func() {
		defer s.jobs.Done()
		defer mem.Close()        // once nothing holds a buffer or the ring
		defer s.dropRing(r, mem) // once nothing fills it
		sendDone <- f.sendLoop(cancel)
	}()
	idle := f.watch(ctx, c, s.cfg.IdleTimeout)
	var err error
	select {
	case err = <-coordDone:
		if err != nil {
			f.stop() // the coordinator failed: nothing more goes out
		}
		select {
		case serr := <-sendDone:
			if err == nil {
				err = serr
			}
		case err = <-idle:
			f.stop()
		}
	case err = <-idle:
		cancel(err)
		f.stop()
		if !f.stuck() {
			<-sendDone
		}
	}
	if errors.Is(err, errIdleTimeout) {
		s.refusals.refuse("idle_timeout", "job closed: idle", "job", id, "err", err)
	}
	attrs := []any{"epochs", f.epochs.Load(), "batches", f.batches.Load(), "duration", time.Since(f.begin).Round(time.Millisecond)}
	switch by := s.closedBy(stream.Context(), err); by {
	case "":
		log.Info("job close", attrs...)
	case "client (cancelled, or connection lost: keepalive)":
		// Normal for a loader that stopped iterating early or was closed.
		log.Info("job close", append(attrs, "closed_by", by)...)
	default:
		log.Warn("job close", append(attrs, "closed_by", by, "err", err)...)
	}
	return toStatus(err)
}

// closedBy names what ended a stream, for its log: "" when it ran to its
// end, "client" when the trainer went away (a cancel, or a connection
// closed: gRPC does not say whether by the client or by a keepalive that
// went unanswered), "grace_period" when the server cut it while stopping,
// "idle_timeout", or "error".
func (s *Server) closedBy(streamCtx context.Context, err error) string {
	switch {
	case err == nil:
		return ""
	case s.stopping.Load():
		return "grace_period"
	case errors.Is(err, errIdleTimeout):
		return "idle_timeout"
	case status.Code(err) == codes.Unauthenticated || errors.Is(context.Cause(streamCtx), errTokenRevoked):
		return "token_revoked"
	case streamCtx.Err() != nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled:
		return "client (cancelled, or connection lost: keepalive)"
	}
	return "error"
}

// streamOf validates the stream part of o for job j.
func streamOf(o *stokerv1.OpenJob, j *job.Job) (coord.Stream, error) {
	st := coord.Stream{
		Epoch: o.GetEpoch(), Epochs: o.GetEpochs(), Consumed: o.GetConsumed(),
		AsReady: o.GetAsReady(), Credits: int64(o.GetCredits()), Skip: o.GetSkipBatches(),
	}
	if st.Consumed > 0 {
		if err := j.CheckTokenResume(st.Epoch); err != nil {
			return st, err
		}
	}
	p := j.EpochPlan(st.Epoch, st.Consumed)
	if o.GetStartBatch() > uint64(p.Batches()) {
		return st, status.Errorf(codes.InvalidArgument, "start_batch %d is past the epoch's %d batches", o.GetStartBatch(), p.Batches())
	}
	if len(st.Skip) > p.Batches() {
		return st, status.Errorf(codes.InvalidArgument, "%d skip_batches for an epoch of %d batches", len(st.Skip), p.Batches())
	}
	st.Start = int(o.GetStartBatch())
	return st, nil
}

// feed adapts a coordinator's output to a Feed stream: its send loop
// sends the coordinator's output, its receiver reads the trainer's
// credits.
type feed struct {
	s      *Server
	j      *job.Job
	c      *coord.Coordinator
	stream stokerv1.FeedService_FeedServer
	begin  time.Time

	// Counted by the send loop, read by the handler's goroutine.
	epochs, batches atomic.Uint64
	// sendingSince is when the Send in progress began (Unix ns), 0 when
	// none is.
	sendingSince atomic.Int64
	// mu guards stopped: set, no Send begins.
	mu      sync.Mutex
	stopped bool

	// shm: the stream has a shared-memory ring. The coordinator's pool
	// puts each batch in a slot of it (Place) or leaves it to chunks; the
	// receiver passes the slots the trainer released back to it.
	shm bool
	// targetsInSlot: the trainer reads a batch's targets from its slot
	// (ShmRequest.targets_in_slot): they go there when they fit.
	targetsInSlot bool
	// errs counts the failed samples the send loop sends, and ends the
	// job past its limit (or at a batch of no samples).
	errs sampleErrors
}

// errStopped is a Send refused because the handler is returning.
var errStopped = errors.New("the stream is ending")

// stop makes every later send fail with errStopped.
func (f *feed) stop() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
}

// stuck reports whether a Send is in progress, begun before stop: it ends
// only with the stream.
func (f *feed) stuck() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sendingSince.Load() != 0
}

// send is stream.SendMsg (a FeedResponse, or an rpc.OutChunk), timed for
// the watchdog, unless the stream stopped.
func (f *feed) send(m any) error {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return errStopped
	}
	f.sendingSince.Store(time.Now().UnixNano())
	f.mu.Unlock()
	defer f.sendingSince.Store(0)
	return f.stream.SendMsg(m)
}

// sendLoop sends the coordinator's output until it ends, each batch's
// buffer going back once sent (batch). After a failed Send it cancels the
// job and keeps draining the output (giving the buffers back), so the
// coordinator never waits on it.
func (f *feed) sendLoop(cancel context.CancelCauseFunc) error {
	var err error
	for o := range f.c.Out() {
		if err == nil {
			if err = f.sendOne(o); err != nil {
				cancel(err)
			}
		} else if o.Batch != nil {
			f.c.Recycle(o.Batch)
		}
	}
	if errors.Is(err, errStopped) {
		return nil // the handler has its reason
	}
	return err
}

func (f *feed) sendOne(o coord.Output) error {
	switch {
	case o.Start != nil:
		info := f.j.Info(o.Start.Epoch, o.Start.Plan)
		f.errs.begin(info)
		return f.send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Job{Job: info}})
	case o.End != nil:
		if err := f.send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_End{End: epochEnd(o.End)}}); err != nil {
			return err
		}
		f.epochs.Add(1)
		return nil
	}
	return f.batch(o)
}

// watch reports an error when the trainer has left a ready batch waiting
// for idle: no credit granted for it, or a Send blocked because the
// trainer stopped reading.
func (f *feed) watch(ctx context.Context, c *coord.Coordinator, idle time.Duration) <-chan error {
	out := make(chan error, 1)
	go func() {
		tick := time.NewTicker(min(idle/4, time.Second))
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			if t := f.sendingSince.Load(); t != 0 && time.Since(time.Unix(0, t)) > idle {
				out <- idleTimeout("the trainer has not read for %v (--idle-timeout)", idle)
				return
			}
			if t := c.CreditWaitSince(); !t.IsZero() && time.Since(t) > idle {
				out <- idleTimeout("the trainer has granted no credit for %v while a batch waits (--idle-timeout)", idle)
				return
			}
		}
	}()
	return out
}

// batch sends a batch: its header naming the ring slot the coordinator's
// pool put its pixels in (made there, or copied into a free one), its
// targets' arrays after them when the trainer reads them there and they
// fit, or its header and its pixels in chunks of at most MaxChunkBytes,
// lent to gRPC.
// Its buffer goes back to the coordinator once gRPC has let go of its
// pixels.
func (f *feed) batch(o coord.Output) error {
	j, b, epoch, k := f.j, o.Batch, o.Epoch, o.K
	m := f.s.m
	t0 := time.Now()
	pin := rpc.NewPin(func() { f.c.Recycle(b) })
	defer pin.Done()
	if err := f.errs.add(k, b); err != nil {
		f.s.badFiles.note(f.s.log, j.Dataset(), b.Errors)
		return err
	}
	h, err := j.Header(epoch, k, b)
	if err != nil {
		return err
	}
	j.PackSizes(b, h) // per-sample sizes: padded to the batch's largest
	if f.shm {
		via := "chunks"
		var tail func([]byte)
		if f.targetsInSlot && h.Targets != nil {
			tail = func(slot []byte) { slotTargets(m, j.Dataset(), h.Targets, slot, len(b.Data)) }
		}
		if i, copied, ok := f.c.Place(o, tail); ok {
			if copied {
				m.shmSlotCopies.WithLabelValues(j.Dataset()).Inc()
			}
			h.Slot, via = &i, "slot"
		}
		m.shmBatches.WithLabelValues(j.Dataset(), via).Inc()
	}
	if err := f.send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Batch{Batch: h}}); err != nil {
		return err
	}
	if h.Slot == nil {
		if err := rpc.SendChunks(f.send, pin, uint64(k), b.Data, MaxChunkBytes); err != nil {
			return err
		}
	}
	f.batches.Add(1)
	now := time.Now()
	f.c.Delivered(now, b.N, len(b.Data), now.Sub(t0))
	m.sendSeconds.Observe(now.Sub(t0).Seconds())
	m.batchesSent.WithLabelValues(j.Dataset()).Inc()
	m.samplesSent.WithLabelValues(j.Dataset()).Add(float64(b.N))
	if len(b.Errors) > 0 {
		m.sampleErrors.WithLabelValues(j.Dataset()).Add(float64(len(b.Errors)))
		f.s.badFiles.note(f.s.log, j.Dataset(), b.Errors)
	}
	return nil
}

// receive reads the trainer's Credit messages until the stream ends: grants
// go to the coordinator, wait reports to the metrics. A protocol error
// cancels the job with it; a half-close just means no more credits.
func (f *feed) receive(c *coord.Coordinator, cancel context.CancelCauseFunc) {
	wait := f.s.m.trainerWait.WithLabelValues(f.j.Dataset())
	for {
		req, err := f.stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				cancel(err)
			}
			return
		}
		cr := req.GetCredit()
		if cr == nil {
			cancel(status.Errorf(codes.InvalidArgument, "a Feed stream's messages after its first (and its ShmAccept) must be Credits, got %T", req.GetMsg()))
			return
		}
		if rs := cr.GetReleasedSlots(); len(rs) > 0 {
			if err := c.Released(rs); err != nil {
				cancel(status.Errorf(codes.InvalidArgument, "Credit.released_slots: %v", err))
				return
			}
		}
		if w := cr.GetWaitSeconds(); w > 0 && !math.IsInf(w, 0) && !math.IsNaN(w) {
			wait.Add(w)
		}
		c.Report(time.Now(), cr.GetWaitSeconds(), cr.GetStepSeconds(), cr.GetBatches())
		if n := cr.GetCredits(); n > 0 {
			c.Grant(n)
		}
	}
}

// DescribeJob implements stokerv1.FeedServiceServer: the JobInfo of one
// epoch of a job, without making anything.
func (s *Server) DescribeJob(_ context.Context, req *stokerv1.DescribeJobRequest) (*stokerv1.DescribeJobResponse, error) {
	j, err := s.newJob(req.GetJob(), job.Origin{TokenResumes: req.GetTokenResumes()})
	if err != nil {
		return nil, err
	}
	if req.GetConsumed() > 0 {
		if err := j.CheckTokenResume(req.GetEpoch()); err != nil {
			return nil, err
		}
	}
	return &stokerv1.DescribeJobResponse{Info: j.Info(req.GetEpoch(), j.EpochPlan(req.GetEpoch(), req.GetConsumed()))}, nil
}
