package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// ErrRefused marks a worker's refusal of a job: unknown dataset, another
// fingerprint, a spec or batch it will not make. Asking it again for the
// same job gets the same answer.
var ErrRefused = errors.New("job refused")

// ErrNotConnected is returned by Make while the peer has no Work stream.
var ErrNotConnected = errors.New("peer not connected")

// ErrBusy is returned by Make when the worker has as many leases in flight
// as it takes (from all of this process's jobs): not a failure, the batch
// is simply to be leased again, here later or elsewhere.
var ErrBusy = errors.New("peer busy")

// ErrDraining is returned by Make for a lease the worker turned away, or
// ended its stream over, because it is shutting down (it answers new
// leases with UNAVAILABLE and finishes those in flight). Not a failure:
// the batch is to be leased elsewhere. The peer is not Ready from then
// until a new stream opens.
var ErrDraining = errors.New("peer draining")

// Lease is one batch asked of a peer.
type Lease struct {
	// Job is the job as forwarded (with its dataset fingerprint set). The
	// peer registers each distinct *JobSpec once per stream.
	Job    *stokerv1.JobSpec
	Epoch  uint64
	Number uint64
	// Indices are the batch's samples; not modified.
	Indices []int64
	// SampleBytes is one sample's size: a batch may not be larger than
	// len(Indices) samples.
	SampleBytes int
	// Stall and Work are the job's input-stall ratio and its trainer's GPU
	// seconds per sample (0: unknown), by which a worker serving several
	// coordinators shares its cores.
	Stall, Work float64
}

// Peer is a coordinator's side of one worker's WorkService: it keeps a Work
// stream open (reconnecting with back-off after a failure), sends leases
// on it and reassembles the batches that come back. Make is safe for
// concurrent use.
type Peer struct {
	addr string
	opts options
	conn *grpc.ClientConn
	stop context.CancelFunc
	done chan struct{} // closed when the connection loop has ended

	mu      sync.Mutex
	st      *peerStream // nil while not connected
	info    *stokerv1.WorkerInfo
	onReady func()

	// inflight counts the leases of every job in flight on the peer: the
	// worker's limit is per stream, and all jobs share the stream.
	inflight atomic.Int64
}

// peerStream is one Work stream and what is in flight on it.
type peerStream struct {
	stream  stokerv1.WorkService_WorkClient
	cancel  context.CancelFunc
	sendMu  sync.Mutex
	mu      sync.Mutex
	jobs    map[*stokerv1.JobSpec]uint64
	pending map[uint64]*pendingLease
	nextID  uint64
	err     error // why the stream ended; set once
	ended   chan struct{}
	// draining: the worker said it is shutting down; no lease is sent on
	// the stream any more.
	draining atomic.Bool
}

// pendingLease is a lease waiting for its batch. Its fields are guarded by
// the stream's mu; b is written only while the lease is pending, so that
// once Make removed it the buffer is the caller's again.
type pendingLease struct {
	l     *Lease
	b     *pipeline.Batch
	got   int // bytes received
	want  int // -1 until LeaseDone
	done  chan error
	final bool
}

type options struct {
	dial        []grpc.DialOption
	connectTime time.Duration
	maxBackoff  time.Duration
	onError     func(error)
}

// Option configures a Peer.
type Option func(*options)

// WithDialOptions adds gRPC dial options (credentials, keepalive) to the
// peer's connection. Default: plaintext with keepalive pings every 10 s.
func WithDialOptions(o ...grpc.DialOption) Option {
	return func(p *options) { p.dial = append(p.dial, o...) }
}

// WithConnectTimeout bounds how long opening a Work stream may take before
// the peer counts as down and is tried again later. Default 5 s.
func WithConnectTimeout(d time.Duration) Option {
	return func(p *options) { p.connectTime = d }
}

// WithMaxBackoff bounds the wait between reconnection attempts. Default 5 s.
func WithMaxBackoff(d time.Duration) Option {
	return func(p *options) { p.maxBackoff = d }
}

// WithErrors calls f when the stream cannot be opened, or ends, with an
// error unlike the last one (so a peer that keeps failing the same way is
// reported once). Default: none.
func WithErrors(f func(error)) Option {
	return func(p *options) { p.onError = f }
}

// Dial starts keeping a Work stream open to the worker at addr. It
// returns at once; Ready says when leases can be sent. onReady, if not nil,
// is called each time the stream comes up or goes down.
func Dial(addr string, onReady func(), opts ...Option) (*Peer, error) {
	o := options{connectTime: 5 * time.Second, maxBackoff: 5 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	// gRPC's own reconnection back-off grows to 120 s; a restarted worker
	// must be used again within the peer's back-off.
	cp := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: o.connectTime}
	cp.Backoff.BaseDelay, cp.Backoff.MaxDelay = 100*time.Millisecond, o.maxBackoff
	dial := append([]grpc.DialOption{rpc.Plaintext(), rpc.Keepalive(), grpc.WithConnectParams(cp)}, rpc.DialBuffers()...)
	dial = append(dial, o.dial...)
	conn, err := grpc.NewClient("passthrough:///"+addr, dial...)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &Peer{addr: addr, opts: o, conn: conn, stop: stop, done: make(chan struct{}), onReady: onReady}
	go p.loop(ctx)
	return p, nil
}

// Addr is the peer's address.
func (p *Peer) Addr() string { return p.addr }

// Ready reports whether the peer has a Work stream up that takes leases
// (its worker is not draining).
func (p *Peer) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st != nil && !p.st.draining.Load()
}

// limit is how many leases the worker takes at once on a stream (what it
// said when the stream opened; 1 before that).
func (p *Peer) limit() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.info == nil {
		return 1
	}
	return max(int64(p.info.GetMaxLeases()), 1)
}

// Free is how many more leases the worker would take now, from any job.
func (p *Peer) Free() int { return int(max(p.limit()-p.inflight.Load(), 0)) }

// Close ends the stream and the connection: leases in flight fail.
func (p *Peer) Close() error {
	p.stop()
	<-p.done
	return p.conn.Close()
}

// InFlight is how many leases are in flight on the peer now.
func (p *Peer) InFlight() int64 { return p.inflight.Load() }

// Retire closes the peer once its leases in flight are answered, or after
// wait, or when abort is closed, whichever comes first: a worker that left
// the coordinator's peer set (its DNS record went, as when its pod drains)
// finishes the batches it holds instead of having them cut and made again.
// The caller sends it no new lease. It returns how many leases were still
// in flight when it closed the peer (they fail).
func (p *Peer) Retire(wait time.Duration, abort <-chan struct{}) (unfinished int64) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	defer p.Close()
	for {
		if n := p.inflight.Load(); n <= 0 {
			return 0
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return p.inflight.Load()
		case <-abort:
			return p.inflight.Load()
		}
	}
}

// Forget drops the registration of a job that ended (the worker keeps it
// until the stream ends; this only frees the coordinator's side).
func (p *Peer) Forget(spec *stokerv1.JobSpec) {
	p.mu.Lock()
	st := p.st
	p.mu.Unlock()
	if st != nil {
		st.mu.Lock()
		delete(st.jobs, spec)
		st.mu.Unlock()
	}
}

// loop keeps a stream open until Close: connect, serve until the stream
// fails, back off, again.
func (p *Peer) loop(ctx context.Context) {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	last := ""
	report := func(err error) {
		if f := p.opts.onError; f != nil && ctx.Err() == nil && err.Error() != last {
			last = err.Error()
			f(err)
		}
	}
	for ctx.Err() == nil {
		st, err := p.open(ctx)
		if err == nil {
			last = ""
			backoff = 100 * time.Millisecond
			p.setStream(st)
			p.receive(st)
			p.setStream(nil)
			report(st.err)
			if !errors.Is(st.err, ErrDraining) {
				continue // a stream that ran is retried at once: the worker may have restarted
			}
			// The worker drained: it is going away, and asking again at
			// once would only find it gone. A restarted one is found
			// within the longest back-off.
			backoff = p.opts.maxBackoff
		} else {
			report(err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, p.opts.maxBackoff)
	}
}

func (p *Peer) setStream(st *peerStream) {
	p.mu.Lock()
	p.st = st
	p.mu.Unlock()
	p.readyChanged()
}

// readyChanged tells the coordinator that Ready or Free may have changed.
func (p *Peer) readyChanged() {
	p.mu.Lock()
	f := p.onReady
	p.mu.Unlock()
	if f != nil {
		f()
	}
}

// open opens a Work stream and reads the worker's WorkerInfo, within the
// connect timeout.
func (p *Peer) open(ctx context.Context) (*peerStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(p.opts.connectTime, cancel)
	stream, err := stokerv1.NewWorkServiceClient(p.conn).Work(sctx)
	var first *stokerv1.WorkResponse
	if err == nil {
		first, err = stream.Recv()
	}
	if !timer.Stop() && err != nil {
		err = fmt.Errorf("no answer within %v: %w", p.opts.connectTime, err)
	}
	if err == nil && first.GetWorker() == nil {
		err = fmt.Errorf("first message %T, want WorkerInfo", first.GetMsg())
	}
	if err != nil {
		cancel()
		return nil, err
	}
	p.mu.Lock()
	p.info = first.GetWorker()
	p.mu.Unlock()
	return &peerStream{
		stream: stream, cancel: cancel,
		jobs: make(map[*stokerv1.JobSpec]uint64), pending: make(map[uint64]*pendingLease),
		ended: make(chan struct{}),
	}, nil
}

// receive reads a stream's answers until it ends, then fails what was in
// flight on it.
func (p *Peer) receive(st *peerStream) {
	err := p.read(st)
	st.cancel()
	st.mu.Lock()
	if errors.Is(err, io.EOF) {
		// A worker ends a stream cleanly only when it drains, once it has
		// answered every lease it took: what is still pending was sent
		// after it stopped reading, and goes elsewhere.
		st.err = fmt.Errorf("%w: %w: peer %s: the worker ended the stream (draining)", ErrNotConnected, ErrDraining, p.addr)
	} else {
		st.err = fmt.Errorf("%w: peer %s: %v", ErrNotConnected, p.addr, err)
	}
	for id, pl := range st.pending {
		delete(st.pending, id)
		pl.finish(st.err)
	}
	st.mu.Unlock()
	close(st.ended)
}

func (p *Peer) read(st *peerStream) error {
	for {
		msg, err := st.stream.Recv()
		if err != nil {
			return err
		}
		switch m := msg.GetMsg().(type) {
		case *stokerv1.WorkResponse_Done:
			err = st.header(m.Done)
		case *stokerv1.WorkResponse_Chunk:
			err = st.chunk(m.Chunk)
		case *stokerv1.WorkResponse_Failed:
			if st.failed(m.Failed) {
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
	n, limit := len(h.GetLabels()), len(pl.l.Indices)*pl.l.SampleBytes
	if n > len(pl.l.Indices) || len(h.GetIndices()) != n || h.GetDataBytes() > uint64(limit) {
		return fmt.Errorf("lease %d: a batch of %d samples and %d bytes for a lease of %d samples of %d bytes",
			d.GetLease(), n, h.GetDataBytes(), len(pl.l.Indices), pl.l.SampleBytes)
	}
	b := pl.b
	b.N = n
	b.Labels = append(b.Labels[:0], h.GetLabels()...)
	b.Indices = append(b.Indices[:0], h.GetIndices()...)
	b.Errors = b.Errors[:0]
	for _, e := range h.GetErrors() {
		b.Errors = append(b.Errors, pipeline.SampleError{Index: e.GetIndex(), Name: e.GetName(), Reason: e.GetReason()})
	}
	size := int(h.GetDataBytes())
	if cap(b.Data) < size {
		b.Data = make([]byte, size)
	}
	b.Data = b.Data[:size]
	pl.want = size
	if size == 0 {
		delete(st.pending, d.GetLease())
		pl.finish(nil)
	}
	return nil
}

func (st *peerStream) chunk(c *stokerv1.Chunk) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	pl := st.pending[c.GetNumber()]
	if pl == nil {
		return nil // a lease given up on: dropped
	}
	if pl.want < 0 || c.GetOffset() != uint64(pl.got) || pl.got+len(c.GetData()) > pl.want {
		return fmt.Errorf("lease %d: chunk at %d of %d bytes, have %d of %d", c.GetNumber(), c.GetOffset(), len(c.GetData()), pl.got, pl.want)
	}
	pl.got += copy(pl.b.Data[pl.got:], c.GetData())
	if pl.got == pl.want {
		delete(st.pending, c.GetNumber())
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
	err := status.Error(code, f.GetMessage())
	switch code {
	case codes.NotFound, codes.FailedPrecondition, codes.InvalidArgument, codes.Unimplemented:
		err = fmt.Errorf("%w: %w", ErrRefused, err)
	case codes.ResourceExhausted:
		// Its lease limit or memory budget: lease it again, later or
		// elsewhere.
		err = fmt.Errorf("%w: %w", ErrBusy, err)
	case codes.Unavailable:
		err = fmt.Errorf("%w: %w", ErrDraining, err)
	}
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

// Make sends l to the worker and reassembles its batch into b. It returns
// ErrNotConnected when there is no stream, an error wrapping ErrRefused
// when the worker refuses the job, ctx's error when ctx ends first (the
// lease is then cancelled at the worker, and whatever of it still arrives
// is dropped). A lease that runs into ctx's deadline also ends the stream:
// a worker that does not answer in time is presumed hung, and the stream is
// opened again.
func (p *Peer) Make(ctx context.Context, l Lease, b *pipeline.Batch) error {
	p.mu.Lock()
	st := p.st
	p.mu.Unlock()
	if st == nil {
		return fmt.Errorf("%w: peer %s", ErrNotConnected, p.addr)
	}
	if st.draining.Load() {
		return fmt.Errorf("%w: peer %s", ErrDraining, p.addr)
	}
	if p.inflight.Add(1) > p.limit() {
		p.inflight.Add(-1)
		return ErrBusy
	}
	defer p.released()
	pl := &pendingLease{l: &l, b: b, want: -1, done: make(chan error, 1)}
	// A worker that stopped reading can block Send (flow control): the
	// lease's deadline ends the stream, which unblocks it.
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			st.cancel()
		}
	})
	defer stop()
	// The job's registration and the lease go out under one send lock, so
	// a lease never overtakes its job's registration sent by another Make.
	st.sendMu.Lock()
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		st.sendMu.Unlock()
		return st.err
	}
	var reqs []*stokerv1.WorkRequest
	jobID, ok := st.jobs[l.Job]
	if !ok {
		st.nextID++
		jobID = st.nextID
		st.jobs[l.Job] = jobID
		reqs = append(reqs, &stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Job{Job: &stokerv1.WorkJob{Id: jobID, Spec: l.Job}}})
	}
	st.nextID++
	id := st.nextID
	st.pending[id] = pl
	st.mu.Unlock()
	reqs = append(reqs, &stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Lease{Lease: &stokerv1.Lease{
		Id: id, Job: jobID, Epoch: l.Epoch, Number: l.Number, Indices: l.Indices, Stall: l.Stall, Work: l.Work,
	}}})
	err := st.sendLocked(reqs...)
	st.sendMu.Unlock()
	if err != nil {
		st.drop(id)
		return fmt.Errorf("%w: peer %s: %v", ErrNotConnected, p.addr, err)
	}
	select {
	case err := <-pl.done:
		return err
	case <-ctx.Done():
	}
	if !st.drop(id) {
		// It finished just now; b is complete or failed, and no longer
		// written to.
		return <-pl.done
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		st.cancel() // presumed hung: the loop opens a new stream
	} else {
		st.send(&stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Cancel{Cancel: &stokerv1.CancelLease{Id: id}}})
	}
	return fmt.Errorf("peer %s: lease of batch %d: %w", p.addr, l.Number, ctx.Err())
}

// released frees a lease's slot and tells the coordinator, whose jobs may
// be waiting for a free peer.
func (p *Peer) released() {
	p.inflight.Add(-1)
	p.readyChanged()
}

// drop removes a pending lease; false if it had already finished.
func (st *peerStream) drop(id uint64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.pending[id]; !ok {
		return false
	}
	delete(st.pending, id)
	return true
}

func (st *peerStream) send(reqs ...*stokerv1.WorkRequest) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	return st.sendLocked(reqs...)
}

// sendLocked sends with sendMu held.
func (st *peerStream) sendLocked(reqs ...*stokerv1.WorkRequest) error {
	for _, r := range reqs {
		if err := st.stream.Send(r); err != nil {
			return err
		}
	}
	return nil
}
