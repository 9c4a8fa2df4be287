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

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// maxQueued bounds the requests waiting for a stream's send loop: past it
// the worker is taken to read nothing (its connection is up, so keepalive
// does not end it) and the stream is ended. Each Make queues at most a
// registration, a lease and a cancel, and there are at most as many
// Makes at once as the worker takes leases.
const maxQueued = 4096

// minPing is the shortest interval between pings on an idle stream,
// whatever the worker's idle timeout.
const minPing = 50 * time.Millisecond

// Peer is a coordinator's side of one worker's WorkService: it keeps a Work
// stream open (reconnecting with back-off after a failure), registers
// jobs, sends leases on it, reassembles the batches that come back and
// ends jobs. One send loop per stream sends every request in order; Make
// only queues its requests and waits for the answer. Make is safe for
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
	lastErr error // why the peer is not ready; nil while it is
	onReady func()

	// inflight counts the leases of every job in flight on the peer: the
	// worker's limit is per stream, and all jobs share the stream.
	inflight atomic.Int64
	// released is poked (size 1) each time a lease ends: Retire waits on
	// it for the last one.
	released chan struct{}
	// watch is what the transport saw of the last connection, for
	// describe.
	watch *connWatch
}

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
	j     *Job
	l     *Lease
	job   uint64 // the job's id on the stream
	b     *pipeline.Batch
	got   int // bytes received
	want  int // -1 until LeaseDone
	keep  []kept
	done  chan error
	final bool
	sent  bool // the send loop has sent it (a cancel must follow it)
}

// kept is a sample of Lease.Keep: its place in the batch's pixels, and
// where they are copied.
type kept struct {
	off int
	dst []byte
}

type options struct {
	creds       credentials.TransportCredentials
	dial        []grpc.DialOption
	connectTime time.Duration
	maxBackoff  time.Duration
	onError     func(error)
	identity    pipeline.Identity
	onDecoder   func(error)
	onFreed     func()
}

// Option configures a Peer.
type Option func(*options)

// WithDialOptions adds gRPC dial options (per-call credentials,
// keepalive) to the peer's connection; transport credentials are
// WithCredentials'. Default: keepalive pings every 10 s.
func WithDialOptions(o ...grpc.DialOption) Option {
	return func(p *options) { p.dial = append(p.dial, o...) }
}

// WithCredentials sets the transport credentials the worker is dialed
// with (TLS). Default: plaintext.
func WithCredentials(c credentials.TransportCredentials) Option {
	return func(p *options) { p.creds = c }
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

// WithIdentity sets the decoder identity the worker's is compared with: a
// worker that would make other bytes (pipeline.Identity.SameOutput) is
// refused at handshake and never Ready. Default pipeline.LocalIdentity().
func WithIdentity(id pipeline.Identity) Option {
	return func(p *options) { p.identity = id }
}

// WithDecoderRefused calls f each time the worker is refused because its
// decoder would make other bytes (f's error wraps ErrDecoder and names
// both identities), unlike WithErrors, which reports a refusal once.
// Default: none.
func WithDecoderRefused(f func(error)) Option {
	return func(p *options) { p.onDecoder = f }
}

// WithFreed calls f each time a lease on the peer ends, so that Free may
// have grown: a coordinator waiting for room on this peer (and only such a
// one) is woken. Default: none.
func WithFreed(f func()) Option {
	return func(p *options) { p.onFreed = f }
}

// Dial starts keeping a Work stream open to the worker at addr. It
// returns at once; Ready says when leases can be sent. onReady, if not nil,
// is called each time the stream comes up or goes down.
func Dial(addr string, onReady func(), opts ...Option) (*Peer, error) {
	o := options{creds: insecure.NewCredentials(), connectTime: 5 * time.Second, maxBackoff: 5 * time.Second, identity: pipeline.LocalIdentity()}
	for _, f := range opts {
		f(&o)
	}
	var watch connWatch
	// gRPC's own reconnection back-off grows to 120 s; a restarted worker
	// must be used again within the peer's back-off.
	cp := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: o.connectTime}
	cp.Backoff.BaseDelay, cp.Backoff.MaxDelay = 100*time.Millisecond, o.maxBackoff
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(&watchedCreds{TransportCredentials: o.creds, w: &watch}),
		rpc.Keepalive(), grpc.WithConnectParams(cp),
		// Batches come back in chunks of megabytes: windows as a server's
		// (grpcOptions), so that the worker never waits for a window
		// update mid-batch, and updates are few. Setting them turns off
		// gRPC's BDP estimation and its pings (one A/B run: 0.135 against
		// 0.145 CPU-s per 1000 images relayed).
		grpc.WithInitialWindowSize(8 << 20), grpc.WithInitialConnWindowSize(32 << 20)}, rpc.DialBuffers()...)
	dial = append(dial, o.dial...)
	conn, err := grpc.NewClient("passthrough:///"+addr, dial...)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", addr, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	p := &Peer{addr: addr, opts: o, conn: conn, stop: stop, done: make(chan struct{}), onReady: onReady, released: make(chan struct{}, 1), watch: &watch}
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

// LastError says why the peer is not Ready: its last connection or
// stream error, in words a user can act on ("Unauthenticated: …", "TLS:
// x509: certificate signed by unknown authority", "decoder differs: …",
// "the worker is draining"), the gRPC error's message kept. nil while the
// peer is Ready, and before its first attempt ended.
func (p *Peer) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.st != nil && !p.st.draining.Load() {
		return nil
	}
	return p.lastErr
}

func (p *Peer) setLastErr(err error) {
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
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
	defer p.Close()
	for {
		if n := p.inflight.Load(); n <= 0 {
			return 0
		}
		select {
		case <-p.released:
		case <-deadline.C:
			return p.inflight.Load()
		case <-abort:
			return p.inflight.Load()
		}
	}
}

// Forget ends a job on the worker: its registration is dropped here and a
// JobEnd follows the job's last requests, so the worker drops its queue
// and state. The caller has no Make of the job in progress and starts none
// after it.
func (p *Peer) Forget(j *Job) {
	p.mu.Lock()
	st := p.st
	p.mu.Unlock()
	if st == nil {
		return // the worker's state went with the stream
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if id, ok := st.jobs[j]; ok {
		delete(st.jobs, j)
		st.enqueue(outReq{req: &stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_End{End: &stokerv1.JobEnd{Id: id}}}})
	}
}

// loop keeps a stream open until Close: connect, serve until the stream
// fails, back off, again.
func (p *Peer) loop(ctx context.Context) {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	last := ""
	report := func(err error) {
		p.setLastErr(p.describe(err))
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
			report(st.err) // before the stream goes: LastError is never nil while not Ready
			p.setStream(nil)
			if !errors.Is(st.err, ErrDraining) {
				continue // a stream that ran is retried at once: the worker may have restarted
			}
			// The worker drained: it is going away, and asking again at
			// once would only find it gone. A restarted one is found
			// within the longest back-off.
			backoff = p.opts.maxBackoff
		} else {
			if errors.Is(err, ErrDecoder) {
				if f := p.opts.onDecoder; f != nil && ctx.Err() == nil {
					f(err)
				}
				backoff = p.opts.maxBackoff // rebuilding a worker takes longer than a back-off
			}
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
	if st != nil {
		p.lastErr = nil
	}
	p.mu.Unlock()
	p.readyChanged()
}

// readyChanged tells the coordinator that Ready (and with it Free) may
// have changed.
func (p *Peer) readyChanged() {
	p.mu.Lock()
	f := p.onReady
	p.mu.Unlock()
	if f != nil {
		f()
	}
}

// open opens a Work stream, reads the worker's WorkerInfo and checks its
// decoder, within the connect timeout, and starts the stream's send loop
// with a first ping.
func (p *Peer) open(ctx context.Context) (*peerStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(p.opts.connectTime, cancel)
	// The codec leaves chunks' pixels in gRPC's receive buffers, for chunk
	// to copy once, into the batch (read).
	stream, err := stokerv1.NewWorkServiceClient(p.conn).Work(sctx, grpc.ForceCodecV2(rpc.Codec))
	var first *stokerv1.WorkResponse
	if err == nil {
		first, err = stream.Recv()
	}
	info := first.GetWorker()
	if err == nil && info == nil {
		err = fmt.Errorf("first message %T, want WorkerInfo", first.GetMsg())
	}
	if err == nil {
		if info.GetDecoder() == nil {
			err = fmt.Errorf("%w: the worker does not say how it decodes (it is older than this coordinator, %s): upgrade it",
				ErrDecoder, p.opts.identity.Version)
		} else {
			err = p.opts.identity.SameOutput(identityOf(info.GetDecoder()))
		}
	}
	if err == nil {
		// The worker waits for a first request (its first-message
		// timeout); nothing else is sending yet.
		err = stream.Send(&stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Ping{Ping: &stokerv1.WorkPing{}}})
	}
	if !timer.Stop() && err != nil {
		err = fmt.Errorf("no answer within %v (the worker is unreachable or hung)", p.opts.connectTime)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	p.mu.Lock()
	p.info = info
	p.mu.Unlock()
	pingEvery := time.Duration(info.GetIdleTimeoutMs()) * time.Millisecond / 3
	if pingEvery > 0 {
		pingEvery = max(pingEvery, minPing) // a worker cannot make us spin
	}
	st := &peerStream{
		stream: stream, cancel: cancel, pingEvery: pingEvery,
		jobs: make(map[*Job]uint64), pending: make(map[uint64]*pendingLease),
		wake: make(chan struct{}, 1), ended: make(chan struct{}), sent: make(chan struct{}),
	}
	go st.sendLoop(sctx)
	return st, nil
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
		st.err = fmt.Errorf("%w: %w: peer %s: the worker ended the stream (draining)", ErrNotConnected, ErrDraining, p.addr)
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
		case *stokerv1.WorkResponse_Failed:
			if st.failed(m.Failed) {
				p.setLastErr(fmt.Errorf("%w: the worker is draining (shutting down)", ErrDraining))
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
	for _, e := range h.GetErrors() {
		b.Errors = append(b.Errors, pipeline.SampleError{Index: e.GetIndex(), Name: e.GetName(), Reason: e.GetReason()})
	}
	size := int(h.GetDataBytes())
	if cap(b.Data) < size {
		b.Data = make([]byte, size)
	}
	b.Data = b.Data[:size]
	pl.want = size
	pl.keep = pl.keep[:0]
	for _, idx := range pl.l.Keep {
		if i := slices.Index(b.Indices, idx); i >= 0 && (i+1)*pl.j.SampleBytes <= size {
			dst := make([]byte, pl.j.SampleBytes)
			pl.l.Kept[idx] = dst
			pl.keep = append(pl.keep, kept{off: i * pl.j.SampleBytes, dst: dst})
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
	data.CopyTo(pl.b.Data[pl.got:pl.got+n], 0)
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

// Make sends lease l of job j to the worker and reassembles its batch
// into b. It returns
// ErrNotConnected when there is no stream, an error wrapping ErrRefused
// when the worker refuses the job, ctx's error when ctx ends first: the
// lease is then cancelled at the worker (or never sent), whatever of it
// still arrives is dropped, and the stream goes on, for the other leases
// on it. Only a stream error or keepalive ends a stream.
func (p *Peer) Make(ctx context.Context, j *Job, l *Lease, b *pipeline.Batch) error {
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
	defer p.releasedLease()
	pl := &pendingLease{j: j, l: l, b: b, want: -1, done: make(chan error, 1)}
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return st.err
	}
	// The job's registration and the lease are queued together: the send
	// loop sends them in order, so a lease never overtakes its job.
	jobID, ok := st.jobs[j]
	if !ok {
		st.nextID++
		jobID = st.nextID
		st.jobs[j] = jobID
		st.enqueue(outReq{req: &stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Job{Job: &stokerv1.WorkJob{Id: jobID, Spec: j.Spec}}}})
	}
	st.nextID++
	id := st.nextID
	pl.job = jobID
	st.pending[id] = pl
	st.enqueue(outReq{lease: pl, req: &stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Lease{Lease: &stokerv1.Lease{
		Id: id, Job: jobID, Epoch: l.Epoch, Number: uint64(l.Number), Indices: l.Indices, Stall: l.Demand.Stall, Work: l.Demand.Work,
	}}}})
	st.mu.Unlock()
	select {
	case err := <-pl.done:
		return err
	case <-ctx.Done():
	}
	st.mu.Lock()
	if st.pending[id] != pl {
		// It finished just now; b is complete or failed, and no longer
		// written to.
		st.mu.Unlock()
		return <-pl.done
	}
	delete(st.pending, id)
	if pl.sent && st.err == nil {
		// The worker may be making it: withdraw it. One late lease is one
		// lease; the stream and the other leases on it go on.
		st.enqueue(outReq{req: &stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Cancel{Cancel: &stokerv1.CancelLease{Id: id}}}})
	}
	st.mu.Unlock()
	return fmt.Errorf("peer %s: lease of batch %d: %w", p.addr, l.Number, ctx.Err())
}

// releasedLease frees a lease's slot and tells whoever waits for one: the
// coordinators waiting for room on this peer (WithFreed), and Retire.
func (p *Peer) releasedLease() {
	p.inflight.Add(-1)
	select {
	case p.released <- struct{}{}:
	default:
	}
	if f := p.opts.onFreed; f != nil {
		f()
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
