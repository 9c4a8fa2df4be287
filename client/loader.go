package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stoker-dev/stoker/internal/ring"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// ErrClosed is returned by Next once the Loader is closed.
var ErrClosed = errors.New("loader closed")

// ErrProtocol marks a Feed stream that breaks the protocol (a chunk out of
// place, a batch larger than its job allows, an epoch out of order): the
// loader stops at the first such message.
var ErrProtocol = errors.New("malformed Feed stream")

// Batch is one batch as the server made it.
type Batch struct {
	// Epoch is the batch's epoch and Number its number in the epoch.
	Epoch, Number uint64
	// Shape is [N, 3, H, W] (NCHW) or [N, H, W, 3] (NHWC).
	Shape []uint32
	Dtype stokerv1.Dtype
	// Data are the pixels: uint8, or little-endian float32 after
	// Normalize.
	Data []byte
	// Labels and Indices (into the dataset) have one entry per sample.
	Labels, Indices []int64
	// Errors are the samples that could not be made, replaced or dropped
	// by the job's fail policy.
	Errors []*stokerv1.SampleError
	// Traces, when the job asked for them (JobSpec.Trace), are each
	// sample's trace in batch order: what its ops drew, as JSON (see
	// Batch.Trace); of several views, a JSON list of each view's.
	Traces []string
	// Views, for a job of several views, are each view's shape and place
	// in Data, in order (ViewData); Shape is then view 0's. Nil for one
	// view.
	Views []View
	// Fields, when the job asked for them (JobSpec.Fields), are each
	// field's values, one per sample in batch order: Fields["txt"][i] is
	// sample i's, as the dataset holds it, nil where the sample has none
	// (a present empty value is empty, not nil).
	Fields map[string][][]byte

	pool *bufPool
}

// AppliedOp is one op a sample went through: torchvision.transforms.v2.
// functional's name and its arguments as JSON values (float64 numbers,
// []any lists, strings, bools, nil).
type AppliedOp struct {
	Op   string
	Args map[string]any
}

// Trace is sample i's trace, parsed: its ops in the order applied,
// geometry first. It fails when the job asked for no traces, and for a
// job of several views (ViewTrace).
func (b *Batch) Trace(i int) ([]AppliedOp, error) {
	if i < 0 || i >= len(b.Traces) {
		return nil, fmt.Errorf("stoker: batch %d has %d traces (ask for them with JobSpec.Trace)", b.Number, len(b.Traces))
	}
	if len(b.Views) > 0 {
		return nil, fmt.Errorf("stoker: batch %d has %d views: each sample has a trace per view (ViewTrace)", b.Number, len(b.Views))
	}
	return parseTrace([]byte(b.Traces[i]), b.Number, i)
}

// parseTrace parses one view's trace, a list of [op, args] pairs.
func parseTrace(raw []byte, number uint64, i int) ([]AppliedOp, error) {
	var pairs [][2]json.RawMessage
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("stoker: batch %d sample %d: trace: %w", number, i, err)
	}
	ops := make([]AppliedOp, len(pairs))
	for k, p := range pairs {
		if err := json.Unmarshal(p[0], &ops[k].Op); err != nil {
			return nil, fmt.Errorf("stoker: batch %d sample %d: trace step %d: %w", number, i, k, err)
		}
		if err := json.Unmarshal(p[1], &ops[k].Args); err != nil {
			return nil, fmt.Errorf("stoker: batch %d sample %d: trace step %d: %w", number, i, k, err)
		}
	}
	return ops, nil
}

// Release hands the batch's Data back to its loader for reuse; the batch
// must not be used afterwards. Calling it is optional (an unreleased
// buffer is garbage collected) and a second call does nothing.
func (b *Batch) Release() {
	if b == nil || b.pool == nil {
		return
	}
	b.pool.put(b.Data)
	b.pool, b.Data = nil, nil
}

// Loader is one job's Feed stream: it runs the job's epochs one after the
// other and hands out their batches. Next is not safe for concurrent use;
// Info, EpochEnds, Waited and Close may be called from any goroutine.
type Loader struct {
	c    *Client
	open *stokerv1.OpenJob
	o    loaderOptions
	pool *bufPool

	// Next's own.
	stream     stokerv1.FeedService_FeedClient
	items      chan item
	readerDone chan struct{}
	owed       uint32        // batches returned and not yet credited
	unreported time.Duration // Next's blocked time not yet reported
	stepped    time.Duration // the trainer's time between Nexts, not yet reported
	returned   time.Time     // when the last Next returned
	err        error         // sticky: io.EOF, a stream or protocol error

	lastMsg atomic.Int64 // UnixNano of the last message received

	// transport is "shm" once the stream's ring is mapped, else "grpc";
	// shmReason says why not, when shared memory was asked for.
	transport atomic.Pointer[[2]string]
	// released are ring slots copied out by the reader, not yet given back
	// (they go with the next credit).
	released chan uint32

	mu     sync.Mutex
	cancel context.CancelFunc // nil until the stream opens
	done   chan struct{}      // the reader's, once the stream opens
	closed bool
	info   *stokerv1.JobInfo
	ends   []*stokerv1.EpochEnd
	waited time.Duration
}

// item is what the reader hands Next: exactly one field is set.
type item struct {
	info  *stokerv1.JobInfo
	batch *Batch
	end   *stokerv1.EpochEnd
	err   error // the last item: io.EOF after the last epoch, or why the stream ended
}

// Loader returns a loader for spec (copied) on the client's connection.
// Nothing is sent until the first Next.
func (c *Client) Loader(spec *stokerv1.JobSpec, opts ...LoaderOption) *Loader {
	o := loaderOptions{prefetch: defaultPrefetch}
	for _, f := range opts {
		f(&o)
	}
	l := &Loader{
		c: c,
		o: o,
		open: &stokerv1.OpenJob{
			Job: proto.CloneOf(spec), Epoch: o.epoch, Epochs: o.epochs, Credits: o.prefetch, AsReady: o.asReady,
			StartBatch: o.start, SkipBatches: o.skip, Consumed: o.consumed, EpochWorldSize: o.began,
		},
		pool: &bufPool{keep: int(o.prefetch) + 2},
	}
	if o.errLimit != nil {
		l.open.Job.MaxSampleErrors = o.errLimit
	}
	l.transport.Store(&[2]string{"grpc", "not asked (SharedMemory)"})
	if o.shm {
		if boot := ring.BootID(); boot != "" {
			l.open.Shm = &stokerv1.ShmRequest{BootId: boot}
		} else {
			l.transport.Store(&[2]string{"grpc", "shared memory needs Linux"})
		}
	}
	return l
}

// Transport says how the stream's pixels arrive: "shm" (the server's
// shared-memory ring) or "grpc" (chunks), and, for "grpc", why not "shm".
func (l *Loader) Transport() (transport, reason string) {
	t := l.transport.Load()
	return t[0], t[1]
}

// Next returns the next batch, in the order the server sends them (batch
// number order within each epoch unless AsReady). The first call opens the
// stream; each later one grants the server one more batch and reports how
// long the previous calls blocked. It returns io.EOF after the last epoch
// (Epochs), ErrClosed after Close, ctx's error when ctx ends first (the
// stream goes on; call Next again), and otherwise the server's status
// error or an ErrProtocol error, for good.
func (l *Loader) Next(ctx context.Context) (*Batch, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	if l.err != nil {
		return nil, l.err
	}
	began := time.Now()
	if !l.returned.IsZero() {
		// The trainer's step: from handing out the last batch to asking
		// for the next.
		l.stepped += began.Sub(l.returned)
	}
	defer func() {
		l.returned = time.Now()
		d := l.returned.Sub(began)
		l.unreported += d
		l.mu.Lock()
		l.waited += d
		l.mu.Unlock()
	}()
	if l.items == nil {
		if err := l.start(); err != nil {
			return nil, err
		}
	} else if l.owed > 0 {
		cr := &stokerv1.Credit{Credits: l.owed, WaitSeconds: l.unreported.Seconds(), Batches: l.owed, StepSeconds: l.stepped.Seconds()}
		for len(l.released) > 0 {
			cr.ReleasedSlots = append(cr.ReleasedSlots, <-l.released)
		}
		// io.EOF: the stream ended, and the reader reports why.
		if err := l.stream.Send(&stokerv1.FeedRequest{Msg: &stokerv1.FeedRequest_Credit{Credit: cr}}); err != nil && !errors.Is(err, io.EOF) {
			return nil, l.fail(err)
		}
		l.owed, l.unreported, l.stepped = 0, 0, 0
	}
	var timer *time.Timer
	var timeout <-chan time.Time
	if d := l.o.timeout; d > 0 {
		timer = time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		var it item
		select {
		case it = <-l.items:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timeout:
			// Silent since the last message, or since this call asked.
			silent := time.Duration(time.Now().UnixNano() - max(l.lastMsg.Load(), began.UnixNano()))
			if silent < l.o.timeout {
				timer.Reset(l.o.timeout - silent)
				continue
			}
			return nil, l.fail(status.Errorf(codes.DeadlineExceeded, "no message from the server within %v", l.o.timeout))
		case <-l.readerDone:
			select {
			case it = <-l.items:
			default:
				return nil, ErrClosed // only Close ends the reader without a last item
			}
		}
		if l.isClosed() {
			return nil, ErrClosed // what is left of a stream Close ended
		}
		switch {
		case it.err != nil:
			return nil, l.fail(it.err)
		case it.info != nil:
			l.mu.Lock()
			l.info = it.info
			l.mu.Unlock()
		case it.end != nil:
			l.mu.Lock()
			l.ends = append(l.ends, it.end)
			l.mu.Unlock()
		case it.batch != nil:
			l.owed++
			return it.batch, nil
		}
	}
}

// start opens the stream and starts its reader.
func (l *Loader) start() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		return ErrClosed
	}
	l.cancel, l.done = cancel, done
	l.mu.Unlock()
	l.lastMsg.Store(time.Now().UnixNano())
	stream, err := l.c.feed.Feed(ctx)
	if err == nil {
		err = stream.Send(&stokerv1.FeedRequest{Msg: &stokerv1.FeedRequest_Open{Open: l.open}})
		if errors.Is(err, io.EOF) {
			// The stream failed; its status comes from Recv.
			_, err = stream.Recv()
		}
	}
	if err != nil {
		close(done)
		return l.fail(err)
	}
	l.stream = stream
	// Room for every batch the credits allow plus the epoch framing, so
	// that the reader rarely waits for Next.
	l.items = make(chan item, int(l.o.prefetch)+4)
	l.released = make(chan uint32, 64) // at least a ring's slots
	l.readerDone = done
	a := &assembler{l: l, epoch: l.o.epoch, batchSize: uint64(l.open.GetJob().GetBatchSize()), stream: stream}
	go l.read(ctx, cancel, stream, a, done)
	return nil
}

// fail makes err the loader's last word and ends the stream.
func (l *Loader) fail(err error) error {
	err = explain(l.c.target, err)
	l.err = err
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return err
}

// read receives the stream's messages and hands complete items to Next,
// until the stream ends or breaks the protocol.
func (l *Loader) read(ctx context.Context, cancel context.CancelFunc, stream stokerv1.FeedService_FeedClient, a *assembler, done chan struct{}) {
	defer close(done)
	defer cancel()
	defer func() {
		if a.ring != nil { // only the reader reads it
			a.ring.Close()
		}
	}()
	for {
		msg, err := stream.Recv()
		var it *item
		if err == nil {
			l.lastMsg.Store(time.Now().UnixNano())
			it, err = a.handle(msg)
		} else if errors.Is(err, io.EOF) {
			err = a.eof()
		}
		if err != nil {
			it = &item{err: err}
		}
		if it != nil {
			select {
			case l.items <- *it:
			case <-ctx.Done():
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Info is the JobInfo of the epoch Next is in: that of the last batch it
// returned, or of a later epoch it went into (nil before the first Next).
func (l *Loader) Info() *stokerv1.JobInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.info
}

// EpochEnds are the EpochEnds that Next went past, one per finished epoch.
func (l *Loader) EpochEnds() []*stokerv1.EpochEnd {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ends)
}

// Waited is the total time Next blocked waiting for batches.
func (l *Loader) Waited() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waited
}

// Close ends the stream (the server stops making the job's batches) and
// waits for the loader's receiving goroutine to end. Batches already
// returned stay valid. Safe to call more than once.
func (l *Loader) Close() error {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

func (l *Loader) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// assembler checks the framing of a Feed stream and reassembles batches
// from their chunks. It is the reader goroutine's.
type assembler struct {
	l         *Loader
	batchSize uint64
	epoch     uint64            // the epoch whose JobInfo comes next, or that is running
	info      *stokerv1.JobInfo // the running epoch's; nil between epochs
	sampleB   uint64            // one sample's bytes in the running epoch
	seen      []uint64          // bit set of the running epoch's batch numbers received
	received  uint64            // batches received in the running epoch
	ended     uint64            // epochs ended
	cur       *Batch            // being reassembled: len(cur.Data) bytes so far
	want      uint64            // cur's bytes in all
	stream    stokerv1.FeedService_FeedClient
	offered   bool          // a ShmOffer came (the first message, if any)
	ring      *ring.Mapping // the mapped ring; nil: chunks
}

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// handle takes one message; it returns an item when one is complete.
func (a *assembler) handle(msg *stokerv1.FeedResponse) (*item, error) {
	if n := a.l.o.epochs; n > 0 && a.ended >= n {
		return nil, protoErr("a %T after the last epoch's EpochEnd", msg.GetMsg())
	}
	switch m := msg.GetMsg().(type) {
	case *stokerv1.FeedResponse_Shm:
		return nil, a.shm(m.Shm)
	case *stokerv1.FeedResponse_Job:
		if a.l.open.Shm != nil && !a.offered {
			a.offered = true
			a.l.transport.Store(&[2]string{"grpc", "the server does not offer shared memory"})
		}
		return a.jobInfo(m.Job)
	case *stokerv1.FeedResponse_Batch:
		return a.header(m.Batch)
	case *stokerv1.FeedResponse_Chunk:
		return a.chunk(m.Chunk)
	case *stokerv1.FeedResponse_End:
		return a.end(m.End)
	}
	return nil, protoErr("unknown message %T", msg.GetMsg())
}

// shm answers the server's ShmOffer: the ring mapped and accepted, or
// declined with the reason (the stream goes on in chunks).
func (a *assembler) shm(o *stokerv1.ShmOffer) error {
	if a.l.open.Shm == nil || a.offered {
		return protoErr("a ShmOffer the loader did not ask for, or a second one")
	}
	a.offered = true
	reason := o.GetDeclined()
	if reason == "" {
		r, err := ring.Map(o)
		if err != nil {
			reason = "could not map the server's ring: " + err.Error()
		}
		a.ring = r
		// Sent before any batch can come, so never beside Next's credits.
		msg := &stokerv1.FeedRequest{Msg: &stokerv1.FeedRequest_Shm{Shm: &stokerv1.ShmAccept{Ok: r != nil, Reason: reason}}}
		if err := a.stream.Send(msg); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	if reason != "" {
		a.l.transport.Store(&[2]string{"grpc", reason})
	} else {
		a.l.transport.Store(&[2]string{"shm", ""})
	}
	return nil
}

func (a *assembler) jobInfo(info *stokerv1.JobInfo) (*item, error) {
	if a.info != nil {
		return nil, protoErr("JobInfo of epoch %d inside epoch %d", info.GetEpoch(), a.info.GetEpoch())
	}
	if info.GetEpoch() != a.epoch {
		return nil, protoErr("JobInfo of epoch %d, want epoch %d", info.GetEpoch(), a.epoch)
	}
	shape := info.GetSampleShape()
	elem := dtypeSize(info.GetDtype())
	if len(shape) != 3 || elem == 0 {
		return nil, protoErr("JobInfo with sample shape %v and dtype %v", shape, info.GetDtype())
	}
	size, ok := infoViews(info, uint64(elem))
	if _, fits := product(size, a.batchSize); !ok || !fits {
		return nil, protoErr("JobInfo with sample shape %v, %d views and dtype %v for batches of %d", shape, len(info.GetViews()), info.GetDtype(), a.batchSize)
	}
	a.info, a.sampleB, a.received, a.seen = info, size, 0, a.seen[:0]
	return &item{info: info}, nil
}

func (a *assembler) header(h *stokerv1.BatchHeader) (*item, error) {
	switch {
	case a.info == nil:
		return nil, protoErr("BatchHeader of batch %d outside an epoch", h.GetNumber())
	case a.cur != nil:
		return nil, protoErr("BatchHeader of batch %d while batch %d has %d of %d bytes", h.GetNumber(), a.cur.Number, len(a.cur.Data), a.want)
	case h.GetEpoch() != a.info.GetEpoch():
		return nil, protoErr("batch %d of epoch %d in epoch %d", h.GetNumber(), h.GetEpoch(), a.info.GetEpoch())
	case h.GetNumber() >= a.info.GetBatches():
		return nil, protoErr("batch %d of an epoch of %d batches", h.GetNumber(), a.info.GetBatches())
	case a.saw(h.GetNumber()):
		return nil, protoErr("batch %d of epoch %d a second time", h.GetNumber(), h.GetEpoch())
	}
	shape := h.GetShape()
	if len(shape) != 4 || !slices.Equal(shape[1:], a.info.GetSampleShape()) || h.GetDtype() != a.info.GetDtype() {
		return nil, protoErr("batch %d has shape %v and dtype %v; the job's samples are %v of %v",
			h.GetNumber(), shape, h.GetDtype(), a.info.GetSampleShape(), a.info.GetDtype())
	}
	n := uint64(shape[0])
	if n > a.batchSize || h.GetDataBytes() != n*a.sampleB || uint64(len(h.GetLabels())) != n || uint64(len(h.GetIndices())) != n {
		return nil, protoErr("batch %d: %d samples, %d bytes, %d labels, %d indices; want at most %d samples of %d bytes",
			h.GetNumber(), n, h.GetDataBytes(), len(h.GetLabels()), len(h.GetIndices()), a.batchSize, a.sampleB)
	}
	if t := len(h.GetTraces()); t != 0 && uint64(t) != n {
		return nil, protoErr("batch %d: %d traces for %d samples", h.GetNumber(), t, n)
	}
	views, ok := batchViews(a.info, h, n, uint64(dtypeSize(h.GetDtype())))
	if !ok {
		return nil, protoErr("batch %d: views %v; the job's are %v", h.GetNumber(), h.GetViews(), a.info.GetViews())
	}
	fields, err := batchFields(a.l.open.GetJob().GetFields(), h, int(n))
	if err != nil {
		return nil, err
	}
	if h.Slot != nil {
		i := h.GetSlot()
		if a.ring == nil || i >= a.ring.Slots || h.GetDataBytes() > a.ring.SlotBytes {
			return nil, protoErr("batch %d in slot %d of %d bytes, with no ring or outside it", h.GetNumber(), i, h.GetDataBytes())
		}
		a.mark(h.GetNumber())
		a.received++
		b := &Batch{
			Epoch: h.GetEpoch(), Number: h.GetNumber(), Shape: shape, Dtype: h.GetDtype(),
			Data:   append(a.l.pool.get(h.GetDataBytes()), a.ring.Slot(i, h.GetDataBytes())...),
			Labels: h.GetLabels(), Indices: h.GetIndices(), Errors: h.GetErrors(), Traces: h.GetTraces(), Views: views, Fields: fields, pool: a.l.pool,
		}
		select {
		case a.l.released <- i:
		default: // a server filling slots it was not given back
			return nil, protoErr("batch %d in slot %d: more slots in use than the ring's %d", h.GetNumber(), i, a.ring.Slots)
		}
		return &item{batch: b}, nil
	}
	a.mark(h.GetNumber())
	a.received++
	b := &Batch{
		Epoch: h.GetEpoch(), Number: h.GetNumber(), Shape: shape, Dtype: h.GetDtype(),
		Data: a.l.pool.get(h.GetDataBytes()), Labels: h.GetLabels(), Indices: h.GetIndices(),
		Errors: h.GetErrors(), Traces: h.GetTraces(), Views: views, Fields: fields, pool: a.l.pool,
	}
	if h.GetDataBytes() == 0 {
		return &item{batch: b}, nil
	}
	a.cur, a.want = b, h.GetDataBytes()
	return nil, nil
}

// saw reports whether batch k of the running epoch was received.
func (a *assembler) saw(k uint64) bool {
	return k/64 < uint64(len(a.seen)) && a.seen[k/64]&(1<<(k%64)) != 0
}

// mark records batch k of the running epoch as received; the bit set grows
// with the largest batch number (at most JobInfo.batches).
func (a *assembler) mark(k uint64) {
	for k/64 >= uint64(len(a.seen)) {
		a.seen = append(a.seen, 0)
	}
	a.seen[k/64] |= 1 << (k % 64)
}

func (a *assembler) chunk(c *stokerv1.Chunk) (*item, error) {
	b := a.cur
	switch {
	case b == nil:
		return nil, protoErr("chunk of batch %d without its header", c.GetNumber())
	case c.GetNumber() != b.Number || c.GetOffset() != uint64(len(b.Data)) || len(c.GetData()) == 0 ||
		uint64(len(c.GetData())) > a.want-uint64(len(b.Data)):
		return nil, protoErr("chunk of batch %d at %d of %d bytes; want batch %d at %d, at most %d bytes",
			c.GetNumber(), c.GetOffset(), len(c.GetData()), b.Number, len(b.Data), a.want-uint64(len(b.Data)))
	}
	// Within a pooled buffer's capacity append copies; a new buffer grows
	// as the bytes arrive, so a header cannot make the loader allocate
	// more than the server actually sends.
	b.Data = append(b.Data, c.GetData()...)
	if uint64(len(b.Data)) < a.want {
		return nil, nil
	}
	a.cur = nil
	return &item{batch: b}, nil
}

func (a *assembler) end(e *stokerv1.EpochEnd) (*item, error) {
	switch {
	case a.info == nil:
		return nil, protoErr("EpochEnd of epoch %d outside an epoch", e.GetEpoch())
	case a.cur != nil:
		return nil, protoErr("EpochEnd while batch %d has %d of %d bytes", a.cur.Number, len(a.cur.Data), a.want)
	case e.GetEpoch() != a.info.GetEpoch() || e.GetBatches() != a.received:
		return nil, protoErr("EpochEnd of epoch %d after %d batches; this stream got %d batches of epoch %d",
			e.GetEpoch(), e.GetBatches(), a.received, a.info.GetEpoch())
	}
	a.info = nil
	a.ended++
	a.epoch++
	return &item{end: e}, nil
}

// eof is the meaning of the server closing the stream: io.EOF after the
// last epoch, a protocol error before.
func (a *assembler) eof() error {
	if n := a.l.o.epochs; n > 0 && a.ended >= n {
		return io.EOF
	}
	return protoErr("the server closed the stream in epoch %d, before its EpochEnd", a.epoch)
}

// dtypeSize is an element's bytes; 0 for an unknown dtype.
func dtypeSize(d stokerv1.Dtype) int {
	switch d {
	case stokerv1.Dtype_DTYPE_UINT8:
		return 1
	case stokerv1.Dtype_DTYPE_FLOAT32:
		return 4
	}
	return 0
}

// product multiplies, reporting whether the result stays within 1<<40 (no
// batch comes near that: the server refuses batches over its limit).
func product(xs ...uint64) (uint64, bool) {
	p := uint64(1)
	for _, x := range xs {
		hi, lo := bits.Mul64(p, x)
		if hi != 0 || lo > 1<<40 {
			return 0, false
		}
		p = lo
	}
	return p, true
}

// bufPool keeps released batch buffers for reuse.
type bufPool struct {
	mu   sync.Mutex
	free [][]byte
	keep int
}

// get returns an empty buffer for n bytes: a released one with room for
// them, or a new one with room for up to 16 MiB of them (it grows as the
// bytes arrive).
func (p *bufPool) get(n uint64) []byte {
	p.mu.Lock()
	for i, b := range p.free {
		if uint64(cap(b)) >= n {
			p.free = slices.Delete(p.free, i, i+1)
			p.mu.Unlock()
			return b[:0]
		}
	}
	p.mu.Unlock()
	return make([]byte, 0, min(n, 16<<20))
}

func (p *bufPool) put(b []byte) {
	if cap(b) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < p.keep {
		p.free = append(p.free, b)
	}
}
