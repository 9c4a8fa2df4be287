package server

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/makers"
)

// TestSharesDormant: a queue that made nothing and had nothing queued for
// makers.DormantAfter rebalances is left out of them (a job that stopped
// leasing costs no CPU, however many there are), and its next Fill puts
// it back; the samples made are counted by kind.
func TestSharesDormant(t *testing.T) {
	env := newEnv(t, Config{Workers: 1})
	samples := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "samples"}, []string{"stream"})
	sh := makers.NewShares(-1, 0.02, 0, samples)
	j, err := env.srv.newJob(smallJob("tiny", 2).GetJob(), job.Origin{ID: "w"})
	if err != nil {
		t.Fatal(err)
	}
	e := makers.OpenExecJob(env.srv.exec, sh, nil, j, true, "10.0.0.1")
	defer e.Close()
	var b pipeline.Batch
	if err := e.Fill(context.Background(), &lease.Lease{Indices: []int64{0, 1}}, &b); err != nil {
		t.Fatal(err)
	}
	awake := func() int {
		_, n := sh.Queues()
		return n
	}
	for range makers.DormantAfter + 1 {
		sh.Rebalance()
	}
	if n := awake(); n != 0 {
		t.Fatalf("%d queues awake after %d idle rebalances, want 0", n, makers.DormantAfter+1)
	}
	if err := e.Fill(context.Background(), &lease.Lease{Indices: []int64{2, 3}}, &b); err != nil {
		t.Fatal(err)
	}
	if n := awake(); n != 1 {
		t.Fatalf("%d queues awake after a Fill, want 1", n)
	}
	e.Close()
	if got := testutil.ToFloat64(samples.WithLabelValues("work")); got != 4 {
		t.Errorf("%v Work samples counted, want 4", got)
	}
	if got := testutil.ToFloat64(samples.WithLabelValues("feed")); got != 0 {
		t.Errorf("%v Feed samples counted, want 0", got)
	}
}
