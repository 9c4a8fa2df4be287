package server

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// recvErr reads a stream until it fails and returns the error.
func recvErr(s pb.FeedService_FeedClient) error {
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
}

func TestFirstMessageTimeout(t *testing.T) {
	e := newEnv(t, Config{FirstMessageTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := e.client.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = recvErr(s) // never sends OpenJob
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "--first-message-timeout") {
		t.Errorf("got %v; want DeadlineExceeded naming the flag", err)
	}
	if got := testutil.ToFloat64(e.srv.m.refusals.WithLabelValues("first_message_timeout")); got != 1 {
		t.Errorf("refusals{first_message_timeout} = %v, want 1", got)
	}
}

func TestIdleTimeout(t *testing.T) {
	e := newEnv(t, Config{IdleTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := e.client.ListDatasets(ctx, &pb.ListDatasetsRequest{}); err != nil { // the connection's goroutines start
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	open := smallJob("tiny", 8)
	open.Credits = 1 // takes one batch, then never grants another
	err := recvErr(e.feedStream(t, ctx, open))
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "--idle-timeout") {
		t.Errorf("got %v; want DeadlineExceeded naming the flag", err)
	}
	// Its coordinator, send loop, makers' calls and buffers go.
	waitUntilState(t, "the stream's budget and goroutines freed", func() string {
		return fmt.Sprintf("%d bytes of budget held, %d goroutines (%d before)", e.srv.budget.InUse(), runtime.NumGoroutine(), before)
	}, func() bool { return e.srv.budget.InUse() == 0 && runtime.NumGoroutine() <= before+2 })
}

func TestMemoryBudget(t *testing.T) {
	// One batch of n samples of 3x32x32 is n*3072 bytes; a job of one
	// maker and no credit holds three (a window of two, and the one
	// delivery waits on). Buffers get 3/4 of the budget: the first job's
	// three batches of 16 (147456 bytes) and 144 KiB, room for the one
	// worker's scratch (its read buffer, libjpeg's bound and the C
	// resampler's for a 70x66 photo: 135 KB its bound, 90-100 KB kept
	// after a sample, by the sample's image) but not for another job's
	// two batches of 16 (98304 bytes) beside them, which would fit if the
	// scratch were not counted; once the first is gone, a job of batches
	// of 4 fits with all its buffers and the scratch. (Two batches of 8
	// fit beside a scratch of under 98304 bytes: some samples keep less.)
	e := newEnv(t, Config{MemoryBudget: 4 * (3*16*3072 + 144<<10) / 3, Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := smallJob("tiny", 16)
	open.Credits = 0 // holds its buffers
	first := e.feedStream(t, ctx, open)
	if m, err := first.Recv(); err != nil || m.GetJob() == nil {
		t.Fatalf("first stream: %v, %v", m, err)
	}
	// Its window's buffers are taken and its batches made (they wait for
	// credit), the worker's scratch reserved: less than 98304 bytes left.
	waitUntilState(t, "the first job's buffers and scratch held", func() string {
		return fmt.Sprintf("%d of %d bytes in use, %d of them scratch", e.srv.budget.InUse(), e.srv.budget.Limit(), e.srv.scratch.Held())
	}, func() bool { return e.srv.budget.InUse() > e.srv.budget.Limit()-98304 })
	second := smallJob("tiny", 16)
	second.Credits = 0
	err := recvErr(e.feedStream(t, ctx, second))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--memory-budget") || !strings.Contains(err.Error(), "98304 bytes") {
		t.Errorf("second stream: %v; want ResourceExhausted with the numbers", err)
	}
	cancel()
	// Once the first is gone, a new job fits again.
	waitUntil(t, "the first stream's budget freed", func() bool { return e.srv.budget.InUse() == 0 })
	if ep := e.collect(t, smallJob("tiny", 4)); len(ep.batches) != 10 {
		t.Errorf("%d batches after the budget freed, want 10", len(ep.batches))
	}
}

func TestMaxStreams(t *testing.T) {
	e := newEnv(t, Config{MaxStreams: 1})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	open := smallJob("tiny", 8)
	open.Credits = 0
	first := e.feedStream(t, ctx, open)
	if _, err := first.Recv(); err != nil {
		t.Fatal(err)
	}
	err := recvErr(e.feedStream(t, ctx, open))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-streams") {
		t.Errorf("got %v; want ResourceExhausted naming --max-streams", err)
	}
}

func TestDatasetNameLimit(t *testing.T) {
	e := newEnv(t, Config{})
	open := smallJob(strings.Repeat("x", 100000), 8)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	err := recvErr(e.feedStream(t, ctx, open))
	if status.Code(err) != codes.InvalidArgument || len(err.Error()) > 500 {
		t.Errorf("got %d-byte error %.200v; want a short InvalidArgument", len(err.Error()), err)
	}
}

// TestDeepNesting: a transform nested thousands of containers deep is the
// client's error (INVALID_ARGUMENT naming the nesting limit), on a Feed
// stream, a Work stream and DescribeJob alike, whether protobuf's decoder
// (its recursion limit) or the transform's own check finds it; the server
// serves on.
func TestDeepNesting(t *testing.T) {
	e := newEnv(t, Config{})
	nest := func(depth int) *pb.JobSpec {
		op := flipOp(nil)
		for range depth {
			op = opspec.Wire("RandomApply", "transforms", []*pb.Op{op})
		}
		spec := smallJob("tiny", 8).GetJob()
		spec.Transform.Ops = append(spec.Transform.Ops, op)
		return spec
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	conn := dial(t, e.addr)
	// Each level is a RandomApply NamedOp of about 44 bytes: 20000 levels
	// are well past protobuf's recursion limit and within the server's
	// message limit (1 MiB; 100000 levels would be 4.4 MB, refused
	// RESOURCE_EXHAUSTED before anything is decoded).
	for _, depth := range []int{5, 100, 10000, 20000} {
		want := fmt.Sprintf("nest at most %d deep", ops.MaxNesting)
		if depth < 10000 {
			want = "nested deeper than"
		}
		spec := nest(depth)
		check := func(how string, err error) {
			t.Helper()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), want) || len(err.Error()) > 500 {
				t.Errorf("depth %d, %s: got %.300v; want a short InvalidArgument saying %q", depth, how, err, want)
			}
		}
		_, err := e.client.DescribeJob(ctx, &pb.DescribeJobRequest{Job: spec})
		check("DescribeJob", err)
		open := smallJob("tiny", 8)
		open.Job = spec
		check("Feed", recvErr(e.feedStream(t, ctx, open)))
		w, err := pb.NewWorkServiceClient(conn).Work(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 1, Spec: spec}}}); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if depth >= 10000 { // a job the worker can decode is refused when leased
			for err == nil {
				_, err = w.Recv()
			}
			check("Work", err)
		}
		w.CloseSend()
	}
	if got := e.collect(t, smallJob("tiny", 8)); got.end == nil {
		t.Errorf("after the deep specs, an ordinary job got no EpochEnd")
	}
}
