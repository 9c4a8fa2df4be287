package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/coord/makertest"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/makers"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
)

// TestMakerConformance runs the makers' conformance suite (package coord's
// tests run it against a batch in parts) against this server's makers:
// its local executor's, on one decode goroutine, its samples held at
// their reads; and a peer's, over a Work stream on bufconn to a real
// worker server, its leases held on the worker before they are made. The
// reference for every batch is an executor of the job's own, alone.
func TestMakerConformance(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 6, false) // 18 samples: 4 whole batches of 4
	t.Run("local", func(t *testing.T) {
		makertest.Run(t, func(t *testing.T) makertest.Subject { return localSubject(t, root) })
	})
	t.Run("peer", func(t *testing.T) {
		makertest.Run(t, func(t *testing.T) makertest.Subject { return peerSubject(t, root) })
	})
}

// localSubject is a server's local maker, over one decode goroutine,
// with the job's reads held at the gate.
func localSubject(t *testing.T, root string) makertest.Subject {
	s := newTestServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1})
	g := &sampleGate{}
	ref := reference(t, conformanceJob(t, s))
	// The job the maker is given reads through the gate: a job is not
	// written once made, so it is made again over the held dataset.
	s.datasets["tiny"] = &heldDataset{Dataset: s.datasets["tiny"], g: g}
	j := conformanceJob(t, s)
	ms, _ := s.makers.Snapshot()
	var lm *makers.Local
	for _, m := range ms {
		if l, ok := m.(*makers.Local); ok {
			lm = l
		}
	}
	if lm == nil {
		t.Fatal("the server has no local maker")
	}
	return makertest.Subject{
		Maker: bound{lm, j}, Batch: func(k int) []int64 { return j.EpochPlan(0, 0).Batch(k) }, SampleBytes: j.Transform().SampleBytes(),
		Want: ref, Hold: g.hold, Places: true,
		// Cancelled, Fill drops the samples not started and waits for the
		// one its goroutine started.
		ReturnsHeld: false,
		Dropped: func() bool {
			n, ok := lm.Pending(j)
			return ok && n == 0
		},
		Kept: lm.Jobs,
	}
}

// peerSubject is a peer maker over a Work stream on bufconn to a worker
// server whose leases are held at the gate before they are made.
func peerSubject(t *testing.T, root string) makertest.Subject {
	g := &sampleGate{}
	worker := newTestServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2,
		Making: func(_ dataset.Dataset, _ int, next MakeFunc) MakeFunc {
			return func(ctx context.Context, epoch uint64, indices []int64, place []int, b *pipeline.Batch) error {
				g.wait()
				return next(ctx, epoch, indices, place, b)
			}
		}})
	gs, _, err := worker.GRPCServer()
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)

	s := newTestServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1})
	j := conformanceJob(t, s)
	ready := make(chan struct{}, 1)
	m := &peerMaker{forwards: make(map[coord.Job]*work.Job)}
	m.p, err = work.Dial("bufnet", func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	}, work.WithIdentity(s.cfg.decoderIdentity()), work.WithDialOptions(grpc.WithContextDialer(
		func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.p.Close() })
	waitUntil(t, "the peer ready", m.Ready)
	return makertest.Subject{
		Maker: bound{m, j}, Batch: func(k int) []int64 { return j.EpochPlan(0, 0).Batch(k) }, SampleBytes: j.Transform().SampleBytes(),
		Want: reference(t, j), Hold: g.hold, Places: true,
		// Cancelled, the Peer withdraws the lease and leaves the worker
		// to it.
		ReturnsHeld: true,
		Kept: func() int {
			m.mu.Lock()
			defer m.mu.Unlock()
			return len(m.forwards) + int(testutil.ToFloat64(worker.m.work.Jobs))
		},
	}
}

// newTestServer is a Server (no gRPC server of its own), closed when the
// test ends.
func newTestServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// conformanceJob is a job of batches of 4 of s's dataset "tiny".
func conformanceJob(t *testing.T, s *Server) *job.Job {
	t.Helper()
	j, err := s.newJob(smallJob("tiny", 4).GetJob(), job.Origin{ID: "conformance"})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// reference makes a whole lease of j on an executor of its own, alone.
func reference(t *testing.T, j *job.Job) func(*testing.T, *lease.Lease) *batch.Batch {
	exec := pipeline.NewExecutor(1)
	t.Cleanup(exec.Close)
	ds := j.Data()
	return func(t *testing.T, l *lease.Lease) *batch.Batch {
		var b pipeline.Batch
		if err := exec.Fill(context.Background(), ds, j.Transform(), j.Spec().GetSeed(), l.Epoch, l.Indices, j.Policy(), &b); err != nil {
			t.Fatal(err)
		}
		return &b
	}
}

// bound is a maker bound to job j, as the suite takes it.
type bound struct {
	m coord.Maker
	j coord.Job
}

func (b bound) Make(ctx context.Context, l *lease.Lease, bt *batch.Batch) (lease.Made, error) {
	return b.m.Make(ctx, b.j, l, bt)
}
func (b bound) Free() int   { return b.m.Free() }
func (b bound) Ready() bool { return b.m.Ready() }
func (b bound) Forget()     { b.m.Forget(b.j) }

// sampleGate holds what passes it while shut (hold), as a read that hangs
// would: it says so on held and waits, whatever the caller's context,
// until release opens it.
type sampleGate struct {
	mu   sync.Mutex
	shut chan struct{} // nil: open
	held chan struct{}
}

func (g *sampleGate) hold() (<-chan struct{}, func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	shut, held := make(chan struct{}), make(chan struct{}, 64)
	g.shut, g.held = shut, held
	var once sync.Once
	return held, func() {
		once.Do(func() {
			g.mu.Lock()
			g.shut = nil
			g.mu.Unlock()
			close(shut)
		})
	}
}

func (g *sampleGate) wait() {
	g.mu.Lock()
	shut, held := g.shut, g.held
	g.mu.Unlock()
	if shut == nil {
		return
	}
	select {
	case held <- struct{}{}:
	default:
	}
	<-shut
}

// heldDataset is a dataset whose reads wait at a gate.
type heldDataset struct {
	dataset.Dataset
	g *sampleGate
}

func (d *heldDataset) Read(i int, buf []byte) ([]byte, error) {
	d.g.wait()
	return d.Dataset.Read(i, buf)
}
