package server

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/plan"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The test dataset: classes a, b, c with 13 JPEGs each, and c/bad.jpg (zero
// bytes): 40 samples. Files sort within a class, so bad.jpg is index 26.
const (
	dsSize   = 40
	badIndex = 26
)

func newEnv(t *testing.T, cfg Config) *testEnv {
	t.Helper()
	if cfg.Datasets == nil {
		cfg.Datasets = map[string]string{"tiny": makeDataset(t, []string{"a", "b", "c"}, 13, true)}
	}
	return startServer(t, cfg)
}

func labelOf(i int64) int64 {
	if i > badIndex {
		return 2
	}
	return min(i/13, 2)
}

func TestFeedTwoRanks(t *testing.T) {
	e := newEnv(t, Config{})
	const world, bs = 2, 8
	seen := make(map[int64]int) // distinct planned indices per rank, summed
	var padded, sampleErrs int
	for r := range uint32(world) {
		open := smallJob("tiny", bs)
		open.Job.Rank, open.Job.WorldSize = r, world
		ep := e.collect(t, open)
		if ep.info.GetBatches() != 3 || ep.info.GetSamples() != 20 || len(ep.batches) != 3 {
			t.Fatalf("rank %d: info %v, %d batches; want 3 batches of 20 samples", r, ep.info, len(ep.batches))
		}
		if !slices.Equal(ep.info.GetSampleShape(), []uint32{3, 32, 32}) || ep.info.GetDatasetSize() != dsSize || len(ep.info.GetClasses()) != 3 {
			t.Errorf("rank %d: info %v", r, ep.info)
		}
		plan := plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, Rank: int(r), World: world, BatchSize: bs})
		distinct := make(map[int64]bool)
		for k, b := range ep.batches {
			h := b.hdr
			n := uint32(len(plan.Batch(k)))
			if h.GetNumber() != uint64(k) {
				t.Errorf("rank %d: batch %d has number %d", r, k, h.GetNumber())
			}
			if !slices.Equal(h.GetShape(), []uint32{n, 3, 32, 32}) || h.GetDtype() != pb.Dtype_DTYPE_UINT8 || len(b.data) != int(n)*3*32*32 {
				t.Errorf("rank %d batch %d: shape %v dtype %v %d bytes", r, k, h.GetShape(), h.GetDtype(), len(b.data))
			}
			if len(h.GetIndices()) != int(n) || len(h.GetLabels()) != int(n) {
				t.Fatalf("rank %d batch %d: %d indices, %d labels, want %d", r, k, len(h.GetIndices()), len(h.GetLabels()), n)
			}
			for i, idx := range h.GetIndices() {
				distinct[idx] = true
				if h.GetLabels()[i] != labelOf(idx) {
					t.Errorf("index %d has label %d, want %d", idx, h.GetLabels()[i], labelOf(idx))
				}
				if want := plan.Batch(k)[i]; idx != want && want != badIndex {
					t.Errorf("rank %d batch %d slot %d: index %d, plan says %d", r, k, i, idx, want)
				}
			}
			for _, se := range h.GetErrors() {
				distinct[se.GetIndex()] = true
				padded++
				if se.GetIndex() != badIndex || se.GetName() != "c/bad.jpg" || !strings.Contains(se.GetReason(), "corrupt") {
					t.Errorf("unexpected sample error %v", se)
				}
			}
		}
		for idx := range distinct {
			seen[idx]++
		}
		if end := ep.end; end.GetBatches() != 3 || end.GetSamples() != 20 {
			t.Errorf("rank %d: EpochEnd %v", r, end)
		}
		sampleErrs += int(ep.end.GetSampleErrors())
	}
	for i := range int64(dsSize) {
		if seen[i] != 1 {
			t.Errorf("index %d went to %d ranks, want 1", i, seen[i])
		}
	}
	if padded != 1 || sampleErrs != 1 {
		t.Errorf("%d padded samples, %d counted in EpochEnd; want the one corrupt file", padded, sampleErrs)
	}
	if got := testutil.ToFloat64(e.srv.m.sampleErrors.WithLabelValues("tiny")); got != 1 {
		t.Errorf("stoker_sample_errors_total = %v, want 1", got)
	}
	if got := testutil.ToFloat64(e.srv.m.samplesSent.WithLabelValues("tiny")); got != dsSize {
		t.Errorf("stoker_samples_sent_total = %v, want %d", got, dsSize)
	}
	if got := testutil.ToFloat64(e.srv.m.streamsActive); got != 0 {
		t.Errorf("stoker_streams_active = %v after the streams closed", got)
	}
}

func sameBatches(t *testing.T, what string, a, b []gotBatch) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d batches vs %d", what, len(a), len(b))
	}
	for k := range a {
		if !proto.Equal(a[k].hdr, b[k].hdr) || !bytes.Equal(a[k].data, b[k].data) {
			t.Errorf("%s: batch %d differs", what, a[k].hdr.GetNumber())
		}
	}
}

func TestFeedDeterministic(t *testing.T) {
	e := newEnv(t, Config{})
	a := e.collect(t, smallJob("tiny", 8))
	b := e.collect(t, smallJob("tiny", 8))
	sameBatches(t, "same job twice", a.batches, b.batches)

	next := smallJob("tiny", 8)
	next.Epoch = 1
	c := e.collect(t, next)
	if len(c.batches) != len(a.batches) {
		t.Fatalf("epoch 1 has %d batches, epoch 0 %d", len(c.batches), len(a.batches))
	}
	var order0, order1 []int64
	for k := range a.batches {
		order0 = append(order0, a.batches[k].hdr.GetIndices()...)
		order1 = append(order1, c.batches[k].hdr.GetIndices()...)
		if c.batches[k].hdr.GetEpoch() != 1 {
			t.Errorf("epoch 1 batch header says epoch %d", c.batches[k].hdr.GetEpoch())
		}
	}
	if slices.Equal(order0, order1) {
		t.Error("epochs 0 and 1 have the same order")
	}
}

func TestFeedResume(t *testing.T) {
	e := newEnv(t, Config{})
	full := e.collect(t, smallJob("tiny", 8))
	if len(full.batches) != 5 {
		t.Fatalf("%d batches, want 5", len(full.batches))
	}
	for _, start := range []uint64{1, 4, 5} {
		open := smallJob("tiny", 8)
		open.StartBatch = start
		tail := e.collect(t, open)
		if tail.info.GetBatches() != 5 {
			t.Errorf("start %d: JobInfo says %d batches, want the epoch's 5", start, tail.info.GetBatches())
		}
		sameBatches(t, "resumed tail", full.batches[start:], tail.batches)
	}
}

// gatedMaker is the server's local maker with batch 0 of every epoch held
// until the test closes release: the test decides which batch is ready
// last.
type gatedMaker struct {
	coord.Maker
	release chan struct{}
}

func (m *gatedMaker) Make(ctx context.Context, j coord.Job, l *lease.Lease, b *pipeline.Batch) (lease.Made, error) {
	if l.Number == 0 {
		select {
		case <-m.release:
		case <-ctx.Done():
			return lease.Made{}, ctx.Err()
		}
	}
	return m.Maker.Make(ctx, j, l, b)
}

// TestFeedAsReady: with batch 0 held back by its maker, an as-ready stream
// delivers every other batch first, then batch 0; the batches are the
// in-order stream's, byte for byte.
func TestFeedAsReady(t *testing.T) {
	e := newEnv(t, Config{Window: 16})
	in := e.collect(t, smallJob("tiny", 4))
	ms, _ := e.srv.makers.Snapshot()
	gate := &gatedMaker{Maker: ms[0], release: make(chan struct{})}
	e.srv.coord.Makers = coord.NewMakers(gate)

	open := smallJob("tiny", 4)
	open.AsReady = true
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	stream := e.feedStream(t, ctx, open)
	if m, err := stream.Recv(); err != nil || m.GetJob() == nil {
		t.Fatalf("first message %v, %v; want JobInfo", m, err)
	}
	var out []gotBatch
	for len(out) < len(in.batches) {
		b, end, err := readBatch(stream, MaxChunkBytes)
		if err != nil || end != nil {
			t.Fatalf("after %d batches: %v, end %v", len(out), err, end)
		}
		out = append(out, b)
		if len(out) == len(in.batches)-1 {
			close(gate.release) // every other batch came first
		}
	}
	var order []uint64
	for _, b := range out {
		order = append(order, b.hdr.GetNumber())
	}
	if order[len(order)-1] != 0 || slices.Contains(order[:len(order)-1], 0) {
		t.Errorf("as-ready order %v: want batch 0, held back, last", order)
	}
	slices.SortFunc(out, func(a, b gotBatch) int { return int(a.hdr.GetNumber()) - int(b.hdr.GetNumber()) })
	sameBatches(t, "as ready, sorted", in.batches, out)
}

func TestFeedFailPolicyDrop(t *testing.T) {
	e := newEnv(t, Config{})
	open := smallJob("tiny", dsSize)
	open.Job.Shuffle = false
	open.Job.FailPolicy = pb.FailPolicy_FAIL_POLICY_DROP
	ep := e.collect(t, open)
	h := ep.batches[0].hdr
	if h.GetShape()[0] != dsSize-1 || len(h.GetIndices()) != dsSize-1 || slices.Contains(h.GetIndices(), badIndex) {
		t.Errorf("shape %v, indices %v: want the corrupt sample dropped", h.GetShape(), h.GetIndices())
	}
	if len(h.GetErrors()) != 1 || h.GetErrors()[0].GetIndex() != badIndex {
		t.Errorf("errors %v, want index %d", h.GetErrors(), badIndex)
	}
}

// TestFeedAllSamplesFail: a batch whose every sample failed never reaches
// the trainer as a batch of no samples: the job ends with DATA_LOSS
// saying so, naming the file and why.
func TestFeedAllSamplesFail(t *testing.T) {
	e := newEnv(t, Config{})
	open := smallJob("tiny", 1)
	open.Job.Shuffle = false
	open.StartBatch = badIndex
	open.Credits = 1
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	stream := e.feedStream(t, ctx, open)
	if _, err := stream.Recv(); err != nil { // JobInfo
		t.Fatal(err)
	}
	b, _, err := readBatch(stream, MaxChunkBytes)
	if err == nil {
		t.Fatalf("got batch %v; want the job ended", b.hdr)
	}
	if status.Code(err) != codes.DataLoss || !strings.Contains(err.Error(), fmt.Sprintf("every sample of batch %d of epoch 0 failed", badIndex)) ||
		!strings.Contains(err.Error(), "c/bad.jpg: corrupt image: empty file") {
		t.Errorf("%v; want DATA_LOSS saying every sample of the batch failed, naming the file and why", err)
	}
}

// creditWait says whether a coordinator of e holds a ready batch for
// want of its trainer's credit.
func (e *testEnv) creditWait() bool {
	waiting := false
	e.srv.active.Range(func(_, v any) bool {
		waiting = !v.(*coord.Coordinator).CreditWaitSince().IsZero()
		return !waiting
	})
	return waiting
}

func TestFeedCredits(t *testing.T) {
	e := newEnv(t, Config{Window: 2})
	open := smallJob("tiny", 8)
	open.Credits = 1
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	stream := e.feedStream(t, ctx, open)
	if m, err := stream.Recv(); err != nil || m.GetJob() == nil {
		t.Fatalf("first message %v, %v", m, err)
	}
	type result struct {
		b   gotBatch
		end *pb.EpochEnd
		err error
	}
	results := make(chan result)
	go func() {
		for {
			b, end, err := readBatch(stream, MaxChunkBytes)
			results <- result{b, end, err}
			if err != nil || end != nil {
				return
			}
		}
	}()
	want := uint64(0)
	expect := func() {
		t.Helper()
		select {
		case r := <-results:
			if r.err != nil || r.end != nil || r.b.hdr.GetNumber() != want {
				t.Fatalf("got %v, %v, %v; want batch %d", r.b.hdr, r.end, r.err, want)
			}
			want++
		case <-ctx.Done():
			t.Fatalf("batch %d never came", want)
		}
	}
	// expectNothing waits until the server has the next batch ready and
	// holds it for want of a credit (its coordinator's credit wait): a
	// batch that comes first, or then, came without one.
	expectNothing := func() {
		t.Helper()
		poll := time.NewTicker(10 * time.Millisecond)
		defer poll.Stop()
		for !e.creditWait() {
			select {
			case r := <-results:
				t.Fatalf("got batch %v with no credit left", r.b.hdr.GetNumber())
			case <-ctx.Done():
				t.Fatalf("batch %d never held for want of a credit", want)
			case <-poll.C:
			}
		}
		select {
		case r := <-results:
			t.Fatalf("got batch %v with no credit left", r.b.hdr.GetNumber())
		default:
		}
	}
	grant := func(n uint32) {
		t.Helper()
		if err := stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: n, WaitSeconds: 0.25, Batches: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	expect()
	expectNothing()
	grant(1)
	expect()
	expectNothing()
	grant(3)
	expect()
	expect()
	expect()
	select {
	case r := <-results:
		if r.err != nil || r.end == nil || r.end.GetBatches() != 5 {
			t.Fatalf("got %v, %v, %v; want EpochEnd after 5 batches", r.b.hdr, r.end, r.err)
		}
	case <-ctx.Done():
		t.Fatal("no EpochEnd")
	}
	if got := testutil.ToFloat64(e.srv.m.trainerWait.WithLabelValues("tiny")); got != 0.5 {
		t.Errorf("stoker_trainer_wait_seconds_total = %v, want 0.5", got)
	}
}

func TestFeedErrors(t *testing.T) {
	e := newEnv(t, Config{MaxBatchBytes: 1 << 20})
	with := func(f func(*pb.OpenJob)) *pb.FeedRequest {
		o := smallJob("tiny", 8)
		f(o)
		return &pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: o}}
	}
	tests := []struct {
		name string
		req  *pb.FeedRequest
		code codes.Code
		msg  []string
	}{
		{"unknown dataset", with(func(o *pb.OpenJob) { o.Job.Dataset = "imagenet" }), codes.NotFound, []string{`"imagenet"`, "known: tiny"}},
		{"resize shorter side without crop", with(func(o *pb.OpenJob) {
			o.Job.Transform = &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Resize", "size", 32)}}
		}), codes.InvalidArgument, []string{"Resize(32)"}},
		{"rrc size 0", with(func(o *pb.OpenJob) { o.Job.Transform = &pb.TransformSpec{Ops: []*pb.Op{rrcOp(0)}} }), codes.InvalidArgument, []string{"RandomResizedCrop"}},
		{"no transform", with(func(o *pb.OpenJob) { o.Job.Transform = nil }), codes.InvalidArgument, []string{"exactly one"}},
		{"batch size 0", with(func(o *pb.OpenJob) { o.Job.BatchSize = 0 }), codes.InvalidArgument, []string{"batch_size 0", "65536"}},
		{"batch size too big", with(func(o *pb.OpenJob) { o.Job.BatchSize = 65537 }), codes.InvalidArgument, []string{"batch_size 65537"}},
		{"rank out of range", with(func(o *pb.OpenJob) { o.Job.Rank, o.Job.WorldSize = 2, 2 }), codes.InvalidArgument, []string{"rank 2", "world_size 2"}},
		{"batch too large", with(func(o *pb.OpenJob) { o.Job.Transform = &pb.TransformSpec{Preset: "imagenet-train"} }), codes.ResourceExhausted, []string{"1204224 bytes", "1048576"}},
		{"start past end", with(func(o *pb.OpenJob) { o.StartBatch = 6 }), codes.InvalidArgument, []string{"start_batch 6", "5 batches"}},
		{"credit first", &pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1}}}, codes.InvalidArgument, []string{"must be OpenJob"}},
		{"empty first", &pb.FeedRequest{}, codes.InvalidArgument, []string{"must be OpenJob"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			stream, err := e.client.Feed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(tc.req); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("got %v, want code %v", err, tc.code)
			}
			for _, m := range tc.msg {
				if !strings.Contains(st.Message(), m) {
					t.Errorf("message %q does not say %q", st.Message(), m)
				}
			}
			// The server keeps serving.
			if ep := e.collect(t, smallJob("tiny", 16)); len(ep.batches) != 3 {
				t.Errorf("good job after the error: %d batches, want 3", len(ep.batches))
			}
		})
	}
}

func TestFeedSecondOpenJob(t *testing.T) {
	e := newEnv(t, Config{})
	open := smallJob("tiny", 8)
	open.Credits = 0
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	stream := e.feedStream(t, ctx, open)
	if err := stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: open}}); err != nil {
		t.Fatal(err)
	}
	var err error
	for err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("got %v, want InvalidArgument", err)
	}
}

func TestFeedStreamLimit(t *testing.T) {
	e := newEnv(t, Config{MaxStreamsPerClient: 1})
	open := smallJob("tiny", 8)
	open.Credits = 0 // holds the stream open
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	first := e.feedStream(t, ctx, open)
	if m, err := first.Recv(); err != nil || m.GetJob() == nil {
		t.Fatalf("first stream: %v, %v", m, err)
	}
	second := e.feedStream(t, ctx, open)
	if _, err := second.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "limit is 1") {
		t.Fatalf("second stream: %v, want ResourceExhausted", err)
	}
	first.CloseSend()
	cancel()
	// The slot comes back once the first stream is gone: a stream refused
	// meanwhile is refused for the limit, nothing else.
	var ep epoch
	waitUntil(t, "the first stream's slot back", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		var err error
		if ep, err = readEpoch(e.feedStream(t, ctx, smallJob("tiny", 8))); err != nil && status.Code(err) != codes.ResourceExhausted {
			t.Fatal(err)
		}
		return err == nil
	})
	if len(ep.batches) != 5 {
		t.Errorf("%d batches, want 5", len(ep.batches))
	}
}

func TestFeedChunking(t *testing.T) {
	e := newEnv(t, Config{})
	open := &pb.OpenJob{
		Job: &pb.JobSpec{
			Dataset: "tiny",
			// 40 × 3 × 288 × 288 = 9.95 MB: three chunks.
			Transform: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Resize", "size", []int{288, 288})}},
			BatchSize: 64,
			Seed:      5,
			Layout:    pb.Layout_LAYOUT_NHWC,
		},
		Credits: 1,
		Epochs:  1,
	}
	ep := e.collect(t, open)
	if len(ep.batches) != 1 {
		t.Fatalf("%d batches, want 1", len(ep.batches))
	}
	got := ep.batches[0]
	if !slices.Equal(got.hdr.GetShape(), []uint32{dsSize, 288, 288, 3}) {
		t.Errorf("shape %v", got.hdr.GetShape())
	}

	tr, err := transform.NewTransform(transform.HWC, ops.Op{Kind: transform.OpResize, Size: [2]int{288, 288}})
	if err != nil {
		t.Fatal(err)
	}
	exec := pipeline.NewExecutor(2)
	defer exec.Close()
	var want pipeline.Batch
	if err := exec.Fill(context.Background(), e.srv.datasets["tiny"], tr, 5, 0, plan.New(plan.Spec{Size: dsSize, World: 1, BatchSize: 64}).Batch(0), pipeline.PadFromBatch, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Data) <= 2*MaxChunkBytes {
		t.Fatalf("batch of %d bytes does not need three chunks", len(want.Data))
	}
	if !bytes.Equal(got.data, want.Data) || !slices.Equal(got.hdr.GetIndices(), want.Indices) || !slices.Equal(got.hdr.GetLabels(), want.Labels) {
		t.Error("reassembled batch differs from Executor.Fill's")
	}
}

func TestListDatasets(t *testing.T) {
	two := makeDataset(t, []string{"x", "y"}, 2, false)
	e := newEnv(t, Config{Datasets: map[string]string{"b": two, "a": makeDataset(t, []string{"a", "b", "c"}, 13, true)}})
	resp, err := e.client.ListDatasets(context.Background(), &pb.ListDatasetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ds := resp.GetDatasets()
	if len(ds) != 2 || ds[0].GetName() != "a" || ds[1].GetName() != "b" {
		t.Fatalf("datasets %v, want a and b in order", ds)
	}
	if ds[0].GetSize() != dsSize || ds[1].GetSize() != 4 || !slices.Equal(ds[1].GetClasses(), []string{"x", "y"}) ||
		ds[0].GetFormat() != "imagefolder" || len(ds[0].GetFingerprint()) == 0 || ds[0].GetFingerprint() == ds[1].GetFingerprint() {
		t.Errorf("datasets %v", ds)
	}
}
