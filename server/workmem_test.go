package server

import (
	"context"
	"net"
	"runtime"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/makers"
)

// heapBytes is this process's live Go heap: what is left after two
// collections (the second empties the pools the first only aged).
func heapBytes() int64 {
	runtime.GC()
	runtime.GC()
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// padded is spec with n bytes of a field no stoker knows (as a hostile or
// a newer client may send), and a few more in its transform.
func padded(spec *pb.JobSpec, n int) *pb.JobSpec {
	s := proto.CloneOf(spec)
	unknown := func(n int) []byte {
		b := protowire.AppendTag(nil, 1000, protowire.BytesType)
		return protowire.AppendBytes(b, make([]byte, n))
	}
	s.ProtoReflect().SetUnknown(unknown(n))
	s.Transform.ProtoReflect().SetUnknown(unknown(64))
	return s
}

// workFrom opens a Work stream to e from the local address ip (a client
// host of its own on loopback), on a connection of its own, and reads its
// WorkerInfo.
func workFrom(t *testing.T, ctx context.Context, e *testEnv, ip string) (pb.WorkService_WorkClient, *grpc.ClientConn) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn := dial(t, e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	s, err := pb.NewWorkServiceClient(conn).Work(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := s.Recv(); err != nil || m.GetWorker() == nil {
		t.Fatalf("first message: %v, %v; want WorkerInfo", m, err)
	}
	return s, conn
}

// register sends n jobs, ids first.., on s, each spec, until the stream
// breaks, and returns how many went.
func register(s pb.WorkService_WorkClient, first uint64, n int, spec *pb.JobSpec) int {
	sent := 0
	for id := first; sent < n; id++ {
		if err := s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: id, Spec: spec}}}); err != nil {
			break
		}
		sent++
	}
	return sent
}

// TestWorkJobFlood: a Work client registering jobs whose specs carry 0.9
// MB of unknown fields each (issue 27: two streams of 1,000 such jobs held
// 1.7 GiB under a 1 GB budget) is charged a few KiB per job, its specs'
// known fields alone being kept: the server's heap grows by no more than
// it charged. Past its share (--max-work-memory-per-client), the job that
// does not fit ends its stream with RESOURCE_EXHAUSTED saying what, how
// much and which limit; when its streams end, every byte is given back,
// to the budget and to the heap.
func TestWorkJobFlood(t *testing.T) {
	const share = 512 << 10
	e := newEnv(t, Config{Workers: 1, MaxWorkMemoryPerClient: share})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := padded(smallJob("tiny", 4).GetJob(), 900_000)
	if n := proto.Size(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 1, Spec: spec}}}); n < 900_000 || n > maxRecvMsgBytes {
		t.Fatalf("a registration of %d bytes: want 0.9 MB, within the server's message limit", n)
	}
	a, aconn := workFrom(t, ctx, e, "127.0.0.1")
	base := heapBytes()
	const kept = 78 // 78 × 0.9 MB = 70 MB if the unknown fields were kept; room for a lease after them
	register(a, 1, kept, spec)
	waitUntil(t, "the jobs registered", func() bool { return e.workJobs() == kept })
	held := e.srv.workMem.heldBy("host 127.0.0.1")
	grown := heapBytes() - base
	t.Logf("%d jobs: %d bytes charged (%d a job), the heap grew %d bytes", kept, held, held/kept, grown)
	if held > share || held < kept*makers.ExecJobBytes {
		t.Errorf("%d jobs charged %d bytes; want at least %d a job, within the share of %d", kept, held, makers.ExecJobBytes, share)
	}
	// The heap's growth is what was charged, and a little of gRPC's:
	// megabytes under what keeping the unknown fields would hold.
	if grown > held+4<<20 {
		t.Errorf("the heap grew %d bytes for %d jobs charged %d bytes", grown, kept, held)
	}

	// A second stream of the same client shares its share: it is cut at
	// the job that does not fit.
	b, bconn := workFrom(t, ctx, e, "127.0.0.1")
	sent := register(b, 1, 1000, spec)
	err := recvUntilErr(b)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-work-memory-per-client") || !strings.Contains(err.Error(), "state needs") {
		t.Fatalf("registering past the client's share (%d sent): %v; want RESOURCE_EXHAUSTED naming the flag and the bytes", sent, err)
	}
	t.Logf("second stream: %v", err)
	if held := e.srv.workMem.heldBy("host 127.0.0.1"); held > share {
		t.Errorf("the client holds %d bytes, over its share of %d", held, share)
	}
	if got := testutil.ToFloat64(e.srv.m.refusals.WithLabelValues("work_memory_per_client")); got < 1 {
		t.Errorf("%v refusals counted as work_memory_per_client", got)
	}

	// The first stream is unharmed: once the second one's jobs are given
	// back, a lease of its jobs is made.
	waitUntil(t, "the second stream's jobs given back", func() bool { return e.srv.workMem.heldBy("host 127.0.0.1") == held })
	a.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 1000, Job: kept, Indices: []int64{0, 1}}}})
	if m, err := a.Recv(); err != nil || m.GetDone().GetLease() != 1000 {
		t.Fatalf("a lease on the first stream: %v, %v", m, err)
	}
	a.CloseSend()
	recvUntilErr(a)
	waitUntil(t, "the client's memory given back", func() bool {
		return e.srv.workMem.heldBy("host 127.0.0.1") == 0 && e.srv.budget.InUse() == 0 && e.workJobs() == 0 &&
			testutil.ToFloat64(e.srv.m.workMemory) == 0
	})
	// The client's side (this process) lets go of what it still had to
	// send once its connections close.
	aconn.Close()
	bconn.Close()
	if after := heapBytes() - base; after > 4<<20 {
		t.Errorf("%d bytes of heap still held after the streams ended", after)
	}
}

// TestWorkMemoryBudget: the share of each client host is within the
// server's budget, which all of them share: a second host is refused by
// the budget, not by its share, and the message says so.
func TestWorkMemoryBudget(t *testing.T) {
	e := newEnv(t, Config{Workers: 1, MemoryBudget: 4 << 20, MaxWorkMemoryPerClient: 2 << 20})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec := padded(smallJob("tiny", 4).GetJob(), 1000)
	// Host 1 keeps 300 jobs of about 5.4 KB: 1.6 of the batch budget's 3
	// MiB; host 2 is refused when the budget is spent, before its share.
	a, _ := workFrom(t, ctx, e, "127.0.0.1")
	register(a, 1, 300, spec)
	waitUntil(t, "host 1's jobs registered", func() bool { return e.workJobs() == 300 })
	b, _ := workFrom(t, ctx, e, "127.0.0.2")
	register(b, 1, 10000, spec)
	err := recvUntilErr(b)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--memory-budget") {
		t.Fatalf("host 2: %v; want the server's budget refusing", err)
	}
	t.Logf("host 2: %v", err)
	a.CloseSend()
	recvUntilErr(a)
	waitUntil(t, "the clients' memory given back", func() bool { return e.srv.budget.InUse() == 0 && e.workJobs() == 0 })
}

// TestWorkBuffersCharged: the batch buffers a Work stream keeps for its
// next leases are charged while kept, and dropped (their bytes given
// back) once the stream stops leasing; a lease whose batch does not fit
// the client's share is refused (RESOURCE_EXHAUSTED: busy, lease it
// again), the stream goes on.
func TestWorkBuffersCharged(t *testing.T) {
	const share = 64 << 10
	// The stream drops its kept buffers at its first tick that finds no
	// lease since the one before; with the default timeouts its ticks are
	// a second apart (with a first-message timeout of 200 ms they were 50
	// ms), so the check right after a lease is a second ahead of the drop.
	e := newEnv(t, Config{Workers: 2, MaxWorkMemoryPerClient: share})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, _ := workFrom(t, ctx, e, "127.0.0.1")
	spec := smallJob("tiny", 8).GetJob() // 32x32x3 a sample
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 1, Spec: spec}}})
	waitUntil(t, "the job registered", func() bool { return e.workJobs() == 1 })
	job := e.srv.workMem.heldBy("host 127.0.0.1")
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 2, Job: 1, Indices: []int64{0, 1, 2, 3}}}})
	if m, err := s.Recv(); err != nil || m.GetDone().GetLease() != 2 {
		t.Fatalf("lease 2: %v, %v", m, err)
	}
	if _, err := s.Recv(); err != nil { // its chunk
		t.Fatal(err)
	}
	if held := e.srv.workMem.heldBy("host 127.0.0.1"); held < job+4*32*32*3 {
		t.Errorf("%d bytes held with a 4-sample buffer kept, want at least %d", held, job+4*32*32*3)
	}
	waitUntil(t, "the idle stream's buffers dropped", func() bool { return e.srv.workMem.heldBy("host 127.0.0.1") == job })
	// Batches of 8 samples of 3 KiB: with the jobs' state, two leases of
	// them in flight fit the 64 KiB share (each in a buffer of its own),
	// a third does not.
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 3, Spec: spec}}})
	for id := uint64(4); id < 7; id++ {
		s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: id, Job: 3, Indices: []int64{0, 1, 2, 3, 4, 5, 6, 7}}}})
	}
	var refused error
	for done := 0; done+boolInt(refused != nil) < 3; {
		m, err := s.Recv()
		switch {
		case err != nil:
			t.Fatal(err)
		case m.GetFailed() != nil:
			refused = status.Error(codes.Code(m.GetFailed().GetCode()), m.GetFailed().GetMessage())
		case m.GetDone() != nil:
			done++
		}
	}
	if status.Code(refused) != codes.ResourceExhausted || !strings.Contains(refused.Error(), "--max-work-memory-per-client") || !strings.Contains(refused.Error(), "batch of 8 samples") {
		t.Errorf("a lease past the share: %v", refused)
	}
	if held := e.srv.workMem.heldBy("host 127.0.0.1"); held > share {
		t.Errorf("%d bytes held, over the share of %d", held, share)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWorkJobBytes: what a Work job is charged covers what it holds, its
// executor queue and its place in the stall schedule included (each of
// 500 jobs leased once); and jobs that stopped leasing cost no CPU: no
// goroutine of their own, and the stall schedule's rebalances leave them
// out (issue 27: 262,144 idle jobs took 0.26 of a core).
func TestWorkJobBytes(t *testing.T) {
	const n = 500
	e := newEnv(t, Config{Workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, _ := workFrom(t, ctx, e, "127.0.0.1")
	spec := smallJob("tiny", 1).GetJob()
	goroutines := runtime.NumGoroutine()
	base := heapBytes()
	register(s, 1, n, spec)
	for id := uint64(1); id <= n; id++ {
		s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: n + id, Job: id, Indices: []int64{int64(id % dsSize)}}}})
		// LeaseDone and its chunk (none for the bad sample), before the
		// next: one lease in flight.
		m, err := s.Recv()
		if err != nil || m.GetDone() == nil {
			t.Fatalf("lease of job %d: %v, %v", id, m, err)
		}
		if m.GetDone().GetBatch().GetDataBytes() > 0 {
			if _, err := s.Recv(); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := e.srv.workMem.heldBy("host 127.0.0.1")
	grown := heapBytes() - base
	t.Logf("%d jobs leased once: %d bytes charged (%d a job), the heap grew %d (%d a job)", n, held, held/n, grown, grown/n)
	if grown > held {
		t.Errorf("the heap grew %d bytes for %d jobs charged %d", grown, n, held)
	}
	waitUntil(t, "the idle jobs out of the rebalances", func() bool {
		held, awake := e.srv.shares.Queues()
		return held == n && awake == 0
	})
	if g := runtime.NumGoroutine(); g > goroutines+2 {
		t.Errorf("%d goroutines with %d idle jobs, %d before", g, n, goroutines)
	}
}
