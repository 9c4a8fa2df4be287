package server

import (
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Feed implements stokerv1.FeedServiceServer: it validates the job the
// first message opens, sends JobInfo, the batches from start_batch on as
// credits allow, and EpochEnd, then returns.
func (s *Server) Feed(stream stokerv1.FeedService_FeedServer) error {
	ctx := stream.Context()
	release, err := s.acquireStream(ctx)
	if err != nil {
		return err
	}
	defer release()
	s.m.streamsActive.Inc()
	defer s.m.streamsActive.Dec()

	req, err := stream.Recv()
	if errors.Is(err, io.EOF) {
		return status.Error(codes.InvalidArgument, "stream closed before OpenJob")
	}
	if err != nil {
		return toStatus(err)
	}
	o := req.GetOpen()
	if o == nil {
		return status.Errorf(codes.InvalidArgument, "the first message on a Feed stream must be OpenJob, got %T", req.GetMsg())
	}
	id := strconv.FormatUint(s.streamID.Add(1), 10)
	log := s.log.With("stream", id, "dataset", o.GetDataset(), "client", clientHost(ctx))
	j, err := s.newJob(o)
	if err != nil {
		log.Warn("job refused", "err", err)
		return err
	}
	log = log.With("epoch", o.GetEpoch(), "rank", j.rank, "world_size", j.world)
	log.Info("job open", "batch_size", o.GetBatchSize(), "batches", j.plan.Batches(),
		"start_batch", j.start, "transform", j.t.String(), "credits", j.credits)
	f := &feed{s: s, j: j, stream: stream, begin: time.Now(),
		stall: s.m.stallRatio.WithLabelValues(j.name, id)}
	defer s.m.stallRatio.DeleteLabelValues(j.name, id)
	err = f.run(ctx)
	attrs := []any{"batches", f.batches, "samples", f.samples, "sample_errors", f.sampleErrs,
		"duration", time.Since(f.begin).Round(time.Millisecond)}
	switch {
	case errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled:
		// The client went away: normal for a loader that only asked for
		// JobInfo (len()) or stopped iterating early.
		log.Info("job close", append(attrs, "cancelled_by_client", true)...)
	case err != nil:
		log.Warn("job close", append(attrs, "err", err)...)
	default:
		log.Info("job close", attrs...)
	}
	return toStatus(err)
}

// feed is one Feed stream at work: a producer that makes at most window
// batches at once, a send loop that sends them as credits allow, and a
// receiver that collects credits. A fixed pool of batch buffers bounds the
// batches the stream holds and is reused, so steady state allocates little.
type feed struct {
	s      *Server
	j      *job
	stream stokerv1.FeedService_FeedServer
	begin  time.Time
	stall  prometheus.Gauge

	// Owned by the send loop.
	batches, samples, sampleErrs uint64
	chunk                        stokerv1.Chunk
	chunkMsg                     stokerv1.FeedResponse
}

// made is a batch the producer finished.
type made struct {
	k   int
	b   *pipeline.Batch
	err error
}

func (f *feed) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: the producer and its fills stop
	defer cancel()

	if err := f.stream.Send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Job{Job: f.j.info()}}); err != nil {
		return err
	}
	// The receiver blocks in Recv, which returns once the handler has
	// returned, so it is not waited for; it touches only channels and
	// metrics.
	grants := make(chan uint32)
	recvErr := make(chan error, 1)
	go f.receive(ctx, grants, recvErr)

	// The stream holds at most window + min(credits, window) batches: the
	// window being made, and as many ready ones as the trainer may take
	// right away (capped, so a large grant cannot pin unbounded memory).
	window := f.s.cfg.Window
	pool := window + int(min(f.j.credits, int64(window)))
	free := make(chan *pipeline.Batch, pool)
	for range pool {
		free <- new(pipeline.Batch)
	}
	done := make(chan made, pool) // never blocks: only pool batches exist
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.produce(ctx, window, free, done)
	}()
	return f.sendLoop(ctx, free, done, grants, recvErr)
}

// produce makes batches start..n-1 in order, at most window at a time, each
// into a buffer taken from free, and hands them to done.
func (f *feed) produce(ctx context.Context, window int, free <-chan *pipeline.Batch, done chan<- made) {
	j, exec := f.j, f.s.exec
	hist := f.s.m.batchSeconds.WithLabelValues(j.name)
	sem := make(chan struct{}, window)
	var wg sync.WaitGroup
	defer wg.Wait()
	for k := j.start; k < j.plan.Batches(); k++ {
		var b *pipeline.Batch
		select {
		case b = <-free:
		case <-ctx.Done():
			return
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			err := exec.Fill(ctx, j.ds, j.t, j.open.GetSeed(), j.open.GetEpoch(), j.plan.Batch(k), j.policy, b)
			hist.Observe(time.Since(t0).Seconds())
			<-sem
			done <- made{k: k, b: b, err: err}
		}()
	}
}

// sendLoop sends the made batches while credits last: in batch-number order,
// or lowest-numbered ready first when as_ready. Then EpochEnd.
func (f *feed) sendLoop(ctx context.Context, free chan<- *pipeline.Batch, done <-chan made, grants <-chan uint32, recvErr <-chan error) error {
	j := f.j
	credits := j.credits
	ready := make(map[int]*pipeline.Batch)
	next := j.start
	for left := j.plan.Batches() - j.start; left > 0; {
		if credits > 0 {
			if k, ok := f.pick(ready, next); ok {
				b := ready[k]
				delete(ready, k)
				if err := f.sendBatch(k, b); err != nil {
					return err
				}
				free <- b
				credits--
				left--
				next++
				continue
			}
		}
		select {
		case m := <-done:
			if m.err != nil {
				return m.err
			}
			ready[m.k] = m.b
		case n := <-grants:
			credits += int64(n)
		case err := <-recvErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.stream.Send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_End{End: &stokerv1.EpochEnd{
		Epoch: j.open.GetEpoch(), Batches: f.batches, Samples: f.samples, SampleErrors: f.sampleErrs,
	}}})
}

// pick returns the batch number to send next among the ready ones: next
// when in order, the lowest ready when as_ready.
func (f *feed) pick(ready map[int]*pipeline.Batch, next int) (int, bool) {
	if !f.j.open.GetAsReady() {
		_, ok := ready[next]
		return next, ok
	}
	k, ok := -1, false
	for n := range ready {
		if !ok || n < k {
			k, ok = n, true
		}
	}
	return k, ok
}

// sendBatch sends batch k's header and its pixels in chunks of at most
// MaxChunkBytes. Send marshals before it returns, so b and the reused chunk
// message are free again afterwards (no stats handler holds them).
func (f *feed) sendBatch(k int, b *pipeline.Batch) error {
	j := f.j
	shape := j.t.Shape()
	h := &stokerv1.BatchHeader{
		Epoch:     j.open.GetEpoch(),
		Number:    uint64(k),
		Shape:     []uint32{uint32(b.N), uint32(shape[0]), uint32(shape[1]), uint32(shape[2])},
		Dtype:     j.dtype,
		Labels:    b.Labels,
		Indices:   b.Indices,
		DataBytes: uint64(len(b.Data)),
	}
	for _, e := range b.Errors {
		h.Errors = append(h.Errors, &stokerv1.SampleError{Index: e.Index, Name: e.Name, Reason: e.Reason})
	}
	if err := f.stream.Send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Batch{Batch: h}}); err != nil {
		return err
	}
	f.chunkMsg.Msg = &stokerv1.FeedResponse_Chunk{Chunk: &f.chunk}
	for off := 0; off < len(b.Data); off += MaxChunkBytes {
		f.chunk.Number, f.chunk.Offset = uint64(k), uint64(off)
		f.chunk.Data = b.Data[off:min(off+MaxChunkBytes, len(b.Data))]
		if err := f.stream.Send(&f.chunkMsg); err != nil {
			return err
		}
	}
	f.chunk.Data = nil
	f.batches++
	f.samples += uint64(b.N)
	f.sampleErrs += uint64(len(b.Errors))
	m := f.s.m
	m.batchesSent.WithLabelValues(j.name).Inc()
	m.samplesSent.WithLabelValues(j.name).Add(float64(b.N))
	if len(b.Errors) > 0 {
		m.sampleErrors.WithLabelValues(j.name).Add(float64(len(b.Errors)))
		f.s.log.Debug("sample errors", "dataset", j.name, "batch", k, "errors", len(b.Errors), "first", b.Errors[0].Reason)
	}
	return nil
}

// receive reads the trainer's Credit messages until the stream ends: grants
// go to the send loop, wait reports to the metrics. A protocol error goes to
// recvErr; a half-close just means no more credits.
func (f *feed) receive(ctx context.Context, grants chan<- uint32, recvErr chan<- error) {
	name := f.j.name
	wait := f.s.m.trainerWait.WithLabelValues(name)
	var waited float64
	for {
		req, err := f.stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr <- err
			}
			return
		}
		c := req.GetCredit()
		if c == nil {
			recvErr <- status.Error(codes.InvalidArgument, "OpenJob may only be the first message of a Feed stream")
			return
		}
		if w := c.GetWaitSeconds(); w > 0 && !math.IsInf(w, 0) {
			waited += w
			wait.Add(w)
			if wall := time.Since(f.begin).Seconds(); wall > 0 {
				f.stall.Set(min(waited/wall, 1))
			}
		}
		if c.GetCredits() == 0 {
			continue
		}
		select {
		case grants <- c.GetCredits():
		case <-ctx.Done():
			return
		}
	}
}
