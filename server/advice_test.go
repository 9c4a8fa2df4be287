package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// runTrainer takes batches from a Feed stream for d, stepping step per
// batch and reporting its wait and step with each credit, as the clients
// do; it returns the server's Status of the job at the end.
func runTrainer(t *testing.T, e *testEnv, open *pb.OpenJob, step, d time.Duration) *pb.JobStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+20*time.Second)
	defer cancel()
	open.Epochs = 0
	open.Credits = 2
	s := e.feedStream(t, ctx, open)
	end := time.Now().Add(d)
	var last *pb.JobStatus
	asked := time.Now()
	var want, got uint64
	for time.Now().Before(end) {
		m, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.GetBatch() != nil:
			want, got = m.GetBatch().GetDataBytes(), 0
		case m.GetChunk() != nil:
			got += uint64(len(m.GetChunk().GetData()))
		}
		if m.GetChunk() == nil || got < want { // JobInfo, EpochEnd, or more to come
			continue
		}
		wait := time.Since(asked)
		time.Sleep(step)
		asked = time.Now()
		s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1, Batches: 1, WaitSeconds: wait.Seconds(), StepSeconds: step.Seconds()}}})
	}
	st, err := e.client.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range st.GetJobs() {
		last = j
	}
	if last == nil {
		t.Fatal("Status lists no job")
	}
	return last
}

// End to end, a real trainer on a real stream: Status says what the advice
// rests on and what each maker makes when busy. (No figure is asserted
// against time: the machine may be slow.)
func TestStatusSaysTheAdvice(t *testing.T) {
	e := newEnv(t, Config{})
	js := runTrainer(t, e, smallJob("tiny", 4), 50*time.Millisecond, 3*time.Second)
	if js.GetStarvationSignal() != "trainer wait" || js.GetGpuIdleRatio() != -1 {
		t.Errorf("signal %q, GPU idle %v: without a GPU monitor the trainer's wait is the signal", js.GetStarvationSignal(), js.GetGpuIdleRatio())
	}
	if len(js.GetMakers()) != 1 || js.GetMakers()[0].GetName() != "local" || js.GetMakers()[0].GetBusyBatchesPerSecond() <= 0 {
		t.Errorf("makers %v: want the local maker with its busy rate", js.GetMakers())
	}
	if js.GetAdvice() == "" {
		t.Error("no advice")
	}
}

func TestMetricsLint(t *testing.T) {
	e := newEnv(t, Config{})
	runTrainer(t, e, smallJob("tiny", 8), 10*time.Millisecond, 1200*time.Millisecond)
	problems, err := testutil.GatherAndLint(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
