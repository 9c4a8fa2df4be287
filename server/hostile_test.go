package server

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
)

// TestHostileClients: clients that send garbage, no OpenJob, two OpenJobs,
// absurd credits, or go away mid-batch get a clear status (or nothing, when
// they left), and the server frees their work, memory and goroutines.
func TestHostileClients(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	e := newEnv(t, Config{Datasets: map[string]string{"tiny": root}})
	// The client that never sends OpenJob waits for a first-message timeout
	// of its own server: on e, the default leaves the others' first
	// messages all the time a loaded machine may take.
	quick := newEnv(t, Config{Datasets: map[string]string{"tiny": root}, FirstMessageTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	for _, e := range []*testEnv{e, quick} {
		if _, err := e.client.ListDatasets(ctx, &pb.ListDatasetsRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()
	absurd := smallJob("tiny", 8)
	absurd.Credits = math.MaxUint32
	absurd.Epochs = 0 // forever, until it leaves
	for _, tc := range []struct {
		name string
		send []*pb.FeedRequest
		// leave: cancel after reading this many messages; 0 reads until
		// the server ends the stream.
		leave int
		want  codes.Code
	}{
		{"no OpenJob", nil, 0, codes.DeadlineExceeded}, // on quick
		{"empty message", []*pb.FeedRequest{{}}, 0, codes.InvalidArgument},
		{"credit first", []*pb.FeedRequest{{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1}}}}, 0, codes.InvalidArgument},
		{"two OpenJobs", []*pb.FeedRequest{{Msg: &pb.FeedRequest_Open{Open: smallJob("tiny", 8)}}, {Msg: &pb.FeedRequest_Open{Open: smallJob("tiny", 8)}}}, 0, codes.InvalidArgument},
		{"absurd credits, gone mid-batch", []*pb.FeedRequest{{Msg: &pb.FeedRequest_Open{Open: absurd}}}, 7, codes.Canceled},
		{"absurd credit grant", []*pb.FeedRequest{{Msg: &pb.FeedRequest_Open{Open: smallJob("tiny", 8)}}, {Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: math.MaxUint32, WaitSeconds: math.Inf(1)}}}}, 0, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, hangGuard)
			defer cancel()
			client := e.client
			if tc.send == nil {
				client = quick.client
			}
			s, err := client.Feed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range tc.send {
				s.Send(m)
			}
			var n int
			for {
				if _, err = s.Recv(); err != nil {
					break
				}
				if n++; n == tc.leave {
					cancel()
				}
			}
			if got := status.Code(err); got != tc.want && !(tc.want == codes.OK && err.Error() == "EOF") {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
	// Garbage bytes where a FeedRequest should be: the codec refuses them.
	var garbage pb.FeedRequest
	if err := proto.Unmarshal([]byte{0xff, 0xff, 0xff, 0x0f}, &garbage); err == nil {
		t.Log("garbage parsed as an empty request; covered by 'empty message'")
	}
	waitUntilState(t, "the streams' budget and goroutines freed", func() string {
		return fmt.Sprintf("%d bytes of budget held, %d goroutines (%d before)", e.srv.budget.InUse()+quick.srv.budget.InUse(), runtime.NumGoroutine(), before)
	}, func() bool {
		return e.srv.budget.InUse() == 0 && quick.srv.budget.InUse() == 0 && runtime.NumGoroutine() <= before+2
	})
}

// FuzzJob feeds arbitrary bytes as an OpenJob to the validation every
// stream runs first: it must refuse or accept, never panic, and an
// accepted job's plan and first batch header must be computable.
func FuzzJob(f *testing.F) {
	for _, o := range []*pb.OpenJob{smallJob("tiny", 8), {Job: &pb.JobSpec{Dataset: "tiny", Transform: &pb.TransformSpec{Preset: "imagenet-eval"}, BatchSize: 3, WorldSize: 5, Rank: 4}, Consumed: 39, StartBatch: 1, SkipBatches: []uint64{0, 5}}} {
		b, _ := proto.Marshal(o)
		f.Add(b)
	}
	root := makeDataset(f, []string{"a", "b", "c"}, 13, true)
	e := startServer(f, Config{Datasets: map[string]string{"tiny": root}, Workers: 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		var o pb.OpenJob
		if proto.Unmarshal(data, &o) != nil {
			return
		}
		j, err := e.srv.newJob(o.GetJob(), job.Origin{Stream: "1", EpochWorld: int(o.GetEpochWorldSize())})
		if err != nil {
			if _, ok := status.FromError(err); !ok {
				t.Fatalf("not a status error: %v", err)
			}
			return
		}
		st, err := streamOf(&o, j)
		if err != nil {
			return
		}
		p := j.EpochPlan(st.Epoch, st.Consumed)
		if p.Batches() > 0 {
			_ = j.Info(st.Epoch, p)
			if n := len(p.Batch(p.Batches() - 1)); n < 1 || n > int(o.GetJob().GetBatchSize()) {
				t.Fatalf("last batch of %d samples for batch size %d", n, o.GetJob().GetBatchSize())
			}
		}
	})
}

// TestWorkRefusalsBounded: a coordinator that sends leases of a refused job
// and never reads is cut off, not allowed to pile up answers; the server
// frees what the stream held.
func TestWorkRefusalsBounded(t *testing.T) {
	e := newEnv(t, Config{Workers: 1})
	conn := dial(t, e.addr)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if _, err := pb.NewFeedServiceClient(conn).ListDatasets(ctx, &pb.ListDatasetsRequest{}); err != nil { // the connection's goroutines start
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	s, err := pb.NewWorkServiceClient(conn).Work(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 1, Spec: smallJob("nope", 8).GetJob()}}})
	var sendErr error
	for i := range 100000 {
		if sendErr = s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: uint64(i + 1), Job: 1, Indices: []int64{0}}}}); sendErr != nil {
			break
		}
	}
	var err2 error
	for err2 == nil {
		_, err2 = s.Recv()
	}
	if status.Code(err2) != codes.ResourceExhausted || !strings.Contains(err2.Error(), "does not read") {
		t.Errorf("got %v (send: %v); want ResourceExhausted saying the coordinator does not read", err2, sendErr)
	}
	cancel()
	waitUntilState(t, "the stream's goroutines gone", func() string {
		return fmt.Sprintf("%d goroutines, %d before", runtime.NumGoroutine(), before)
	}, func() bool { return runtime.NumGoroutine() <= before+2 })
}
