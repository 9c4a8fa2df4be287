package server

import (
	"context"
	"errors"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Feed implements stokerv1.FeedServiceServer: it validates the job the
// first message opens and runs a coordinator for it, adapting the
// coordinator's output to the stream: JobInfo, batches as headers and
// chunks as credits allow, EpochEnd, epoch after epoch.
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
	log := s.log.With("job", id, "dataset", truncate(o.GetJob().GetDataset(), 64), "client", clientHost(ctx))
	j, err := s.newJob(o.GetJob())
	if err != nil {
		log.Warn("job refused", "err", err)
		return err
	}
	st, err := streamOf(o, j)
	if err != nil {
		log.Warn("job refused", "err", err)
		return err
	}
	log = log.With("rank", j.rank, "world_size", j.world)
	log.Info("job open", "epoch", st.Epoch, "epochs", st.Epochs, "batch_size", o.GetJob().GetBatchSize(),
		"start_batch", st.Start, "skip", len(st.Skip), "consumed", st.Consumed, "transform", j.t.String(), "credits", st.Credits)
	c := newCoordinator(s, j, st, id, log)
	f := &feed{s: s, j: j, stream: stream, begin: time.Now(), stall: s.m.stallRatio.WithLabelValues(j.name, id)}
	defer s.m.stallRatio.DeleteLabelValues(j.name, id)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The receiver blocks in Recv, which returns once the handler has
	// returned, so it is not waited for; it touches only the coordinator's
	// credits and the metrics.
	go f.receive(c, cancel)
	err = c.run(ctx, f)
	attrs := []any{"epochs", f.epochs, "batches", f.batches, "samples", f.samples, "sample_errors", f.sampleErrs,
		"duration", time.Since(f.begin).Round(time.Millisecond)}
	switch {
	case errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled:
		// The client went away: normal for a loader that stopped iterating
		// early or was closed.
		log.Info("job close", append(attrs, "cancelled_by_client", true)...)
	case err != nil:
		log.Warn("job close", append(attrs, "err", err)...)
	default:
		log.Info("job close", attrs...)
	}
	return toStatus(err)
}

// streamOf validates the stream part of o for job j.
func streamOf(o *stokerv1.OpenJob, j *job) (Stream, error) {
	st := Stream{
		Epoch: o.GetEpoch(), Epochs: o.GetEpochs(), Consumed: o.GetConsumed(),
		AsReady: o.GetAsReady(), Credits: int64(o.GetCredits()), Skip: o.GetSkipBatches(),
	}
	p := j.plan(st.Epoch, st.Consumed)
	if o.GetStartBatch() > uint64(p.Batches()) {
		return st, status.Errorf(codes.InvalidArgument, "start_batch %d is past the epoch's %d batches", o.GetStartBatch(), p.Batches())
	}
	if len(st.Skip) > p.Batches() {
		return st, status.Errorf(codes.InvalidArgument, "%d skip_batches for an epoch of %d batches", len(st.Skip), p.Batches())
	}
	st.Start = int(o.GetStartBatch())
	return st, nil
}

// feed adapts a coordinator's output to a Feed stream (it is the
// coordinator's Sink).
type feed struct {
	s      *Server
	j      *job
	stream stokerv1.FeedService_FeedServer
	begin  time.Time
	stall  prometheus.Gauge

	// Owned by the coordinator's goroutine.
	epochs, batches, samples, sampleErrs uint64
	chunk                                stokerv1.Chunk
	chunkMsg                             stokerv1.FeedResponse
}

func (f *feed) EpochStart(info *stokerv1.JobInfo) error {
	return f.stream.Send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Job{Job: info}})
}

func (f *feed) EpochEnd(end *stokerv1.EpochEnd) error {
	f.epochs++
	return f.stream.Send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_End{End: end}})
}

// Batch sends batch k's header and its pixels in chunks of at most
// MaxChunkBytes. Send marshals before it returns, so b and the reused chunk
// message are free again afterwards (no stats handler holds them).
func (f *feed) Batch(epoch uint64, k int, b *pipeline.Batch) error {
	j := f.j
	if err := f.stream.Send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Batch{Batch: j.header(epoch, k, b)}}); err != nil {
		return err
	}
	f.chunkMsg.Msg = &stokerv1.FeedResponse_Chunk{Chunk: &f.chunk}
	if err := sendChunks(f.stream.Send, &f.chunkMsg, &f.chunk, uint64(k), b.Data); err != nil {
		return err
	}
	f.batches++
	f.samples += uint64(b.N)
	f.sampleErrs += uint64(len(b.Errors))
	m := f.s.m
	m.batchesSent.WithLabelValues(j.name).Inc()
	m.samplesSent.WithLabelValues(j.name).Add(float64(b.N))
	if len(b.Errors) > 0 {
		m.sampleErrors.WithLabelValues(j.name).Add(float64(len(b.Errors)))
		f.s.log.Debug("sample errors", "dataset", j.name, "epoch", epoch, "batch", k, "errors", len(b.Errors), "first", b.Errors[0].Reason)
	}
	return nil
}

// sendChunks sends data as Chunks of at most MaxChunkBytes numbered n,
// through msg and c, which are reused (msg must hold c as its chunk).
func sendChunks[M any](send func(M) error, msg M, c *stokerv1.Chunk, n uint64, data []byte) error {
	defer func() { c.Data = nil }()
	for off := 0; off < len(data); off += MaxChunkBytes {
		c.Number, c.Offset = n, uint64(off)
		c.Data = data[off:min(off+MaxChunkBytes, len(data))]
		if err := send(msg); err != nil {
			return err
		}
	}
	return nil
}

// receive reads the trainer's Credit messages until the stream ends: grants
// go to the coordinator, wait reports to the metrics. A protocol error
// cancels the job with it; a half-close just means no more credits.
func (f *feed) receive(c *coordinator, cancel context.CancelCauseFunc) {
	name := f.j.name
	wait := f.s.m.trainerWait.WithLabelValues(name)
	var waited float64
	for {
		req, err := f.stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				cancel(err)
			}
			return
		}
		cr := req.GetCredit()
		if cr == nil {
			cancel(status.Error(codes.InvalidArgument, "OpenJob may only be the first message of a Feed stream"))
			return
		}
		if w := cr.GetWaitSeconds(); w > 0 && !math.IsInf(w, 0) {
			waited += w
			wait.Add(w)
			if wall := time.Since(f.begin).Seconds(); wall > 0 {
				f.stall.Set(min(waited/wall, 1))
			}
		}
		if n := cr.GetCredits(); n > 0 {
			c.Grant(n)
		}
	}
}

// DescribeJob implements stokerv1.FeedServiceServer: the JobInfo of one
// epoch of a job, without making anything.
func (s *Server) DescribeJob(_ context.Context, req *stokerv1.DescribeJobRequest) (*stokerv1.DescribeJobResponse, error) {
	j, err := s.newJob(req.GetJob())
	if err != nil {
		return nil, err
	}
	return &stokerv1.DescribeJobResponse{Info: j.info(req.GetEpoch(), j.plan(req.GetEpoch(), req.GetConsumed()))}, nil
}
