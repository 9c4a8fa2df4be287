package work

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/batch"
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
	drained bool        // the last stream ended as its worker drained (until the next opens)
	info    *stokerv1.WorkerInfo
	lastErr error // why the peer is not ready; nil while it is
	onReady func()

	// inflight counts the leases of every job in flight on the peer: the
	// worker's limit is per stream, and all jobs share the stream.
	inflight atomic.Int64
	// released is poked (size 1) each time a lease ends: Retire waits on
	// it for the last one.
	released chan struct{}
	// retired is set by Retire: Make turns new leases away (draining)
	// from then on. A Make that counted its lease in flight before Retire
	// read the count is waited for; one that counted it after sees
	// retired and takes it back (both sides touch the two atomics in
	// opposite orders, so one of them sees the other).
	retired atomic.Bool
	// watch is what the transport saw of the last connection, for
	// describe.
	watch *connWatch
	// streams counts the Work streams that came up.
	streams atomic.Uint64
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
		grpc.WithInitialWindowSize(8 << 20), grpc.WithInitialConnWindowSize(32 << 20),
		// A LeaseDone carries the batch's fields and traces (each within
		// the job's bounds): past gRPC's default 4 MiB.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(rpc.MaxHeaderBytes))}, rpc.DialBuffers()...)
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

// Streams is how many Work streams to the worker came up so far: a
// coordinator that trusts a peer only as far as it checked it starts
// over when it changes (the worker may have been replaced).
func (p *Peer) Streams() uint64 { return p.streams.Load() }

// InFlight is how many leases are in flight on the peer now.
func (p *Peer) InFlight() int64 { return p.inflight.Load() }

// Retire closes the peer once its leases in flight are answered, or after
// wait, or when abort is closed, whichever comes first: a worker that left
// the coordinator's peer set (its DNS record went, as when its pod drains)
// finishes the batches it holds instead of having them cut and made again.
// The caller sends it no new lease. It returns how many leases were still
// in flight when it closed the peer (they fail).
func (p *Peer) Retire(wait time.Duration, abort <-chan struct{}) (unfinished int64) {
	p.retired.Store(true)
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
			p.setStream(st, false)
			p.receive(st)
			report(st.err) // before the stream goes: LastError is never nil while not Ready
			p.setStream(nil, errors.Is(st.err, lease.ErrDraining))
			if !errors.Is(st.err, lease.ErrDraining) {
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

// setStream sets the peer's stream: st once it is up, nil once it ended,
// drained saying it ended as its worker drained (Make then turns leases
// away as draining, not as a peer that is not connected, until the next).
func (p *Peer) setStream(st *peerStream, drained bool) {
	p.mu.Lock()
	p.st, p.drained = st, drained
	if st != nil {
		p.lastErr = nil
		p.streams.Add(1)
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

// Make sends lease l of job j to the worker and reassembles its batch
// into b (each sample at its place, with l.Place), answering the pixels
// of l.Keep's slots as they arrived. It returns
// ErrNotConnected when there is no stream, an error wrapping lease.ErrRefused
// when the worker refuses the job, ctx's error when ctx ends first: the
// lease is then cancelled at the worker (or never sent), whatever of it
// still arrives is dropped, and the stream goes on, for the other leases
// on it. Only a stream error or keepalive ends a stream.
func (p *Peer) Make(ctx context.Context, j *Job, l *lease.Lease, b *pipeline.Batch) (lease.Made, error) {
	// A context already done sends nothing: otherwise a fast worker's
	// answer could race the cancellation in the select below and a lease
	// its caller gave up on would count as made.
	if err := ctx.Err(); err != nil {
		return lease.Made{}, fmt.Errorf("peer %s: lease of batch %d: %w", p.addr, l.Number, err)
	}
	if p.retired.Load() {
		return lease.Made{}, fmt.Errorf("%w: peer %s left the peer set", lease.ErrDraining, p.addr)
	}
	p.mu.Lock()
	st, drained := p.st, p.drained
	p.mu.Unlock()
	if st == nil && drained { // a lease chosen while its stream drained
		return lease.Made{}, fmt.Errorf("%w: peer %s drained", lease.ErrDraining, p.addr)
	}
	if st == nil {
		return lease.Made{}, fmt.Errorf("%w: peer %s", ErrNotConnected, p.addr)
	}
	if st.draining.Load() {
		return lease.Made{}, fmt.Errorf("%w: peer %s", lease.ErrDraining, p.addr)
	}
	if p.inflight.Add(1) > p.limit() {
		p.inflight.Add(-1)
		return lease.Made{}, lease.ErrBusy
	}
	l.Count() // Free counts it from here
	defer p.releasedLease()
	if p.retired.Load() {
		// Retire began between the check above and the count: turned
		// away before it is sent, so Retire does not close the stream
		// under it.
		return lease.Made{}, fmt.Errorf("%w: peer %s left the peer set", lease.ErrDraining, p.addr)
	}
	pl := &pendingLease{j: j, l: l, b: b, want: -1, done: make(chan error, 1), progress: batch.ProgressOf(ctx)}
	var progressMs uint32
	if pl.progress != nil {
		progressMs = uint32(min(max(pl.progress.Every.Milliseconds(), 1), math.MaxUint32))
	}
	st.mu.Lock()
	if st.err != nil {
		st.mu.Unlock()
		return lease.Made{}, st.err
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
		Id: id, Job: jobID, Epoch: l.Epoch, Number: uint64(l.Number), Indices: l.Indices, Copies: l.Copies, Stall: l.Demand.Stall, Work: l.Demand.Work,
		ProgressMs: progressMs,
	}}}})
	st.mu.Unlock()
	select {
	case err := <-pl.done:
		return pl.made(err)
	case <-ctx.Done():
	}
	st.mu.Lock()
	if st.pending[id] != pl {
		// It finished just now; b is complete or failed, and no longer
		// written to.
		st.mu.Unlock()
		return pl.made(<-pl.done)
	}
	delete(st.pending, id)
	if pl.sent && st.err == nil {
		// The worker may be making it: withdraw it. One late lease is one
		// lease; the stream and the other leases on it go on.
		st.enqueue(outReq{req: &stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Cancel{Cancel: &stokerv1.CancelLease{Id: id}}}})
	}
	st.mu.Unlock()
	return lease.Made{}, fmt.Errorf("peer %s: lease of batch %d: %w", p.addr, l.Number, ctx.Err())
}

// made is Make's answer for a lease that finished with err: the pixels
// kept aside, when it made its batch. They were written before done was
// sent, and pl is no longer pending: nothing writes them any more.
func (pl *pendingLease) made(err error) (lease.Made, error) {
	if err != nil {
		return lease.Made{}, err
	}
	return lease.Made{Kept: pl.kept}, nil
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
