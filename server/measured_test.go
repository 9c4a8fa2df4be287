package server

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestMeasuredCostFailsTheJob: the cost model admits a job at open; its
// samples' CPU as the executor measures it is held to --max-measured-cpu
// too. A blur the model admits under the default --max-sample-cpu, on a
// server whose bound on the measured mean is set below what any of its
// samples costs (a photo's decode alone is more): the stream ends with
// RESOURCE_EXHAUSTED naming the measured mean, the bound's flag and the
// prediction, once the first samples are measured, and the job's queue
// is closed (nothing of it runs on), while the server stays up: a job
// on a server with the default bound (4 x --max-sample-cpu) runs the
// same blur to its epoch's end.
func TestMeasuredCostFailsTheJob(t *testing.T) {
	ds, err := filepath.Abs("../testdata/photos")
	if err != nil {
		t.Fatal(err)
	}
	blur := func(epochs uint64) *pb.OpenJob {
		o := smallJob("photos", 2)
		o.Job.Transform.Ops = []*pb.Op{rrcOp(224), opspec.Wire("GaussianBlur", "kernel_size", []int{31, 31}, "sigma", []float64{5, 5})}
		o.Epochs = epochs
		return o
	}
	const bound = 100 * time.Microsecond
	e := startServer(t, Config{Workers: 2, MaxMeasuredCPU: bound, Datasets: map[string]string{"photos": ds}})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := e.client.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: blur(0)}}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err = s.Recv()
		if err != nil {
			break
		}
	}
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(msg, "measured") || !strings.Contains(msg, "--max-measured-cpu") ||
		!strings.Contains(msg, "100µs") || !strings.Contains(msg, "predicted") {
		t.Fatalf("the job over the bound: %v; want RESOURCE_EXHAUSTED naming the measured mean, the bound of 100µs (--max-measured-cpu) and the prediction", err)
	}
	t.Logf("the job over the bound: %v", err)
	waitUntil(t, "the failed job's queue closed", func() bool { return len(e.srv.exec.Queues()) == 0 })

	// The server stays up: it still answers. With the default bound the
	// same job runs its epoch.
	if _, err := e.client.DescribeJob(ctx, &pb.DescribeJobRequest{Job: blur(1).GetJob()}); err != nil {
		t.Fatalf("DescribeJob after the failure: %v", err)
	}
	d := startServer(t, Config{Workers: 2, Datasets: map[string]string{"photos": ds}})
	if d.srv.cfg.MaxMeasuredCPU != DefaultMeasuredBound*d.srv.cfg.MaxSampleCPU {
		t.Errorf("the default bound: %v, want %d x --max-sample-cpu (%v)", d.srv.cfg.MaxMeasuredCPU, DefaultMeasuredBound, d.srv.cfg.MaxSampleCPU)
	}
	s, err = d.client.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: blur(1)}}); err != nil {
		t.Fatal(err)
	}
	ep, err := readStreamEpoch(s)
	if err != nil || len(ep.batches) == 0 || ep.end == nil {
		t.Fatalf("the blur under the default bound: %d batches, %v", len(ep.batches), err)
	}
}
