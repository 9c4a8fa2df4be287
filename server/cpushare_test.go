package server

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// bombJob is the bomb: RandomResizedCrop(4096) and 32 blurs of
// kernel 1023, sigma 1000, batch 1: within every per-op bound.
func bombJob(dataset string) *pb.OpenJob {
	ops := []*pb.Op{opspec.Wire("RandomResizedCrop", "size", 4096)}
	for range 32 {
		ops = append(ops, opspec.Wire("GaussianBlur", "kernel_size", []int{1023, 1023}, "sigma", []float64{1000, 1000}))
	}
	return &pb.OpenJob{Job: &pb.JobSpec{Dataset: dataset, Transform: &pb.TransformSpec{Ops: ops}, BatchSize: 1, Seed: 1, Shuffle: true}, Credits: 4}
}

// augMixJob is AugMix at severity 10, width 16, depth 14 (242 steps) after
// a crop of side px: expensive, and under the default limit.
func augMixJob(dataset string, px, batch uint32) *pb.OpenJob {
	return &pb.OpenJob{Job: &pb.JobSpec{
		Dataset: dataset,
		Transform: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(px),
			opspec.Wire("AugMix", "severity", 10, "mixture_width", 16, "chain_depth", 14, "alpha", 1)}},
		BatchSize: batch, Seed: 1, Shuffle: true,
	}, Credits: 4}
}

// TestCostBombRefused: the bomb is refused when it opens, with
// INVALID_ARGUMENT naming the prediction, the limit, the blur and the
// flag, and nothing of it is decoded; AugMix at 10/16/14 is under the
// default limit and opens (it is fair-shared instead:
// TestCPUShareVictim); a lower --max-sample-cpu refuses it too.
func TestCostBombRefused(t *testing.T) {
	e := newEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := e.feedStream(t, ctx, bombJob("tiny")).Recv()
	msg := status.Convert(err).Message()
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bomb: %v; want INVALID_ARGUMENT", err)
	}
	for _, want := range []string{"predicted to cost", "limit of 250ms", "--max-sample-cpu", "op 1 (GaussianBlur)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("bomb refused with %q: want it to say %q", msg, want)
		}
	}
	if n := len(e.srv.exec.Queues()); n != 0 {
		t.Errorf("%d executor queues after the refusal, want none: nothing of the job may run", n)
	}

	open := augMixJob("tiny", 224, 2)
	open.Epochs = 1
	s := e.feedStream(t, ctx, open)
	m, err := s.Recv()
	if err != nil || m.GetJob() == nil {
		t.Fatalf("AugMix 10/16/14: %v, %v; want the job open", m, err)
	}
	cancel()

	low := newEnv(t, Config{MaxSampleCPU: 10 * time.Millisecond})
	ctx, cancel = context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err = low.feedStream(t, ctx, augMixJob("tiny", 224, 2)).Recv()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "limit of 10ms (--max-sample-cpu)") || !strings.Contains(err.Error(), "(AugMix)") {
		t.Errorf("AugMix under --max-sample-cpu 10ms: %v; want INVALID_ARGUMENT naming the limit and AugMix", err)
	}
}

// starvedTrainer runs a Feed stream for open until ctx ends: it takes
// every batch as it comes and grants a credit for each, a trainer that
// is always waiting for input (its step is nothing).
func starvedTrainer(ctx context.Context, t *testing.T, e *testEnv, open *pb.OpenJob) {
	trainerOn(ctx, t, e.client, open)
}

// TestCPUShareVictim: a victim trainer with a cheap recipe beside n
// trainers of an expensive one (AugMix 10/16/14, a hundred times its CPU
// per sample), all starved, on one server with one decode worker (the
// machine's other core left to the trainers' delivery, which would
// otherwise compete with the workers for it, not with the schedule). The
// executor shares the cores by CPU time: by its own accounting (the
// thread CPU each queue's samples took), the victim gets about its fair
// part, 1/(n+1), of the CPU the jobs used: beside one attacker, about
// half the executor, where alone it could have it all. The
// figures are counted, not timed: the test runs until the attackers have
// used 3 s of CPU, however slow the machine.
func TestCPUShareVictim(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(map[int]string{1: "one attacker", 3: "three attackers"}[n], func(t *testing.T) {
			// Real photos (0.13 MP): the victim's cost is its decode,
			// on the executor, more than its delivery.
			ds, err := filepath.Abs("../testdata/photos")
			if err != nil {
				t.Fatal(err)
			}
			e := startServer(t, Config{Workers: 1, Datasets: map[string]string{"victim": ds, "bomb": ds}})
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			var wg sync.WaitGroup
			defer func() {
				cancel()
				wg.Wait()
			}()
			victimJob := smallJob("victim", 128)
			victimJob.Job.Transform.Ops[0] = rrcOp(64)
			wg.Go(func() { starvedTrainer(ctx, t, e, victimJob) })
			var vq *pipeline.Queue
			waitUntil(t, "the victim's queue", func() bool {
				for _, q := range e.srv.exec.Queues() {
					if strings.Contains(q.Name(), "victim") && q.Made() > 0 {
						vq = q
					}
				}
				return vq != nil
			})
			m0, t0 := vq.Made(), time.Now()
			waitUntil(t, "the victim alone making 2000 samples", func() bool { return vq.Made()-m0 >= 2000 })
			aloneRate := float64(vq.Made()-m0) / time.Since(t0).Seconds()
			for range n {
				wg.Go(func() { starvedTrainer(ctx, t, e, augMixJob("bomb", 128, 4)) })
			}
			// The jobs' queues, once each has made a sample.
			var victim *pipeline.Queue
			var attackers []*pipeline.Queue
			waitUntil(t, "every job's queue making samples", func() bool {
				victim, attackers = nil, nil
				for _, q := range e.srv.exec.Queues() {
					switch {
					case q.Made() == 0:
					case strings.Contains(q.Name(), "victim"):
						victim = q
					case strings.Contains(q.Name(), "bomb"):
						attackers = append(attackers, q)
					}
				}
				return victim != nil && len(attackers) == n
			})
			cpu := func() (v, a time.Duration, vs, as uint64) {
				for _, q := range attackers {
					a += q.CPU()
					as += q.Made()
				}
				return victim.CPU(), a, victim.Made(), as
			}
			v0, a0, vs0, as0 := cpu()
			t1 := time.Now()
			const window = 3 * time.Second
			waitUntil(t, "the attackers using 3 s of CPU", func() bool {
				_, a, _, _ := cpu()
				return a-a0 >= window
			})
			v1, a1, vs1, as1 := cpu()
			// Every job's predicted and measured CPU per sample are
			// metrics (published with its status, every 500 ms).
			waitUntil(t, "every job's CPU metrics", func() bool {
				return len(positiveSeries(t, e, "stoker_predicted_cpu_seconds_per_sample")) == n+1 &&
					len(positiveSeries(t, e, "stoker_cpu_seconds_per_sample")) == n+1
			})
			pred, meas := positiveSeries(t, e, "stoker_predicted_cpu_seconds_per_sample"), positiveSeries(t, e, "stoker_cpu_seconds_per_sample")
			for job, p := range pred {
				t.Logf("%s: predicted %.3f ms a sample, measured %.3f ms", job, 1e3*p, 1e3*meas[job])
			}
			rate := float64(vs1-vs0) / time.Since(t1).Seconds()
			// For the log alone: wall-clock rates on a shared machine
			// are no test.
			t.Logf("victim alone %.0f samples/s, beside the attackers %.0f: %.2fx", aloneRate, rate, rate/aloneRate)
			dv, da := (v1 - v0).Seconds(), (a1 - a0).Seconds()
			share, fair := dv/(dv+da), 1/float64(n+1)
			t.Logf("victim: %.3f s of CPU, %d samples (%.2f ms each); %d attackers: %.3f s, %d samples (%.1f ms each); the victim's share %.3f, fair %.3f",
				dv, vs1-vs0, 1e3*dv/float64(vs1-vs0), n, da, as1-as0, 1e3*da/float64(as1-as0), share, fair)
			// At least 3/4 of fair. The rest is not the schedule's to
			// give: the victim's queue is empty now and then between its
			// batches (its leases come and go), and the worker that took
			// an attacker's sample then keeps it for its 7 ms (38 ms
			// under -race): the schedule is not preemptive. Its share was
			// 0.45-0.46 beside one attacker, 0.24-0.27 beside three, with
			// and without -race; 0.50-0.52 and 0.26-0.27 once a queue
			// that empties keeps one sample of lag (lagBound; these jobs
			// share one connection, so they are one client's); by samples, as the executor scheduled
			// before, equal samples at 0.12 ms against 7.1 ms would give
			// it 2%.
			if share < 0.75*fair {
				t.Errorf("the victim got %.3f of the CPU beside %d attackers, want at least 3/4 of its fair %.3f", share, n, fair)
			}
		})
	}
}

// positiveSeries are the metric's series of value > 0, by stoker_job.
func positiveSeries(t *testing.T, e *testEnv, name string) map[string]float64 {
	t.Helper()
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetGauge().GetValue(); v > 0 {
				for _, l := range m.GetLabel() {
					if l.GetName() == "stoker_job" {
						out[l.GetValue()] = v
					}
				}
			}
		}
	}
	return out
}
