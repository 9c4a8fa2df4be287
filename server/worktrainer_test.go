package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// madeByKind is the samples the executor has made for Feed jobs and for
// Work jobs: stoker_executor_samples_total, and what the stall schedule's
// queues made since it was last counted.
func (e *testEnv) madeByKind() (feed, work uint64) {
	counted := func() (feed, work uint64) {
		return uint64(testutil.ToFloat64(e.srv.m.executorSamples.WithLabelValues("feed"))),
			uint64(testutil.ToFloat64(e.srv.m.executorSamples.WithLabelValues("work")))
	}
	return e.srv.shares.ByKind(counted, func(q *pipeline.Queue, counted uint64) uint64 { return q.Made() - counted })
}

// contestedByKind is the samples the executor gave the queues the stall
// schedule weighs now, of Feed jobs and of Work jobs, while a queue of the
// other executor class had samples waiting (pipeline.Queue.Contested).
func (e *testEnv) contestedByKind() (feed, work uint64) {
	return e.srv.shares.ByKind(nil, func(q *pipeline.Queue, _ uint64) uint64 { return q.Contested() })
}

// makePhotos writes an ImageFolder of n 320x240 JPEGs of noisy content in
// 4 classes: samples that cost a decode and a resize each, so that the
// executor, not the stream, is what a job waits for.
func makePhotos(t testing.TB, n int) string {
	t.Helper()
	root := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("c%d", i%4))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		img := image.NewRGBA(image.Rect(0, 0, 320, 240))
		for p := range img.Pix {
			img.Pix[p] = uint8(p/4%256) ^ uint8(r.IntN(64))
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%04d.jpg", i)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// photoJob is a job over makePhotos' dataset "photos": 160 px crops,
// flipped, batches of 16.
func photoJob() *pb.OpenJob {
	o := smallJob("photos", 16)
	o.Job.Transform = &pb.TransformSpec{Ops: []*pb.Op{rrcOp(160), flipOp(nil)}}
	return o
}

// loudWorkStream is a Work client that keeps inflight leases of its one
// job (photoJob's) in flight, each claiming the given stall (1 is the
// most urgency there is) and 10 GPU seconds a sample, until ctx ends.
func loudWorkStream(ctx context.Context, conn *grpc.ClientConn, inflight, size int, stall float64) error {
	s, err := pb.NewWorkServiceClient(conn).Work(ctx)
	if err != nil {
		return err
	}
	if _, err := s.Recv(); err != nil {
		return err
	}
	if err := s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 1, Spec: photoJob().GetJob()}}}); err != nil {
		return err
	}
	id := uint64(1)
	lease := func() error {
		id++
		idx := make([]int64, 16)
		for i := range idx {
			idx[i] = int64((int(id)*16 + i) % size)
		}
		return s.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: id, Job: 1, Indices: idx, Stall: stall, Work: 10}}})
	}
	for range inflight {
		if err := lease(); err != nil {
			return err
		}
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		if m.GetChunk() != nil {
			continue
		}
		if f := m.GetFailed(); f != nil && codes.Code(f.GetCode()) != codes.ResourceExhausted {
			return status.Error(codes.Code(f.GetCode()), f.GetMessage())
		}
		if err := lease(); err != nil {
			return err
		}
	}
}

// TestTrainerBesideWorkStreams: 16 Work streams from one address, each
// keeping leases queued and claiming stall 1 (issue 27: they cut a trainer
// on the same server from 4,156 to 73 images/s), beside a trainer's Feed
// job. The executor's choices are counted, in samples: while the
// trainer's job had a sample waiting, no Work job was given one, and the
// trainer's job was given every one of the samples contested (some were:
// the Work jobs' queues are full all along). When the trainer is gone,
// the Work streams get the cores (neither kind is left idle cores the
// other does not use). How often the trainer's job has nothing waiting
// (its coordinator leasing again) depends on the machine's load, so the
// images/s it keeps is BenchmarkTrainerBesideWorkStreams's figure, not
// asserted here.
func TestTrainerBesideWorkStreams(t *testing.T) {
	const photos = 160
	e := startServer(t, Config{Workers: 2, Datasets: map[string]string{"photos": makePhotos(t, photos)}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // the whole run, not one wait: under -race beside a CPU hog it took past 2 minutes
	defer cancel()
	wctx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		conn := dial(t, e.addr)
		wg.Go(func() {
			if err := loudWorkStream(wctx, conn, 2, photos, 1); wctx.Err() == nil {
				errs <- err
			}
		})
	}
	defer func() {
		stopWork()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("a Work stream: %v", err)
		}
	}()
	waitUntil(t, "the Work streams' jobs at work", func() bool { _, w := e.madeByKind(); return e.workJobs() == 16 && w > 100 })
	_, workContested0 := e.contestedByKind()

	// 4 epochs, 40 batches, 640 samples: the executor's choice is counted
	// at every sample, and some 9 in 10 of the trainer's are contested
	// (the Work jobs' queues are full all along), so a Work sample given
	// while the trainer's waited shows in any run; 12 epochs, when the
	// test asserted the trainer's share of the samples, took 3 minutes
	// under -race on a loaded machine.
	const epochs = 4
	open := photoJob()
	open.Epochs = epochs
	stream := e.feedStream(t, ctx, open)
	var (
		batches, ended             int
		feed0, work0, feed1, work1 uint64
		feedContested              uint64
	)
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.GetBatch() != nil:
			if batches == 0 {
				feed0, work0 = e.madeByKind()
			}
			feed1, work1 = e.madeByKind()
			if f, _ := e.contestedByKind(); f > feedContested {
				feedContested = f // the job's queue goes when it ends
			}
			batches++
		case m.GetEnd() != nil && m.GetEnd().GetBatches() > 0:
			ended++
		}
	}
	_, workContested := e.contestedByKind()
	feed, work := feed1-feed0, work1-work0
	t.Logf("%d batches; from the first to the last, %d samples made for the trainer, %d for the Work streams (the trainer's share %.3f); contested: %d to the trainer, %d to the Work streams",
		batches, feed, work, float64(feed)/float64(feed+work), feedContested, workContested-workContested0)
	if ended != epochs || batches != 10*epochs {
		t.Fatalf("%d epochs, %d batches; want %d and %d", ended, batches, epochs, 10*epochs)
	}
	if workContested != workContested0 || feedContested == 0 {
		t.Errorf("while both kinds had samples waiting, the trainer's job got %d, the Work jobs %d; want all to the trainer's, and some",
			feedContested, workContested-workContested0)
	}
	// The trainer gone, the Work jobs take the cores.
	_, w := e.madeByKind()
	waitUntil(t, "the Work streams served after the trainer", func() bool { _, w2 := e.madeByKind(); return w2 > w+200 })
}

// trainFor runs a whole Feed stream of open and returns the samples it
// got and how long it took.
func trainFor(b testing.TB, e *testEnv, open *pb.OpenJob) (int, time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	stream := e.feedStream(b, ctx, open)
	n := 0
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return n, time.Since(start)
		}
		if err != nil {
			b.Fatal(err)
		}
		if h := m.GetBatch(); h != nil {
			n += int(h.GetShape()[0])
		}
	}
}

// BenchmarkTrainerBesideWorkStreams measures a trainer's images/s on a
// server alone, then beside 16 Work streams from one address that keep
// leases queued claiming stall 1 or stall 0 (issue 27: 4,156 → 96 and 73
// images/s), in turns, each of b.N rounds running both; it reports both
// and their ratio (the goal: at least 0.8). The decoder index is off, so
// that a later turn is not faster for the files an earlier one decoded.
//
//	go test -run '^$' -bench BenchmarkTrainerBesideWorkStreams -benchtime 3x ./server/
func BenchmarkTrainerBesideWorkStreams(b *testing.B) {
	for _, stall := range []float64{1, 0} {
		b.Run(fmt.Sprintf("stall=%g", stall), func(b *testing.B) { benchTrainerBesideWorkStreams(b, stall) })
	}
}

func benchTrainerBesideWorkStreams(b *testing.B, stall float64) {
	const photos = 160
	e := startServer(b, Config{Datasets: map[string]string{"photos": makePhotos(b, photos)}, IndexBudget: -1, Workers: runtime.GOMAXPROCS(0)})
	open := photoJob()
	open.Epochs = 8 // 1,280 samples a turn
	var alone, beside struct {
		n int
		d time.Duration
	}
	for b.Loop() {
		n, d := trainFor(b, e, open)
		alone.n, alone.d = alone.n+n, alone.d+d

		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 16 {
			conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				defer conn.Close()
				if err := loudWorkStream(ctx, conn, 2, photos, stall); ctx.Err() == nil {
					b.Error(err)
				}
			})
		}
		waitUntil(b, "the Work streams at work", func() bool { _, w := e.madeByKind(); return e.workJobs() == 16 && w > 0 })
		n, d = trainFor(b, e, open)
		beside.n, beside.d = beside.n+n, beside.d+d
		stop()
		wg.Wait()
		waitUntil(b, "the Work streams' jobs ended", func() bool { return e.workJobs() == 0 })
	}
	a, w := float64(alone.n)/alone.d.Seconds(), float64(beside.n)/beside.d.Seconds()
	b.ReportMetric(a, "alone_images/s")
	b.ReportMetric(w, "beside_images/s")
	b.ReportMetric(w/a, "beside/alone")
}
