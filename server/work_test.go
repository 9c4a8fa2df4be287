package server

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/internal/waitfor"
	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	jobpkg "github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/plan"
)

// waitUntil polls cond until it holds, failing the test after hangGuard
// (with the goroutines' stacks: what waits is often what is wrong).
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitUntilState(t, what, nil, cond)
}

// waitUntilState is waitUntil saying, when it fails, what state says then.
func waitUntilState(t testing.TB, what string, state func() string, cond func() bool) {
	t.Helper()
	waitfor.Wait{Within: hangGuard, State: state, Stacks: true, Every: 10 * time.Millisecond}.Until(t, what, cond)
}

// workJobs is how many jobs e holds state for as a worker, by its gauge.
func (e *testEnv) workJobs() int { return int(testutil.ToFloat64(e.srv.m.work.Jobs)) }

// sharesHeld is how many queues the stall schedule weighs.
func (e *testEnv) sharesHeld() int {
	held, _ := e.srv.shares.Queues()
	return held
}

// openWork opens a Work stream to e and reads its WorkerInfo.
func openWork(t *testing.T, ctx context.Context, e *testEnv) (pb.WorkService_WorkClient, *pb.WorkerInfo) {
	t.Helper()
	s, err := pb.NewWorkServiceClient(dial(t, e.addr)).Work(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Recv()
	if err != nil || m.GetWorker() == nil {
		t.Fatalf("first message: %v, %v; want WorkerInfo", m, err)
	}
	return s, m.GetWorker()
}

// recvUntilErr reads a stream until it fails.
func recvUntilErr(s pb.WorkService_WorkClient) error {
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
}

// TestWorkJobsEnd: the jobs a coordinator leased to its peers end on the
// workers when its trainer's stream ends (JobEnd): their gauge returns to
// 0 and they leave the stall schedule.
func TestWorkJobsEnd(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	ws, addrs := peers(t, root, 2)
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addrs})
	waitPeers(t, coord, 2)
	for range 3 {
		checkOnce(t, coord.collect(t, smallJob("tiny", 4)), plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 4}))
	}
	for _, w := range ws {
		if testutil.ToFloat64(w.srv.m.work.Leases.WithLabelValues("done")) == 0 {
			t.Errorf("worker %s made no batch", w.addr)
		}
		waitUntil(t, "the worker's jobs ended", func() bool { return w.workJobs() == 0 && w.sharesHeld() == 0 })
	}
}

// TestWorkJobIdle: a job no lease names for a while ends on the worker;
// a later lease of it fails with ABORTED (register it again), not the
// stream; JobEnd of it then is no error, and ids must increase.
func TestWorkJobIdle(t *testing.T) {
	// The job's idle time is what the test waits for, not a bound on
	// anything measured. At 100 ms a worker slow to read the lease sent
	// right after a job's registration could end the job in between; a
	// second between two messages read back to back is a stall, not load.
	e := newEnv(t, Config{Workers: 1, WorkJobIdle: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, info := openWork(t, ctx, e)
	if info.GetDecoder().GetOutputVersion() != pipeline.OutputVersion || info.GetIdleTimeoutMs() != uint32(DefaultWorkIdleTimeout.Milliseconds()) {
		t.Errorf("WorkerInfo %v: want the decoder's identity and the idle timeout", info)
	}
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 1, Spec: smallJob("tiny", 4).GetJob()}}})
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 2, Job: 1, Indices: []int64{0, 1}}}})
	if m, err := s.Recv(); err != nil || m.GetDone().GetLease() != 2 {
		t.Fatalf("lease 2: %v, %v", m, err)
	}
	for range 1 { // its chunk
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the idle job ended", func() bool { return e.workJobs() == 0 && e.sharesHeld() == 0 })
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 3, Job: 1, Indices: []int64{0, 1}}}})
	if m, err := s.Recv(); err != nil || m.GetFailed().GetLease() != 3 || codes.Code(m.GetFailed().GetCode()) != codes.Aborted {
		t.Fatalf("lease of the ended job: %v, %v; want LeaseFailed ABORTED", m, err)
	}
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_End{End: &pb.JobEnd{Id: 1}}})
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 4, Spec: smallJob("tiny", 4).GetJob()}}})
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 5, Job: 4, Indices: []int64{0, 1}}}})
	if m, err := s.Recv(); err != nil || m.GetDone().GetLease() != 5 {
		t.Fatalf("lease 5 of the job registered again: %v, %v", m, err)
	}
	// Registering an id not above the last breaks the protocol.
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 4, Spec: smallJob("tiny", 4).GetJob()}}})
	if err := recvUntilErr(s); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "ids increase") {
		t.Errorf("job id 4 again: %v, want InvalidArgument", err)
	}
	waitUntil(t, "the stream's jobs ended", func() bool { return e.workJobs() == 0 })
}

// TestWorkStreamTimeouts: a Work stream that sends nothing is ended after
// the first-message timeout, one that goes quiet after the idle timeout,
// each with DEADLINE_EXCEEDED naming its flag. Each waits on a server of
// its own: the quiet stream's first message (after WorkerInfo) is not
// raced against a short first-message timeout.
func TestWorkStreamTimeouts(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	e := newEnv(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, FirstMessageTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	silent, _ := openWork(t, ctx, e)
	if err := recvUntilErr(silent); status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "--first-message-timeout") {
		t.Errorf("silent stream: %v", err)
	}
	e = newEnv(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, FirstMessageTimeout: hangGuard, WorkIdleTimeout: 300 * time.Millisecond})
	quiet, info := openWork(t, ctx, e)
	if info.GetIdleTimeoutMs() != 300 {
		t.Errorf("idle timeout %d ms announced, want 300", info.GetIdleTimeoutMs())
	}
	quiet.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Ping{Ping: &pb.WorkPing{}}})
	if err := recvUntilErr(quiet); status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "--work-idle-timeout") {
		t.Errorf("quiet stream: %v", err)
	}
}

// TestAcceptWork: --accept-work=false refuses Work streams; a server with
// peers (a coordinator) refuses them unless told otherwise.
func TestAcceptWork(t *testing.T) {
	no, yes := false, true
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	_, addrs := peers(t, root, 1)
	for _, tc := range []struct {
		name string
		cfg  Config
		want codes.Code
	}{
		{"off", Config{Workers: 1, AcceptWork: &no}, codes.FailedPrecondition},
		{"coordinator", Config{Workers: 1, Peers: addrs}, codes.FailedPrecondition},
		{"coordinator told to", Config{Workers: 1, Peers: addrs, AcceptWork: &yes}, codes.OK},
		{"worker", Config{Workers: 1}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Datasets = map[string]string{"tiny": root}
			e := startServer(t, tc.cfg)
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			s, err := pb.NewWorkServiceClient(dial(t, e.addr)).Work(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Recv()
			if status.Code(err) != tc.want || tc.want != codes.OK && !strings.Contains(err.Error(), "--accept-work=false") {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestSilentWorkStreams: 256 Work streams that send nothing (issue 15: they
// filled --max-streams and locked every trainer out for as long as they
// stayed open) leave a trainer's Feed alone and are capped per client and
// in all; once they close, their goroutines go. (TestWorkStreamTimeouts:
// the first-message timeout closes such streams.)
func TestSilentWorkStreams(t *testing.T) {
	const n = 256
	e := newEnv(t, Config{Workers: 1, MaxStreams: 4, MaxWorkStreams: n, MaxWorkStreamsPerClient: n, FirstMessageTimeout: time.Minute})
	conn := dial(t, e.addr)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	sctx, closeStreams := context.WithCancel(ctx)
	for _, c := range []pb.FeedServiceClient{pb.NewFeedServiceClient(conn), e.client} { // the connections' goroutines start
		if _, err := c.ListDatasets(ctx, &pb.ListDatasetsRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()
	work := pb.NewWorkServiceClient(conn)
	var streams []pb.WorkService_WorkClient
	for range n + 1 {
		s, err := work.Work(sctx)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	opened, refused := 0, 0
	for _, s := range streams {
		m, err := s.Recv()
		switch {
		case err == nil && m.GetWorker() != nil:
			opened++
		case status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "--max-work-streams"):
			refused++
		default:
			t.Fatalf("got %v, %v", m, err)
		}
	}
	if opened != n || refused != 1 {
		t.Errorf("%d Work streams opened, %d refused; want %d and 1", opened, refused, n)
	}
	// A trainer is not locked out while they are open.
	checkOnce(t, e.collect(t, smallJob("tiny", 8)), plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 8}))
	e.srv.workStreams.mu.Lock()
	open := e.srv.workStreams.n
	e.srv.workStreams.mu.Unlock()
	if open != n {
		t.Errorf("%d Work streams open during the Feed, want %d", open, n)
	}
	closeStreams()
	waitUntil(t, "the silent streams' goroutines gone", func() bool { return runtime.NumGoroutine() <= before+2 })
	if got := testutil.ToFloat64(e.srv.m.refusals.WithLabelValues("max_work_streams")); got != 1 {
		t.Errorf("%v refusals counted as max_work_streams, want 1", got)
	}

	// Per client, the default cap holds.
	e2 := newEnv(t, Config{Workers: 1})
	work2 := pb.NewWorkServiceClient(dial(t, e2.addr))
	var errs []error
	for range DefaultMaxWorkStreamsPerClient + 1 {
		s, err := work2.Work(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Recv()
		errs = append(errs, err)
	}
	if err := errors.Join(errs[:DefaultMaxWorkStreamsPerClient]...); err != nil {
		t.Errorf("streams under the per-client cap: %v", err)
	}
	if err := errs[DefaultMaxWorkStreamsPerClient]; status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-work-streams-per-client") {
		t.Errorf("one stream past the per-client cap: %v", err)
	}
}

// TestWorkJobScratchRefusedAtOpen: a job a coordinator registers on a
// Work stream, one of whose samples needs more worker scratch than the
// worker's budget could give it (AugMix's state and warps' buffers at its
// 256x256 output's size, its largest file's read buffer), though a batch
// of it would fit, is refused when
// it is registered, as a Feed stream's job is at open: its lease fails
// RESOURCE_EXHAUSTED naming --memory-budget, no sample of it is made or
// failed, the stream goes on (a job that fits is made on it), and the
// budget is back to what it held.
func TestWorkJobScratchRefusedAtOpen(t *testing.T) {
	root := makeDataset(t, []string{"a", "b"}, 5, false)
	big := smallJob("tiny", 4).GetJob()
	big.Transform.Ops = []*pb.Op{rrcOp(256), opspec.Wire("AugMix", "severity", 3, "mixture_width", 3, "alpha", 1)}
	cfg := Config{Datasets: map[string]string{"tiny": root}, Workers: 1, MaxWorkMemoryPerClient: 64 << 20}
	probe := startServer(t, cfg)
	j, err := probe.srv.newJob(big, jobpkg.Origin{Stream: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	need, _, file := probe.srv.scratchNeed(j, 0, 0)
	small, err := probe.srv.newJob(smallJob("tiny", 4).GetJob(), jobpkg.Origin{Stream: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	fits, _, _ := probe.srv.scratchNeed(small, 0, 0)
	// Room for the plain job's samples and a batch of one of the big
	// job's samples (a batch budget of 3/4), not its scratch.
	extra := fits + j.BatchBytes()/4 + 8*small.BatchBytes() + 64<<10
	if file == 0 || need <= 2*extra {
		t.Fatalf("the AugMix job needs %d bytes (largest file %d), the plain one and a batch %d: the test would not tell them apart", need, file, extra)
	}
	cfg.MemoryBudget = (probe.srv.budget.InUse()+extra)/3*4 + 4
	e := startServer(t, cfg)
	base := e.srv.budget.InUse()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, _ := openWork(t, ctx, e)
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 1, Spec: big}}})
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 2, Job: 1, Indices: []int64{0}}}})
	m, err := s.Recv()
	if err != nil || m.GetFailed().GetLease() != 2 || codes.Code(m.GetFailed().GetCode()) != codes.ResourceExhausted {
		t.Fatalf("lease of the AugMix job: %v, %v; want LeaseFailed RESOURCE_EXHAUSTED", m, err)
	}
	t.Logf("%s", m.GetFailed().GetMessage())
	for _, want := range []string{fmt.Sprintf("needs %d bytes of worker scratch", need), fmt.Sprintf("largest file's %d bytes", file), "--memory-budget"} {
		if !strings.Contains(m.GetFailed().GetMessage(), want) {
			t.Errorf("refusal %q does not say %q", m.GetFailed().GetMessage(), want)
		}
	}
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 3, Spec: smallJob("tiny", 4).GetJob()}}})
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 4, Job: 3, Indices: []int64{0, 1}}}})
	if m, err := s.Recv(); err != nil || m.GetDone().GetLease() != 4 || len(m.GetDone().GetBatch().GetErrors()) != 0 {
		t.Fatalf("lease of the plain job: %v, %v; want it made", m, err)
	}
	s.CloseSend()
	cancel()
	waitUntilState(t, "the budget back to what it held", func() string {
		return fmt.Sprintf("in use %d (%d before), scratch %v", e.srv.budget.InUse(), base, gauge(t, e.reg, "stoker_sample_scratch_bytes"))
	}, func() bool {
		return e.srv.budget.InUse() == base && gauge(t, e.reg, "stoker_sample_scratch_bytes") == 0
	})
}
