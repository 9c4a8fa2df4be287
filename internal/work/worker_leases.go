package work

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/pipeline/batch"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// A Work stream's requests, on the worker: jobs registered and ended,
// leases made on the executor and sent back, or refused.

// receive reads the coordinator's requests until the stream ends.
func (w *workStream) receive(ctx context.Context) error {
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
		ended, err := w.handle(ctx, req)
		w.recvMu.Unlock()
		if ended != nil {
			ended.Close()
		}
		if err != nil {
			return err
		}
	}
}

// handle handles one request, with recvMu held. A JobEnd returns the
// job's queue, and so does a job refused for memory (with the refusal),
// for receive to close once it has let go of recvMu.
func (w *workStream) handle(ctx context.Context, req *stokerv1.WorkRequest) (ended JobQueue, err error) {
	switch m := req.GetMsg().(type) {
	case *stokerv1.WorkRequest_Job:
		if refused, err := w.register(m.Job); err != nil {
			return refused, err
		}
	case *stokerv1.WorkRequest_Lease:
		if err := w.lease(ctx, m.Lease); err != nil {
			return nil, err
		}
	case *stokerv1.WorkRequest_Cancel:
		w.mu.Lock()
		if c := w.cancels[m.Cancel.GetId()]; c != nil {
			c()
		}
		w.mu.Unlock()
	case *stokerv1.WorkRequest_End:
		if id := m.End.GetId(); id > w.lastJob {
			return nil, status.Errorf(codes.InvalidArgument, "JobEnd names job %d, which was not registered", id)
		}
		return w.endJob(m.End.GetId()), nil // ended already (no lease for a while): nothing to do
	case *stokerv1.WorkRequest_Ping:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unexpected %T on a Work stream", m)
	}
	return nil, nil
}

// lease starts making one leased batch, or answers it with LeaseFailed.
// Only a coordinator that breaks the protocol gets an error (the stream
// ends).
func (w *workStream) lease(ctx context.Context, l *stokerv1.Lease) error {
	if n := w.failing.Load(); n >= maxFailing {
		return status.Errorf(codes.ResourceExhausted, "%d refused leases not yet read: the coordinator does not read its answers", n)
	}
	wj, ok := w.jobs[l.GetJob()]
	switch {
	case !ok && l.GetJob() > w.lastJob:
		return status.Errorf(codes.InvalidArgument, "lease %d names job %d, which was not registered", l.GetId(), l.GetJob())
	case !ok:
		w.fail(l.GetId(), status.Errorf(codes.Aborted, "lease %d names job %d, which ended here (no lease named it for %v, or JobEnd): register it again", l.GetId(), l.GetJob(), w.cfg.JobIdle))
		return nil
	}
	w.byLast.touch(wj, time.Now())
	switch {
	case w.draining:
		w.turnedAway.Add(1)
		w.fail(l.GetId(), status.Error(codes.Unavailable, DrainingMessage))
		return nil
	case wj.err != nil:
		w.fail(l.GetId(), wj.err)
		return nil
	case len(l.GetIndices()) == 0 || len(l.GetIndices()) > wj.q.BatchSize():
		w.fail(l.GetId(), status.Errorf(codes.InvalidArgument, "lease %d has %d samples; the job's batch size is %d", l.GetId(), len(l.GetIndices()), wj.q.BatchSize()))
		return nil
	case len(l.GetCopies()) != 0 && len(l.GetCopies()) != len(l.GetIndices()):
		w.fail(l.GetId(), status.Errorf(codes.InvalidArgument, "lease %d has %d copies for %d samples", l.GetId(), len(l.GetCopies()), len(l.GetIndices())))
		return nil
	}
	var s *slot
	select {
	case s = <-w.slots:
	default:
		w.fail(l.GetId(), status.Errorf(codes.ResourceExhausted, "more than %d leases in flight on one Work stream", cap(w.slots)))
		return nil
	}
	if err := w.grow(s, len(l.GetIndices()), wj.q.SampleBytes(), l.GetId()); err != nil {
		w.slots <- s
		w.fail(l.GetId(), err)
		return nil
	}
	w.leases++
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
		fctx, stopProgress := w.reportProgress(lctx, l)
		err := wj.q.Fill(fctx, &lease.Lease{Epoch: l.GetEpoch(), Number: int(l.GetNumber()), Indices: l.GetIndices(),
			Copies: copiesOf(l), Demand: claimed(l)}, &s.b)
		stopProgress()
		w.mu.Lock()
		delete(w.cancels, l.GetId())
		w.mu.Unlock()
		cancelled := lctx.Err() != nil
		cancel()
		switch {
		case cancelled:
			w.cfg.Metrics.Leases.WithLabelValues("cancelled").Inc()
			w.slots <- s
			w.answered() // nothing to send
		case err != nil:
			w.slots <- s
			w.out <- workOut{lease: l.GetId(), err: err}
		default: // the send loop returns the slot once its batch is sent
			w.out <- workOut{lease: l.GetId(), epoch: l.GetEpoch(), k: int(l.GetNumber()), q: wj.q, s: s}
		}
	}()
	return nil
}

// reportProgress is ctx with a batch.Progress the lease's making reports
// to, and a goroutine that sends a LeaseProgress at most every
// l.progress_ms while it moves on, when the coordinator asked for them;
// stop ends it (before the lease's answer is queued).
func (w *workStream) reportProgress(ctx context.Context, l *stokerv1.Lease) (context.Context, func()) {
	every := time.Duration(l.GetProgressMs()) * time.Millisecond
	if every <= 0 {
		return ctx, func() {}
	}
	p := new(batch.Progress)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		var seen uint64
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if n := p.Count(); n != seen {
				seen = n
				select {
				case w.out <- workOut{lease: l.GetId(), progress: true}:
				case <-quit:
					return
				}
			}
		}
	}()
	return batch.WithProgress(ctx, p), func() {
		close(quit)
		<-done
	}
}

// fail queues a LeaseFailed answer.
func (w *workStream) fail(id uint64, err error) {
	w.failing.Add(1)
	w.pending.Add(1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.failing.Add(-1)
		w.out <- workOut{lease: id, err: err}
	}()
}

// DrainingMessage is the answer to a lease or a Work stream on a draining
// server.
const DrainingMessage = "this worker is draining (shutting down): it takes no new leases; lease elsewhere"

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
func (w *workStream) sendLoop(cancel context.CancelFunc) error {
	var sendErr error
	for o := range w.out {
		if o.progress {
			if sendErr == nil {
				sendErr = w.stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Progress{Progress: &stokerv1.LeaseProgress{Lease: o.lease}}})
				if sendErr != nil {
					cancel()
				}
			}
			continue // not an answer: the lease is still pending
		}
		if sendErr == nil {
			sendErr = w.send(o)
			if sendErr != nil {
				cancel()
			}
		} else if o.s != nil {
			w.slots <- o.s
		}
		if o.s != nil && sendErr == nil {
			w.done.Add(1)
		}
		w.answered()
	}
	return sendErr
}

// send sends a lease's answer; a batch's buffer goes back to the slots
// once gRPC lets go of its pixels.
func (w *workStream) send(o workOut) error {
	m := w.cfg.Metrics.Leases
	if o.err != nil {
		m.WithLabelValues("failed").Inc()
		st := status.Convert(w.cfg.Host.Status(o.err))
		return w.stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Failed{Failed: &stokerv1.LeaseFailed{
			Lease: o.lease, Code: uint32(st.Code()), Message: st.Message(),
		}}})
	}
	s := o.s
	b := &s.b
	pin := rpc.NewPin(func() { w.slots <- s }) // never blocks: the slots have room for every buffer
	defer pin.Done()
	h, err := o.q.Header(o.epoch, o.k, b)
	if err != nil {
		m.WithLabelValues("failed").Inc()
		st := status.Convert(w.cfg.Host.Status(err))
		return w.stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Failed{Failed: &stokerv1.LeaseFailed{
			Lease: o.lease, Code: uint32(st.Code()), Message: st.Message(),
		}}})
	}
	m.WithLabelValues("done").Inc()
	done := &stokerv1.LeaseDone{Lease: o.lease, Batch: h, Times: makeTimes(b.Times)}
	if err := w.stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Done{Done: done}}); err != nil {
		return err
	}
	return rpc.SendChunks(w.stream.SendMsg, pin, o.lease, b.Data, w.cfg.MaxChunkBytes)
}

// copiesOf is a lease's copies (repeated augmentation), nil without.
func copiesOf(l *stokerv1.Lease) []uint32 {
	if len(l.GetCopies()) == 0 {
		return nil
	}
	return l.GetCopies()
}
