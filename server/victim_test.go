package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/internal/racebuild"
	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
)

// shareTest marks t as measuring the executor's shares of the CPU: it
// skips under -race, where the Go between a trainer's batches (leasing,
// assembling, sending) runs many times slower and the C kernels of the
// attacks do not, so a victim's queue empties between its batches and the
// share measures the race detector, not the schedule (a loaded CI machine
// gave 0.42x there, the same test 0.50x without it); make test-go runs it
// once without -race (its tests are named TestShareCPU...: -run '^TestShareCPU').
func shareTest(t *testing.T) {
	t.Helper()
	if racebuild.Enabled {
		t.Skip("a CPU share measurement: make test-go-once runs it without -race (-run '^TestShareCPU')")
	}
}

// victimLimit is the --max-sample-cpu of the victim tests' server: the
// attackers' jobs are the costliest it lets open. Lower than the default
// (250ms) so that a window of a few seconds of CPU holds tens of the
// attackers' samples (a worker keeps a sample it took until it is made:
// the share is counted in whole samples); the schedule is the same at any
// limit.
const victimLimit = 50 * time.Millisecond

// blurBomb is the bomb scaled to a crop of side px: 32 blurs of
// the largest odd kernel under px (at most 1023), sigma 1000, batch 1.
func blurBomb(dataset string, px uint32) *pb.OpenJob {
	k := min(px-1, 1023)
	if k%2 == 0 {
		k--
	}
	ops := []*pb.Op{rrcOp(px)}
	for range 32 {
		ops = append(ops, opspec.Wire("GaussianBlur", "kernel_size", []int{int(k), int(k)}, "sigma", []float64{1000, 1000}))
	}
	return &pb.OpenJob{Job: &pb.JobSpec{Dataset: dataset, Transform: &pb.TransformSpec{Ops: ops}, BatchSize: 1, Seed: 1, Shuffle: true}, Credits: 4}
}

// victimCopies is how many copies of each photo the victim's dataset
// holds (manyPhotos): 1008 samples.
const victimCopies = 24

// manyPhotos is a dataset of copies (hard links) of the photos under
// dir, each copies times: an epoch of many batches, as a trainer's is. A
// coordinator leases at most one epoch ahead, so on the 42 photos alone
// (an epoch of one batch of 42) the victim would have 2 batches in
// flight, 84 samples, about 20 ms of CPU: less than one sample of the
// attack, so its queue would empty while each of those runs.
func manyPhotos(t *testing.T, dir string, copies int) string {
	t.Helper()
	root := t.TempDir()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
	if err != nil || len(files) == 0 {
		t.Fatalf("photos under %s: %v %v", dir, files, err)
	}
	for _, f := range files {
		class := filepath.Join(root, filepath.Base(filepath.Dir(f)))
		if err := os.MkdirAll(class, 0o755); err != nil {
			t.Fatal(err)
		}
		for k := range copies {
			if err := os.Link(f, filepath.Join(class, fmt.Sprintf("%02d-%s", k, filepath.Base(f)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// largestAllowed is mk at the largest crop side whose job the server
// opens (its predicted worst sample within --max-sample-cpu), and the
// job at the next side up, which it refuses.
func largestAllowed(t *testing.T, s *Server, mk func(px uint32) *pb.OpenJob) (ok, over *pb.OpenJob) {
	t.Helper()
	opens := func(px uint32) bool {
		_, err := s.newJob(mk(px).GetJob(), job.Origin{})
		return err == nil
	}
	lo, hi := uint32(16), uint32(4096) // opens(lo), !opens(hi)
	if !opens(lo) || opens(hi) {
		t.Fatalf("want a job of side %d to open and one of %d refused", lo, hi)
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; opens(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return mk(lo), mk(hi)
}

// trainerOn runs a Feed stream for open on client's connection until ctx
// ends: it takes every batch as it comes and grants a credit for each, a
// trainer always waiting for input (starvedTrainer, on the test server's
// own client).
func trainerOn(ctx context.Context, t *testing.T, client pb.FeedServiceClient, open *pb.OpenJob) {
	open = proto.Clone(open).(*pb.OpenJob) // open may be shared by several trainers
	open.Epochs = 0
	s, err := client.Feed(ctx)
	if err != nil {
		if ctx.Err() == nil {
			t.Errorf("Feed: %v", err)
		}
		return
	}
	s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: open}})
	var want, got uint64
	asked := time.Now()
	for {
		m, err := s.Recv()
		if err != nil {
			if ctx.Err() == nil {
				t.Errorf("%s: %v", open.GetJob().GetDataset(), err)
			}
			return
		}
		switch {
		case m.GetBatch() != nil:
			want, got = m.GetBatch().GetDataBytes(), 0
			continue
		case m.GetChunk() != nil:
			got += uint64(len(m.GetChunk().GetData()))
			if got < want {
				continue
			}
		default:
			continue
		}
		wait := time.Since(asked)
		asked = time.Now()
		s.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1, Batches: 1, WaitSeconds: wait.Seconds()}}})
	}
}

// capacity is the executor's workers' time so far (pipeline's
// Executor.Capacity): the CPU of its samples and the time it had none.
type capacity struct {
	victim      uint64        // the victim's samples made
	vcpu, cpu   time.Duration // the victim's CPU, every queue's
	idle        time.Duration
	attackerCPU time.Duration
}

func (c capacity) sub(o capacity) capacity {
	return capacity{victim: c.victim - o.victim, vcpu: c.vcpu - o.vcpu, cpu: c.cpu - o.cpu, idle: c.idle - o.idle, attackerCPU: c.attackerCPU - o.attackerCPU}
}

// rate is the victim's samples per second of the workers' time.
func (c capacity) rate() float64 { return float64(c.victim) / (c.cpu + c.idle).Seconds() }

// part is the victim's CPU over the workers' time.
func (c capacity) part() float64 { return c.vcpu.Seconds() / (c.cpu + c.idle).Seconds() }

// TestShareCPUVictimUnderAttack: a victim trainer, and on the same server (one
// decode worker) an attacker on a connection of its own: the blur bomb
// at the largest size the cost model lets open, or 8 jobs of AugMix
// 10/16/14 at the largest crop it lets open (the next size up of either
// is refused before anything is decoded). What the victim gets is
// counted in the executor's workers' own time, by the executor's
// accounting (the thread CPU of every sample, and the time the workers
// had no sample: Capacity), not in the wall clock, which the host's
// other load would stretch: its part is the CPU its samples took over
// that time (its samples per second of it are logged too; they also
// move with what each sample happened to cost):
//
//   - alone (after its first, cold epoch), the workers are all its own;
//   - during the attack it keeps its half: the executor shares the cores
//     by client first (this connection against the attacker's), then
//     among each client's jobs, so 8 jobs take no more than one. A
//     victim that alone keeps the worker busy, as this one does, gets
//     exactly half beside one other client: the test asks for 0.45, the
//     rest being the schedule's grain (a worker keeps a sample it took,
//     here up to 100 ms);
//   - once the attacker disconnects its work stops (its queues closed,
//     every sample it had running back, by the executor's events), its
//     samples taking under 2 s of CPU after the disconnect, and the
//     workers' CPU is all the victim's again (its part of their time,
//     idle included, is logged: the idle is its own delivery's, which
//     the host's load stretches).
func TestShareCPUVictimUnderAttack(t *testing.T) {
	shareTest(t)
	ds, err := filepath.Abs("../testdata/photos")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		jobs    int
		workers int
		limit   time.Duration // --max-sample-cpu
		batch   uint32        // the victim's
		mk      func(px uint32) *pb.OpenJob
	}{
		{"blur bomb", 1, 1, victimLimit, 128, func(px uint32) *pb.OpenJob { return blurBomb("bomb", px) }},
		{"8 AugMix jobs", 8, 1, victimLimit, 128, func(px uint32) *pb.OpenJob { return augMixJob("bomb", px, 4) }},
		// Two workers, samples of up to 250 ms predicted, a victim of batch
		// 32 (issue 66's: 0.02x): a heavy sample on each worker would leave
		// the victim none for a whole sample; the heavy queues leave it one.
		{"blur bomb, 2 workers", 1, 2, 250 * time.Millisecond, 32, func(px uint32) *pb.OpenJob { return blurBomb("bomb", px) }},
		{"4 blur jobs, 2 workers", 4, 2, 250 * time.Millisecond, 32, func(px uint32) *pb.OpenJob { return blurBomb("bomb", px) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bound on the measured mean (--max-measured-cpu) well
			// above what the attacks measure (the blur bomb admitted at
			// 50 ms measured 150-160 ms, near the default 4x on a loaded
			// host): they are served at their share, the test's subject;
			// TestMeasuredCostFailsTheJob is the bound's.
			e := startServer(t, Config{Workers: tc.workers, MaxSampleCPU: tc.limit, MaxMeasuredCPU: 8 * tc.limit, Datasets: map[string]string{"victim": manyPhotos(t, ds, victimCopies), "bomb": ds}})
			victimSize := e.srv.datasets["victim"].Len()
			attack, over := largestAllowed(t, e.srv, tc.mk)
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			var wg sync.WaitGroup
			defer func() {
				cancel()
				wg.Wait()
			}()
			attacker := dial(t, e.addr) // a connection, and so a client, of its own
			_, err := pb.NewFeedServiceClient(attacker).DescribeJob(ctx, &pb.DescribeJobRequest{Job: over.GetJob()})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--max-sample-cpu") {
				t.Fatalf("the attack one size up: %v; want INVALID_ARGUMENT naming --max-sample-cpu", err)
			}

			// A training recipe (RandomResizedCrop 224 and a flip), batch
			// 128: a batch is more CPU than one of the attackers'
			// samples, as a trainer's is (a worker keeps a sample it
			// took: a victim whose whole window of batches were less
			// than one such sample would leave the worker to it between
			// its batches).
			victimJob := smallJob("victim", tc.batch)
			victimJob.Job.Transform.Ops[0] = rrcOp(224)
			wg.Go(func() { trainerOn(ctx, t, e.client, victimJob) })
			var victim *pipeline.Queue
			waitUntil(t, "the victim's queue", func() bool {
				for _, q := range e.srv.exec.Queues() {
					if strings.Contains(q.Name(), "victim") && q.Made() > 0 {
						victim = q
					}
				}
				return victim != nil
			})
			var attackers []*pipeline.Queue
			now := func() capacity {
				c := capacity{victim: victim.Made(), vcpu: victim.CPU()}
				c.cpu, c.idle = e.srv.exec.Capacity()
				for _, q := range attackers {
					c.attackerCPU += q.CPU()
				}
				return c
			}
			// Its first epoch is cold (files read, no decoder index or
			// coefficient cache yet): its rate alone is the second's.
			epoch := uint64(victimSize)
			waitUntil(t, "the victim's first epoch", func() bool { return victim.Made() >= epoch })
			c0 := now()
			waitUntil(t, "the victim alone making 2000 samples", func() bool { return victim.Made()-c0.victim >= 2000 })
			alone := now().sub(c0)

			actx, disconnect := context.WithCancel(ctx)
			var awg sync.WaitGroup
			for range tc.jobs {
				awg.Go(func() { trainerOn(actx, t, pb.NewFeedServiceClient(attacker), attack) })
			}
			waitUntil(t, "every attacking job's queue making samples", func() bool {
				attackers = nil
				for _, q := range e.srv.exec.Queues() {
					if strings.Contains(q.Name(), "bomb") && q.Made() > 0 {
						attackers = append(attackers, q)
					}
				}
				return len(attackers) == tc.jobs
			})
			// The two clients' shares are set at the schedule's next
			// rebalance (every 500 ms): from the attackers' first 0.5 s
			// of CPU on.
			a0 := now()
			waitUntil(t, "the attackers using 0.5 s of CPU", func() bool { return now().attackerCPU-a0.attackerCPU >= 500*time.Millisecond })
			d0 := now()
			waitUntil(t, "the attackers using 3 s of CPU", func() bool { return now().attackerCPU-d0.attackerCPU >= 3*time.Second })
			during := now().sub(d0)

			gone0 := now()
			told0, _ := e.srv.exec.Abandoned()
			disconnect()
			attacker.Close()
			waitUntil(t, "the attackers' queues closed and their samples running back", func() bool {
				for _, q := range e.srv.exec.Queues() {
					if strings.Contains(q.Name(), "bomb") {
						return false
					}
				}
				told, back := e.srv.exec.Abandoned()
				return told == back
			})
			awg.Wait()
			told1, _ := e.srv.exec.Abandoned()
			stop := now().sub(gone0)
			r0 := now()
			waitUntil(t, "the victim making 2000 samples after the attack", func() bool { return victim.Made()-r0.victim >= 2000 })
			after := now().sub(r0)

			t.Logf("the attack: %s (predicted %v a sample at worst; one size up refused)", attack.GetJob().GetTransform().GetOps()[0], costOf(t, e.srv, attack))
			t.Logf("victim alone: %d samples in %.3f s of the workers' time (%.3f s CPU, %.3f s idle): %.0f a second",
				alone.victim, (alone.cpu + alone.idle).Seconds(), alone.cpu.Seconds(), alone.idle.Seconds(), alone.rate())
			t.Logf("during: %d samples in %.3f s (the victim's CPU %.3f s, the attackers' %.3f s: its share %.3f; idle %.3f s): %.0f a second, %.2fx",
				during.victim, (during.cpu + during.idle).Seconds(), during.vcpu.Seconds(), during.attackerCPU.Seconds(),
				during.vcpu.Seconds()/during.cpu.Seconds(), during.idle.Seconds(), during.rate(), during.rate()/alone.rate())
			t.Logf("disconnect: the attackers' work stopped within %.3f s of the workers' time (%.3f s of it the attackers' CPU; %d samples abandoned running)",
				(stop.cpu + stop.idle).Seconds(), stop.attackerCPU.Seconds(), told1-told0)
			t.Logf("after: %d samples in %.3f s: %.0f a second, %.2fx", after.victim, (after.cpu + after.idle).Seconds(), after.rate(), after.rate()/alone.rate())
			t.Logf("the victim's part of the workers' time: alone %.3f, during %.3f (%.2fx), after %.3f (%.2fx)",
				alone.part(), during.part(), during.part()/alone.part(), after.part(), after.part()/alone.part())
			if r := during.part() / alone.part(); r < 0.45 {
				t.Errorf("during the attack the victim kept %.2fx its part of the workers alone, want its half (at least 0.45x)", r)
			}
			// What the attackers' samples took after the disconnect is their
			// queues' own CPU (thread CPU clocks: the host's load does not
			// stretch it); the workers' time to their stop above counts
			// idle wall time too, logged only.
			if stop.attackerCPU > 2*time.Second {
				t.Errorf("the attackers' samples took %v of CPU after they disconnected, want under 2 s", stop.attackerCPU)
			}
			// After the attack every CPU-second the workers gave went to the
			// victim: no queue but its own took any. The workers' idle
			// time is not asserted on: the executor is work-conserving (a
			// worker sleeps only when no queue has a sample, pick), so
			// with the victim alone it idles only while the victim's own
			// batches are not yet asked for (its trainer, the send loop,
			// its leases), which the host's load stretches: that ratio to
			// its part alone (logged above) was 1.00 on a quiet machine
			// and 0.83 under load.
			if after.attackerCPU != 0 || after.cpu-after.vcpu > after.cpu/100 {
				t.Errorf("after the attack the workers gave %v of CPU to other queues than the victim's (%v of it the attackers'), of %v: want none",
					after.cpu-after.vcpu, after.attackerCPU, after.cpu)
			}
		})
	}
}

// costOf is the predicted worst CPU of a sample of open's job.
func costOf(t *testing.T, s *Server, open *pb.OpenJob) time.Duration {
	j, err := s.newJob(open.GetJob(), job.Origin{})
	if err != nil {
		t.Fatal(err)
	}
	return j.Cost().Max
}

// TestClientIdentity: the executor shares the cores by client first, and
// a client is a connection, or with mutual TLS the subject of its
// certificate: jobs opened on one connection are one client however many
// they are, two connections are two clients; over mutual TLS two
// connections with one certificate are one client.
func TestClientIdentity(t *testing.T) {
	ds, err := filepath.Abs("../testdata/photos")
	if err != nil {
		t.Fatal(err)
	}
	open := func(ctx context.Context, wg *sync.WaitGroup, client pb.FeedServiceClient) {
		o := smallJob("photos", 4)
		wg.Go(func() { trainerOn(ctx, t, client, o) })
	}
	clients := func(e *testEnv, want int) map[string]int {
		var got map[string]int
		waitUntil(t, "the jobs' queues in the schedule", func() bool {
			got = e.srv.shares.FeedClients()
			n := 0
			for _, k := range got {
				n += k
			}
			return n == want
		})
		return got
	}

	e := startServer(t, Config{Workers: 1, Datasets: map[string]string{"photos": ds}})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	var wg sync.WaitGroup
	second := pb.NewFeedServiceClient(dial(t, e.addr))
	for range 3 {
		open(ctx, &wg, e.client)
	}
	open(ctx, &wg, second)
	got := clients(e, 4)
	if len(got) != 2 {
		t.Errorf("3 jobs on one connection and 1 on another: clients %v, want 2", got)
	}
	for id, n := range got {
		if !strings.HasPrefix(id, "conn 127.0.0.1:") || n != 3 && n != 1 {
			t.Errorf("client %q with %d jobs: want conn 127.0.0.1:port, of 3 or 1", id, n)
		}
	}
	cancel()
	wg.Wait()

	ca, cert, key := testCA(t)
	pool, _ := certPool(ca)
	clientCert, _ := tls.LoadX509KeyPair(cert, key)
	withCert := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}))
	m := startServer(t, Config{Workers: 1, Datasets: map[string]string{"photos": ds}, TLSCert: cert, TLSKey: key, TLSClientCA: ca})
	ctx, cancel = context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for range 2 {
		open(ctx, &wg, pb.NewFeedServiceClient(dial(t, m.addr, withCert)))
	}
	got = clients(m, 2)
	if len(got) != 1 || got["cert CN=stoker"] != 2 {
		t.Errorf("2 connections of one client certificate: clients %v, want one, \"cert CN=stoker\" with 2 jobs", got)
	}
	cancel()
	wg.Wait()
}
