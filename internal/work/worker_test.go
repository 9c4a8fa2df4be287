package work

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/rpc"
	"github.com/stoker-dev/stoker/internal/waitfor"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// The worker's side of the Work protocol (Worker), served over bufconn
// and driven by a real Peer (or, for what a Peer never sends, a raw
// stream), against a fake server: a Host that opens fake job queues, and
// a Memory with a limit. What a worker keeps per stream, what it answers
// each lease, and what it gives back.

// fakeQueue is a job's queue on the fake executor: a lease's batch is
// sampleBytes per sample, byte i of it pixel(i), each label 7; hold, when
// set, holds every Fill until it is closed (or the lease's context ends).
type fakeQueue struct {
	name string
	hold chan struct{}

	fills     atomic.Int32
	cancelled atomic.Int32 // Fills whose context ended while held
	closed    chan struct{}
	closeOnce sync.Once
}

func (q *fakeQueue) Fill(ctx context.Context, l *lease.Lease, b *pipeline.Batch) error {
	q.fills.Add(1)
	if q.hold != nil {
		select {
		case <-q.hold:
		case <-ctx.Done():
			q.cancelled.Add(1)
			return ctx.Err()
		}
	}
	n := len(l.Indices)
	b.N, b.Errors = n, b.Errors[:0]
	b.Data = b.Data[:0]
	for i := range n * sampleBytes {
		b.Data = append(b.Data, pixel(i))
	}
	b.Labels = append(b.Labels[:0], make([]int64, n)...)
	for i := range b.Labels {
		b.Labels[i] = 7
	}
	b.Indices = append(b.Indices[:0], l.Indices...)
	return nil
}

func (q *fakeQueue) Header(epoch uint64, k int, b *pipeline.Batch) (*stokerv1.BatchHeader, error) {
	return &stokerv1.BatchHeader{Epoch: epoch, Number: uint64(k), Labels: b.Labels, Indices: b.Indices, DataBytes: uint64(len(b.Data))}, nil
}

func (q *fakeQueue) BatchSize() int    { return 8 }
func (q *fakeQueue) SampleBytes() int  { return sampleBytes }
func (q *fakeQueue) StateBytes() int64 { return 1000 }
func (q *fakeQueue) Close()            { q.closeOnce.Do(func() { close(q.closed) }) }

// fakeHost is the worker's server: it opens a fakeQueue per job (or
// refuses every job with refuse), and keeps them.
type fakeHost struct {
	refuse error
	hold   chan struct{} // each queue's

	mu       sync.Mutex
	queues   []*fakeQueue
	refusals []string
	opened   chan *fakeQueue
}

func (h *fakeHost) Open(spec *stokerv1.JobSpec, name, _ string) (JobQueue, error) {
	if h.refuse != nil {
		return nil, h.refuse
	}
	q := &fakeQueue{name: name, hold: h.hold, closed: make(chan struct{})}
	h.mu.Lock()
	h.queues = append(h.queues, q)
	h.mu.Unlock()
	if h.opened != nil {
		h.opened <- q
	}
	return q, nil
}

// queue is the i'th queue opened; nil before.
func (h *fakeHost) queue(i int) *fakeQueue {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i < len(h.queues) {
		return h.queues[i]
	}
	return nil
}

// fills is how many Fills queue i has had.
func (h *fakeHost) fills(i int) int {
	if q := h.queue(i); q != nil {
		return int(q.fills.Load())
	}
	return 0
}

func (h *fakeHost) Refuse(policy, _ string, _ ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refusals = append(h.refusals, policy)
}

func (h *fakeHost) Status(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// fakeMemory is a stream's memory with a limit; held is what it holds.
type fakeMemory struct {
	limit atomic.Int64
	held  atomic.Int64
}

func newMemory(limit int64) *fakeMemory {
	m := &fakeMemory{}
	m.limit.Store(limit)
	return m
}

func (m *fakeMemory) Take(n int64, what string) error {
	if m.held.Add(n) > m.limit.Load() {
		m.held.Add(-n)
		return status.Errorf(codes.ResourceExhausted, "%s: %d bytes do not fit in %d", what, n, m.limit.Load())
	}
	return nil
}

func (m *fakeMemory) Release(n int64) { m.held.Add(-n) }

// workService serves Work streams with a Worker, each charged to mem;
// served receives each Serve's return.
type workService struct {
	stokerv1.UnimplementedWorkServiceServer
	w      *Worker
	mem    Memory
	served chan error
}

func (s *workService) Work(stream stokerv1.WorkService_WorkServer) error {
	err := s.w.Serve(stream, "stream", s.mem)
	s.served <- err
	return err
}

// workerScene is a Worker serving over bufconn.
type workerScene struct {
	host    *fakeHost
	mem     *fakeMemory
	metrics *WorkerMetrics
	drain   chan struct{}
	served  chan error
	lis     *bufconn.Listener
}

// startWorkerScene serves a Worker configured by cfg (Host, Metrics,
// Draining and what is zero filled in) over bufconn.
func startWorkerScene(t *testing.T, cfg WorkerConfig, mem *fakeMemory) *workerScene {
	t.Helper()
	s := &workerScene{mem: mem, metrics: NewWorkerMetrics(), drain: make(chan struct{}), served: make(chan error, 16), lis: bufconn.Listen(1 << 20)}
	s.host, _ = cfg.Host.(*fakeHost)
	if s.host == nil {
		s.host = &fakeHost{}
		cfg.Host = s.host
	}
	cfg.Metrics, cfg.Draining = s.metrics, s.drain
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Identity = pipeline.LocalIdentity()
	if cfg.Executors == 0 {
		cfg.Executors = 2
	}
	if cfg.MaxChunkBytes == 0 {
		cfg.MaxChunkBytes = 4 // several chunks a batch
	}
	for _, d := range []*time.Duration{&cfg.FirstMessageTimeout, &cfg.IdleTimeout, &cfg.JobIdle} {
		if *d == 0 {
			*d = hangGuard
		}
	}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(rpc.Codec))
	stokerv1.RegisterWorkServiceServer(gs, &workService{w: NewWorker(cfg), mem: mem, served: s.served})
	go gs.Serve(s.lis)
	t.Cleanup(gs.Stop)
	return s
}

func (s *workerScene) dialer() grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return s.lis.DialContext(ctx) })
}

// peer is a Peer of the scene's worker, ready.
func (s *workerScene) peer(t *testing.T) *Peer {
	t.Helper()
	return dialReady(t, "bufnet", WithDialOptions(s.dialer()))
}

// raw is a raw Work stream to the scene's worker, its WorkerInfo read.
func (s *workerScene) raw(t *testing.T) stokerv1.WorkService_WorkClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///bufnet", s.dialer(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := stokerv1.NewWorkServiceClient(conn).Work(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetWorker() == nil {
		t.Fatalf("first answer %v, %v; want WorkerInfo", m, err)
	}
	return st
}

// leases is the worker's stoker_work_leases_total for outcome.
func (s *workerScene) leases(outcome string) float64 {
	return testutil.ToFloat64(s.metrics.Leases.WithLabelValues(outcome))
}

// eventually waits until ok, failing the test if it does not come within
// hangGuard.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	waitfor.Wait{Within: hangGuard, Every: time.Millisecond}.Until(t, what, ok)
}

// made checks that b is the fake queue's batch of l's samples.
func madeBatch(t *testing.T, l *lease.Lease, b *pipeline.Batch) {
	t.Helper()
	want := make([]byte, len(l.Indices)*sampleBytes)
	for i := range want {
		want[i] = pixel(i)
	}
	if b.N != len(l.Indices) || !bytes.Equal(b.Data, want) || len(b.Labels) != b.N || b.Labels[0] != 7 {
		t.Errorf("batch %d: %d samples, %d bytes, labels %v; want the queue's %d samples", l.Number, b.N, len(b.Data), b.Labels, len(l.Indices))
	}
}

// TestWorkerMakesLeases: leases of two jobs on one stream are made on
// their jobs' queues and come back whole, in chunks; each job's state is
// charged to the stream's memory while it is kept; a job its coordinator
// ends (JobEnd) has its queue closed; when the stream ends, every byte it
// was charged is given back.
func TestWorkerMakesLeases(t *testing.T) {
	mem := newMemory(1 << 20)
	s := startWorkerScene(t, WorkerConfig{}, mem)
	p := s.peer(t)
	a, b := job(&stokerv1.JobSpec{Dataset: "a"}), job(&stokerv1.JobSpec{Dataset: "b"})
	for k := range 6 {
		j := a
		if k%2 == 1 {
			j = b
		}
		l := leaseK(k)
		var batch pipeline.Batch
		if _, err := p.Make(context.Background(), j, l, &batch); err != nil {
			t.Fatalf("lease %d: %v", k, err)
		}
		madeBatch(t, l, &batch)
	}
	if n := s.host.fills(0) + s.host.fills(1); s.host.queue(2) != nil || n != 6 || s.leases("done") != 6 || testutil.ToFloat64(s.metrics.Jobs) != 2 {
		t.Fatalf("%d leases filled on the queues, %v done, %v jobs; want 6 on 2 queues, 6, 2", n, s.leases("done"), testutil.ToFloat64(s.metrics.Jobs))
	}
	if held := mem.held.Load(); held < 2*(1000+jobBytes) {
		t.Errorf("the stream holds %d bytes, less than its two jobs' state", held)
	}
	p.Forget(a)
	within(t, "closed queue of the job ended", s.host.queue(0).closed)
	eventually(t, "job ended", func() bool { return testutil.ToFloat64(s.metrics.Jobs) == 1 })
	select {
	case <-s.host.queue(1).closed:
		t.Error("the other job's queue was closed")
	default:
	}
	p.Close()
	if err := within(t, "end of the stream", s.served); err != nil {
		t.Errorf("the stream ended with %v, want cleanly", err)
	}
	within(t, "closed queue of the job left", s.host.queue(1).closed)
	if held := mem.held.Load(); held != 0 {
		t.Errorf("%d bytes still charged to the stream after it ended", held)
	}
}

// TestWorkerRefusesJob: a job its server will not open is refused: each
// of its leases fails with the server's status (lease.ErrRefused on the
// coordinator's side), and the stream goes on.
func TestWorkerRefusesJob(t *testing.T) {
	host := &fakeHost{refuse: status.Error(codes.NotFound, "no dataset named nope")}
	s := startWorkerScene(t, WorkerConfig{Host: host}, newMemory(1<<20))
	p := s.peer(t)
	j := job(&stokerv1.JobSpec{Dataset: "nope"})
	for k := range 3 {
		_, err := p.Make(context.Background(), j, leaseK(k), &pipeline.Batch{})
		if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "no dataset named nope") {
			t.Fatalf("lease %d of a refused job: %v, want lease.ErrRefused saying why", k, err)
		}
	}
	if s.leases("failed") != 3 || p.Streams() != 1 || !p.Ready() {
		t.Errorf("%v leases failed on %d streams (ready %v); want 3 on one, still up", s.leases("failed"), p.Streams(), p.Ready())
	}
}

// TestWorkerLimits: a stream takes at most MaxLeases leases in flight, and
// a lease whose batch does not fit in the stream's memory: past them a
// lease is turned away (RESOURCE_EXHAUSTED: lease.ErrBusy on the
// coordinator's side, not a failure), and the stream goes on. A lease
// with no samples, or more than the job's batch, is refused.
func TestWorkerLimits(t *testing.T) {
	hold := make(chan struct{})
	mem := newMemory(1 << 20)
	s := startWorkerScene(t, WorkerConfig{Host: &fakeHost{hold: hold}, Executors: 1}, mem)
	p := s.peer(t)
	j := job(&stokerv1.JobSpec{Dataset: "a"})
	limit := MaxLeases(1)
	var wg sync.WaitGroup
	errs := make(chan error, limit)
	for k := range limit {
		wg.Go(func() {
			_, err := p.Make(context.Background(), j, leaseK(k), &pipeline.Batch{})
			errs <- err
		})
	}
	eventually(t, "leases held on the queue", func() bool { return s.host.fills(0) == limit })
	// The Peer counts the worker's limit itself: a raw stream goes past it.
	st := s.raw(t)
	send := func(m *stokerv1.WorkRequest) {
		t.Helper()
		if err := st.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(id uint64) *stokerv1.LeaseFailed {
		t.Helper()
		m, err := st.Recv()
		if err != nil || m.GetFailed().GetLease() != id {
			t.Fatalf("answer to lease %d: %v, %v; want LeaseFailed", id, m, err)
		}
		return m.GetFailed()
	}
	send(&stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Job{Job: &stokerv1.WorkJob{Id: 1, Spec: &stokerv1.JobSpec{Dataset: "a"}}}})
	for id := range uint64(limit) {
		send(&stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Lease{Lease: &stokerv1.Lease{Id: 10 + id, Job: 1, Indices: []int64{1}}}})
	}
	eventually(t, "the raw stream's leases held", func() bool { return s.host.fills(1) == limit })
	send(&stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Lease{Lease: &stokerv1.Lease{Id: 99, Job: 1, Indices: []int64{1}}}})
	if f := answer(99); codes.Code(f.GetCode()) != codes.ResourceExhausted || !strings.Contains(f.GetMessage(), "leases in flight") {
		t.Errorf("a lease past the limit: %v, want RESOURCE_EXHAUSTED", f)
	}
	for _, n := range []int{0, 9} {
		send(&stokerv1.WorkRequest{Msg: &stokerv1.WorkRequest_Lease{Lease: &stokerv1.Lease{Id: 100 + uint64(n), Job: 1, Indices: make([]int64, n)}}})
		if f := answer(100 + uint64(n)); codes.Code(f.GetCode()) != codes.InvalidArgument {
			t.Errorf("a lease of %d samples for a batch of 8: %v, want INVALID_ARGUMENT", n, f)
		}
	}
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a lease within the limit: %v", err)
		}
	}

	// A batch larger than the stream's memory has room for.
	mem.limit.Store(mem.held.Load()) // no room to grow a slot
	_, err := p.Make(context.Background(), j, &lease.Lease{Indices: make([]int64, 8)}, &pipeline.Batch{})
	if !errors.Is(err, lease.ErrBusy) || !strings.Contains(err.Error(), "batch of 8 samples") {
		t.Errorf("a batch past the memory: %v, want lease.ErrBusy naming it", err)
	}
	l := leaseK(1)
	var b pipeline.Batch
	if _, err := p.Make(context.Background(), j, l, &b); err != nil {
		t.Fatalf("a small lease after: %v", err)
	}
	madeBatch(t, l, &b)
	if p.Streams() != 1 {
		t.Errorf("%d streams opened, want the one", p.Streams())
	}
}

// TestWorkerCancelsLease: a lease the coordinator gives up on is
// cancelled at the worker (CancelLease): its Fill's context ends, nothing
// is sent for it, and the stream's next lease is made.
func TestWorkerCancelsLease(t *testing.T) {
	hold := make(chan struct{})
	s := startWorkerScene(t, WorkerConfig{Host: &fakeHost{hold: hold}}, newMemory(1<<20))
	p := s.peer(t)
	j := job(&stokerv1.JobSpec{Dataset: "a"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Make(ctx, j, leaseK(0), &pipeline.Batch{})
		done <- err
	}()
	eventually(t, "the lease held", func() bool { return s.host.fills(0) == 1 })
	cancel()
	if err := within(t, "the lease's end", done); !errors.Is(err, context.Canceled) {
		t.Errorf("a lease given up on: %v, want context.Canceled", err)
	}
	q := s.host.queue(0)
	eventually(t, "the cancellation at the worker", func() bool { return q.cancelled.Load() == 1 && s.leases("cancelled") == 1 })
	close(hold)
	l := leaseK(1)
	var b pipeline.Batch
	if _, err := p.Make(context.Background(), j, l, &b); err != nil {
		t.Fatal(err)
	}
	madeBatch(t, l, &b)
	if s.leases("done") != 1 || s.leases("failed") != 0 {
		t.Errorf("%v leases done, %v failed; want the second alone, done", s.leases("done"), s.leases("failed"))
	}
}

// TestWorkerDrains: when its server drains, a stream turns new leases
// away (UNAVAILABLE: lease.ErrDraining), finishes the leases in flight,
// and then ends cleanly.
func TestWorkerDrains(t *testing.T) {
	hold := make(chan struct{})
	s := startWorkerScene(t, WorkerConfig{Host: &fakeHost{hold: hold}}, newMemory(1<<20))
	p := s.peer(t)
	j := job(&stokerv1.JobSpec{Dataset: "a"})
	l := leaseK(0)
	var b pipeline.Batch
	done := make(chan error, 1)
	go func() {
		_, err := p.Make(context.Background(), j, l, &b)
		done <- err
	}()
	eventually(t, "the lease held", func() bool { return s.host.fills(0) == 1 })
	close(s.drain)
	eventually(t, "a lease turned away", func() bool {
		_, err := p.Make(context.Background(), j, leaseK(1), &pipeline.Batch{})
		return errors.Is(err, lease.ErrDraining)
	})
	select {
	case err := <-s.served:
		t.Fatalf("the stream ended (%v) with a lease in flight", err)
	default:
	}
	close(hold)
	if err := within(t, "the lease in flight", done); err != nil {
		t.Fatalf("the lease in flight as the worker drains: %v", err)
	}
	madeBatch(t, &lease.Lease{Number: 0, Indices: l.Indices}, &b)
	if err := within(t, "the stream's end", s.served); err != nil {
		t.Errorf("a drained stream ended with %v, want cleanly", err)
	}
}

// TestWorkerEndsIdleJob: a job no lease names for JobIdle is ended (its
// queue closed); its next lease is answered ABORTED (lease.ErrBusy: the
// Peer registers it again), and the one after is made on a new queue.
func TestWorkerEndsIdleJob(t *testing.T) {
	host := &fakeHost{opened: make(chan *fakeQueue, 64)}
	s := startWorkerScene(t, WorkerConfig{Host: host, JobIdle: 20 * time.Millisecond}, newMemory(1<<20))
	p := s.peer(t)
	j := job(&stokerv1.JobSpec{Dataset: "a"})
	// made makes l as a coordinator would: a lease turned away as busy
	// (ABORTED: on a loaded machine, the job can idle out between its
	// registration and its lease) is leased again.
	made := func(l *lease.Lease, b *pipeline.Batch) {
		t.Helper()
		eventually(t, "the lease made", func() bool {
			_, err := p.Make(context.Background(), j, l, b)
			if err != nil && !errors.Is(err, lease.ErrBusy) {
				t.Fatal(err)
			}
			return err == nil
		})
	}
	made(leaseK(0), &pipeline.Batch{})
	for len(host.opened) > 1 { // opened again after an idle end, then made
		<-host.opened
	}
	first := within(t, "a queue", host.opened)
	within(t, "the idle job's end", first.closed)
	eventually(t, "no job kept", func() bool { return testutil.ToFloat64(s.metrics.Jobs) == 0 })
	if _, err := p.Make(context.Background(), j, leaseK(1), &pipeline.Batch{}); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("a lease of the job ended: %v, want lease.ErrBusy (ABORTED)", err)
	}
	l := leaseK(2)
	var b pipeline.Batch
	made(l, &b)
	madeBatch(t, l, &b)
	if second := within(t, "a second queue", host.opened); second == first {
		t.Error("the job's lease after its end went to its old queue")
	}
}

// TestWorkerProtocolErrors: what a coordinator that breaks the protocol
// gets: a stream with no first request within FirstMessageTimeout ends
// with DEADLINE_EXCEEDED (refusal counted); a lease naming a job never
// registered, or a job registered out of order, ends the stream with
// INVALID_ARGUMENT.
func TestWorkerProtocolErrors(t *testing.T) {
	t.Run("silent", func(t *testing.T) {
		s := startWorkerScene(t, WorkerConfig{FirstMessageTimeout: 20 * time.Millisecond}, newMemory(1<<20))
		st := s.raw(t)
		if _, err := st.Recv(); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("a silent stream: %v, want DEADLINE_EXCEEDED", err)
		}
		s.host.mu.Lock()
		r := s.host.refusals
		s.host.mu.Unlock()
		if len(r) != 1 || r[0] != "work_first_message_timeout" {
			t.Errorf("refusals %v", r)
		}
	})
	for _, tc := range []struct {
		name string
		reqs []*stokerv1.WorkRequest
	}{
		{"lease of no job", []*stokerv1.WorkRequest{{Msg: &stokerv1.WorkRequest_Lease{Lease: &stokerv1.Lease{Id: 1, Job: 3, Indices: []int64{1}}}}}},
		{"jobs out of order", []*stokerv1.WorkRequest{
			{Msg: &stokerv1.WorkRequest_Job{Job: &stokerv1.WorkJob{Id: 2, Spec: &stokerv1.JobSpec{}}}},
			{Msg: &stokerv1.WorkRequest_Job{Job: &stokerv1.WorkJob{Id: 1, Spec: &stokerv1.JobSpec{}}}},
		}},
		{"end of no job", []*stokerv1.WorkRequest{{Msg: &stokerv1.WorkRequest_End{End: &stokerv1.JobEnd{Id: 5}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startWorkerScene(t, WorkerConfig{}, newMemory(1<<20))
			st := s.raw(t)
			for _, r := range tc.reqs {
				if err := st.Send(r); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%s: %v, want INVALID_ARGUMENT", tc.name, err)
			}
			if err := within(t, "the stream's end", s.served); status.Code(err) != codes.InvalidArgument {
				t.Errorf("Serve returned %v", err)
			}
		})
	}
}

// TestWorkerSaysWhatItIs: a stream opens with the worker's WorkerInfo: its
// executors, its lease limit, its chunk size, its decoder and its idle
// timeout.
func TestWorkerSaysWhatItIs(t *testing.T) {
	s := startWorkerScene(t, WorkerConfig{Executors: 3, IdleTimeout: time.Minute, MaxChunkBytes: 1 << 20}, newMemory(1<<20))
	conn, err := grpc.NewClient("passthrough:///bufnet", s.dialer(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := stokerv1.NewWorkServiceClient(conn).Work(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	info := m.GetWorker()
	want := fmt.Sprint(3, MaxLeases(3), 1<<20, time.Minute.Milliseconds(), true)
	if got := fmt.Sprint(info.GetWorkers(), info.GetMaxLeases(), info.GetMaxChunkBytes(), info.GetIdleTimeoutMs(),
		pipeline.LocalIdentity().SameOutput(identityOf(info.GetDecoder())) == nil); got != want {
		t.Errorf("WorkerInfo %v: workers, max leases, chunk bytes, idle ms, same decoder %s; want %s", info, got, want)
	}
}
