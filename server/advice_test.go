package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// runTrainer takes batches from a Feed stream, stepping step per batch
// and reporting its wait and step with each credit, as the clients do,
// until the server's Status of the job satisfies until; it returns that
// status. The step paces a trainer; nothing is measured against it.
func runTrainer(t *testing.T, e *testEnv, open *pb.OpenJob, step time.Duration, until func(*pb.JobStatus) bool) *pb.JobStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	open.Epochs = 0
	open.Credits = 2
	s := e.feedStream(t, ctx, open)
	var last *pb.JobStatus
	asked := time.Now()
	var want, got uint64
	for last == nil || !until(last) {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("%v; the job's last status %v", err, last)
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
		st, err := e.client.Status(ctx, &pb.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range st.GetJobs() {
			last = j
		}
	}
	return last
}

// measured: the job's status has been published and gives its first
// maker's busy rate, which takes a few batches made.
func measured(js *pb.JobStatus) bool {
	return len(js.GetMakers()) > 0 && js.GetMakers()[0].GetBusyBatchesPerSecond() > 0
}

// End to end, a real trainer on a real stream: Status says what the advice
// rests on and what each maker makes when busy. (No figure is asserted
// against time: the machine may be slow; the trainer runs until its
// maker is measured, however long that takes.)
func TestStatusSaysTheAdvice(t *testing.T) {
	e := newEnv(t, Config{})
	js := runTrainer(t, e, smallJob("tiny", 4), 50*time.Millisecond, measured)
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
	runTrainer(t, e, smallJob("tiny", 8), 10*time.Millisecond, measured) // every series a running job sets
	problems, err := testutil.GatherAndLint(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
