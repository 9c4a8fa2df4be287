package work

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"google.golang.org/grpc/codes"
)

// One Work stream, seen from the coordinator: the requests queued for its
// send loop, the leases pending on it, and the reassembly of what the
// worker sends back.

// peerStream is one Work stream and what is in flight on it.
type peerStream struct {
	stream stokerv1.WorkService_WorkClient
	cancel context.CancelFunc
	// pingEvery is how often the send loop pings a stream it sent nothing
	// on (a third of the worker's idle timeout); 0: never.
	pingEvery time.Duration

	mu      sync.Mutex
	jobs    map[*Job]uint64
	pending map[uint64]*pendingLease
	nextID  uint64
	queue   []outReq // for the send loop, in order
	err     error    // why the stream ended; set once
	cause   error    // why this side ended it, when it did
	wake    chan struct{}
	ended   chan struct{} // closed once the stream has ended
	sent    chan struct{} // closed when the send loop has returned
	// draining: the worker said it is shutting down; no lease is sent on
	// the stream any more.
	draining atomic.Bool
}

// outReq is a request queued for the send loop; lease is set for a Lease,
// which is sent only while still pending.
type outReq struct {
	req   *stokerv1.WorkRequest
	lease *pendingLease
}

// pendingLease is a lease waiting for its batch. Its fields are guarded by
// the stream's mu; b is written only while the lease is pending, so that
// once Make removed it the buffer is the caller's again.
type pendingLease struct {
	j    *Job
	l    *lease.Lease
	job  uint64 // the job's id on the stream
	b    *pipeline.Batch
	got  int // bytes received
	want int // -1 until LeaseDone
	// lay is where the batch's samples' views lie, n its samples (a
	// part's, in the answer's pixels) and slots the samples of the
	// buffer they are placed in (the whole batch's).
	lay      transform.ViewLayout
	n, slots int
	keep     []kept
	// kept are the pixels of l.Keep's slots, copied aside as they
	// arrive: Make's answer (lease.Made.Kept).
	kept  [][]byte
	done  chan error
	final bool
	sent  bool // the send loop has sent it (a cancel must follow it)
	// progress is told of each LeaseProgress (nil: the caller asked for
	// none).
	progress *batch.Progress
}

// kept is a slot of Lease.Keep: its place in the batch's pixels, and
// where they are copied.
type kept struct {
	off int
	dst []byte
}

// receive reads a stream's answers until it ends, then fails what was in
// flight on it.
func (p *Peer) receive(st *peerStream) {
	err := p.read(st)
	st.cancel()
	<-st.sent
	st.mu.Lock()
	switch {
	case st.cause != nil:
		st.err = fmt.Errorf("%w: peer %s: %w", ErrNotConnected, p.addr, st.cause)
	case errors.Is(err, io.EOF):
		// A worker ends a stream cleanly only when it drains, once it has
		// answered every lease it took: what is still pending was sent
		// after it stopped reading, and goes elsewhere.
		st.err = fmt.Errorf("%w: %w: peer %s: the worker ended the stream (draining)", ErrNotConnected, lease.ErrDraining, p.addr)
	default:
		st.err = fmt.Errorf("%w: peer %s: %w", ErrNotConnected, p.addr, err)
	}
	for id, pl := range st.pending {
		delete(st.pending, id)
		pl.finish(st.err)
	}
	st.queue = nil
	st.mu.Unlock()
	close(st.ended)
}

func (p *Peer) read(st *peerStream) error {
	msg := new(stokerv1.WorkResponse)
	in := rpc.Received{Msg: msg}
	defer in.Free()
	for {
		if err := st.stream.RecvMsg(&in); err != nil {
			return err
		}
		if in.Chunk {
			err := st.chunk(in.Number, in.Offset, &in)
			in.Free()
			if err != nil {
				return err
			}
			continue
		}
		var err error
		switch m := msg.GetMsg().(type) {
		case *stokerv1.WorkResponse_Done:
			err = st.header(m.Done)
		case *stokerv1.WorkResponse_Chunk: // encoded in a way the codec left to protobuf
			c := m.Chunk
			err = st.chunk(c.GetNumber(), c.GetOffset(), bytesPayload(c.GetData()))
		case *stokerv1.WorkResponse_Progress:
			st.progressed(m.Progress.GetLease())
		case *stokerv1.WorkResponse_Failed:
			if st.failed(m.Failed) {
				p.setLastErr(fmt.Errorf("%w: the worker is draining (shutting down)", lease.ErrDraining))
				p.readyChanged() // no longer Ready
			}
		default:
			err = fmt.Errorf("unexpected %T on a Work stream", m)
		}
		if err != nil {
			return err // a protocol error: the stream cannot be trusted
		}
	}
}

// progressed tells a pending lease's caller that the worker's making of
// it moved on; one for a lease no longer pending is ignored.
func (st *peerStream) progressed(id uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if pl := st.pending[id]; pl != nil && pl.progress != nil {
		pl.progress.Start()
	}
}

// header starts reassembling a lease's batch. A header for a lease no
// longer pending (it timed out or was cancelled) is ignored, and so are its
// chunks: nothing is held for it.
func (st *peerStream) header(d *stokerv1.LeaseDone) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	pl := st.pending[d.GetLease()]
	if pl == nil {
		return nil
	}
	if pl.want >= 0 {
		return fmt.Errorf("lease %d: a second header", d.GetLease())
	}
	h := d.GetBatch()
	n, limit := len(h.GetLabels()), len(pl.l.Indices)*pl.j.SampleBytes
	if n > len(pl.l.Indices) || len(h.GetIndices()) != n || h.GetDataBytes() > uint64(limit) {
		return fmt.Errorf("lease %d: a batch of %d samples and %d bytes for a lease of %d samples of %d bytes",
			d.GetLease(), n, h.GetDataBytes(), len(pl.l.Indices), pl.j.SampleBytes)
	}
	b := pl.b
	b.N = n
	b.Labels = append(b.Labels[:0], h.GetLabels()...)
	b.Indices = append(b.Indices[:0], h.GetIndices()...)
	b.Errors = b.Errors[:0]
	b.Times = stageTimes(d.GetTimes())
	for _, e := range h.GetErrors() {
		b.Errors = append(b.Errors, pipeline.SampleError{Index: e.GetIndex(), Name: e.GetName(), Reason: e.GetReason()})
	}
	// The samples' traces, when the job asked for them (none: a buffer's
	// from an earlier batch are not this one's).
	tr := h.GetTraces()
	if len(tr) != 0 && len(tr) != n {
		return fmt.Errorf("lease %d: %d traces for %d samples", d.GetLease(), len(tr), n)
	}
	b.Trace = len(tr) > 0
	b.Traces = slices.Grow(b.Traces[:0], len(tr))[:len(tr)]
	for i, t := range tr {
		b.Traces[i] = append(b.Traces[i][:0], t...)
	}
	// The samples' fields, when the job asks for them: each value as
	// protobuf parsed it, not copied again.
	if err := takeFields(pl.j.Fields, h, n, b); err != nil {
		return fmt.Errorf("lease %d: %v", d.GetLease(), err)
	}
	size := int(h.GetDataBytes())
	pl.lay, pl.n = pl.j.layout(), n
	if place := pl.l.Place; place != nil {
		// Its samples go to their places in the whole batch's buffer,
		// each view's to its place in the view's block.
		if size != n*pl.j.SampleBytes || len(place) < n {
			return fmt.Errorf("lease %d: a batch of %d samples and %d bytes, want %d bytes a sample", d.GetLease(), n, size, pl.j.SampleBytes)
		}
		if len(b.Data)%pl.j.SampleBytes != 0 {
			return fmt.Errorf("lease %d: a batch buffer of %d bytes for samples of %d", d.GetLease(), len(b.Data), pl.j.SampleBytes)
		}
		pl.slots = len(b.Data) / pl.j.SampleBytes
		for _, at := range place[:n] {
			if at < 0 || at >= pl.slots {
				return fmt.Errorf("lease %d: place %d is past the batch buffer's %d bytes", d.GetLease(), at, len(b.Data))
			}
		}
	} else {
		if cap(b.Data) < size {
			b.Data = make([]byte, size)
		}
		b.Data = b.Data[:size]
	}
	pl.want = size
	pl.keep = pl.keep[:0]
	if len(pl.l.Keep) > 0 {
		pl.kept = make([][]byte, len(pl.l.Keep))
	}
	for i, slot := range pl.l.Keep {
		if slot >= 0 && slot < n && (slot+1)*pl.j.SampleBytes <= size {
			// A slot's views, in order: the sample's bytes as the
			// verifier makes them.
			dst := make([]byte, pl.j.SampleBytes)
			pl.kept[i] = dst
			pl.lay.Spans(n, slot, func(off, within, size int) {
				pl.keep = append(pl.keep, kept{off: off, dst: dst[within:][:size]})
			})
		}
	}
	if size == 0 {
		delete(st.pending, d.GetLease())
		pl.finish(nil)
	}
	return nil
}

// payload is a chunk's pixels: in gRPC's receive buffers (rpc.Received),
// or a byte slice.
type payload interface {
	Len() int
	// CopyTo copies len(dst) bytes from at into dst.
	CopyTo(dst []byte, at int)
}

type bytesPayload []byte

func (p bytesPayload) Len() int                  { return len(p) }
func (p bytesPayload) CopyTo(dst []byte, at int) { copy(dst, p[at:]) }

// chunk copies a chunk of lease number's pixels, at offset, into its batch,
// and the parts of the samples it keeps aside into theirs: the one copy of
// a peer's pixels on their way to the trainer.
func (st *peerStream) chunk(number, offset uint64, data payload) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	pl := st.pending[number]
	if pl == nil {
		return nil // a lease given up on: dropped
	}
	n := data.Len()
	if pl.want < 0 || offset != uint64(pl.got) || pl.got+n > pl.want {
		return fmt.Errorf("lease %d: chunk at %d of %d bytes, have %d of %d", number, offset, n, pl.got, pl.want)
	}
	if place := pl.l.Place; place != nil {
		lay := pl.lay
		for done, v := 0, 0; done < n; {
			o := pl.got + done
			for o >= pl.n*lay.Start(v+1) {
				v++ // the view whose block o is in
			}
			size := lay.Bytes(v)
			rel := o - pl.n*lay.Start(v)
			s, within := rel/size, rel%size
			k := min(size-within, n-done)
			data.CopyTo(pl.b.Data[lay.Offset(pl.slots, v, place[s])+within:][:k], done)
			done += k
		}
	} else {
		data.CopyTo(pl.b.Data[pl.got:pl.got+n], 0)
	}
	for _, k := range pl.keep {
		lo, hi := max(k.off, pl.got), min(k.off+len(k.dst), pl.got+n)
		if lo < hi {
			data.CopyTo(k.dst[lo-k.off:hi-k.off], lo-pl.got)
		}
	}
	pl.got += n
	if pl.got == pl.want {
		delete(st.pending, number)
		pl.finish(nil)
	}
	return nil
}

// failed ends a lease the worker failed. drained: the worker said it is
// shutting down, which marks the stream draining.
func (st *peerStream) failed(f *stokerv1.LeaseFailed) (drained bool) {
	code := codes.Code(f.GetCode())
	if code == codes.Unavailable {
		// The worker drains (or its executor closed): it takes no more
		// leases on this stream.
		drained = !st.draining.Swap(true)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	pl := st.pending[f.GetLease()]
	if pl == nil {
		return drained
	}
	delete(st.pending, f.GetLease())
	if code == codes.Aborted {
		// The worker ended the job (no lease named it for a while): the
		// next lease registers it again.
		if id, ok := st.jobs[pl.j]; ok && id == pl.job {
			delete(st.jobs, pl.j)
		}
	}
	err := leaseError(code, f.GetMessage())
	pl.finish(err)
	return drained
}

// finish reports the lease's outcome once. Called with the stream's mu held.
func (pl *pendingLease) finish(err error) {
	if !pl.final {
		pl.final = true
		pl.done <- err
	}
}

// enqueue queues r for the send loop. Called with mu held. A worker that
// lets maxQueued requests pile up reads nothing: the stream is ended.
func (st *peerStream) enqueue(r outReq) {
	if st.err != nil || st.cause != nil {
		return
	}
	if len(st.queue) >= maxQueued {
		st.cause = fmt.Errorf("the worker reads no requests: %d waiting to be sent", len(st.queue))
		st.cancel()
		return
	}
	st.queue = append(st.queue, r)
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// next takes the next request to send: a lease no longer pending (its
// Make gave up before it was sent) is skipped. nil when none is queued.
func (st *peerStream) next() *stokerv1.WorkRequest {
	st.mu.Lock()
	defer st.mu.Unlock()
	for len(st.queue) > 0 {
		r := st.queue[0]
		st.queue[0] = outReq{}
		st.queue = st.queue[1:]
		if r.lease != nil {
			if st.pending[r.req.GetLease().GetId()] != r.lease {
				continue
			}
			r.lease.sent = true
		}
		return r.req
	}
	return nil
}

// sendLoop sends the stream's requests in the order they were queued, and
// a ping whenever it sent nothing for pingEvery, until ctx ends or a Send
// fails (the stream is then ended: the receiver sees it fail).
func (st *peerStream) sendLoop(ctx context.Context) {
	defer close(st.sent)
	var ping <-chan time.Time
	var timer *time.Timer
	if st.pingEvery > 0 {
		timer = time.NewTimer(st.pingEvery)
		defer timer.Stop()
		ping = timer.C
	}
	send := func(req *stokerv1.WorkRequest) bool {
		if err := st.stream.Send(req); err != nil {
			st.cancel() // the receiver then reads the stream's error
			return false
		}
		if timer != nil {
			timer.Reset(st.pingEvery)
		}
		return true
	}
	pingMsg := &stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Ping{Ping: &stokerv1.WorkPing{}}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping:
			if !send(pingMsg) {
				return
			}
		case <-st.wake:
		}
		for req := st.next(); req != nil; req = st.next() {
			if !send(req) {
				return
			}
		}
	}
}
