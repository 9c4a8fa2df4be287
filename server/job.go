package server

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// job is a validated OpenJob: everything a Feed stream needs to make and
// send its epoch.
type job struct {
	open    *stokerv1.OpenJob
	name    string
	ds      pipeline.Dataset
	t       *pipeline.Transform
	policy  pipeline.FailPolicy
	rank    int
	world   int
	plan    Plan
	start   int // first batch number to send
	dtype   stokerv1.Dtype
	credits int64 // granted in OpenJob
}

// newJob validates o against the server's datasets and limits. Its errors
// are status errors whose messages say what was asked and what is allowed.
func (s *Server) newJob(o *stokerv1.OpenJob) (*job, error) {
	j := &job{open: o, name: o.GetDataset(), credits: int64(o.GetCredits())}
	var ok bool
	if j.ds, ok = s.datasets[j.name]; !ok {
		return nil, status.Errorf(codes.NotFound, "unknown dataset %q; known: %s", j.name, strings.Join(s.names, ", "))
	}
	if j.ds.Len() == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "dataset %q is empty", j.name)
	}
	bs := int(o.GetBatchSize())
	if bs < 1 || bs > MaxBatchSize {
		return nil, status.Errorf(codes.InvalidArgument, "batch_size %d: want 1..%d", bs, MaxBatchSize)
	}
	j.world, j.rank = max(int(o.GetWorldSize()), 1), int(o.GetRank())
	if j.rank >= j.world {
		return nil, status.Errorf(codes.InvalidArgument, "rank %d: want 0..%d for world_size %d", j.rank, j.world-1, j.world)
	}
	switch o.GetFailPolicy() {
	case stokerv1.FailPolicy_FAIL_POLICY_UNSPECIFIED, stokerv1.FailPolicy_FAIL_POLICY_PAD:
		j.policy = pipeline.PadFromBatch
	case stokerv1.FailPolicy_FAIL_POLICY_DROP:
		j.policy = pipeline.Drop
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown fail_policy %d", o.GetFailPolicy())
	}
	var err error
	if j.t, err = newTransform(o.GetTransform(), o.GetLayout()); err != nil {
		return nil, err
	}
	if bytes := int64(bs) * int64(j.t.SampleBytes()); bytes > s.cfg.MaxBatchBytes {
		return nil, status.Errorf(codes.ResourceExhausted, "a batch of %d samples of %d bytes is %d bytes, over this server's limit of %d bytes", bs, j.t.SampleBytes(), bytes, s.cfg.MaxBatchBytes)
	}
	j.dtype = stokerv1.Dtype_DTYPE_UINT8
	if j.t.Float() {
		j.dtype = stokerv1.Dtype_DTYPE_FLOAT32
	}
	j.plan = NewPlan(PlanSpec{
		Size: j.ds.Len(), Seed: o.GetSeed(), Epoch: o.GetEpoch(), Shuffle: o.GetShuffle(),
		Rank: j.rank, World: j.world, BatchSize: bs, DropLast: o.GetDropLast(),
	})
	if o.GetStartBatch() > uint64(j.plan.Batches()) {
		return nil, status.Errorf(codes.InvalidArgument, "start_batch %d is past the epoch's %d batches", o.GetStartBatch(), j.plan.Batches())
	}
	j.start = int(o.GetStartBatch())
	return j, nil
}

// info is the JobInfo the stream opens with.
func (j *job) info() *stokerv1.JobInfo {
	shape := j.t.Shape()
	return &stokerv1.JobInfo{
		Epoch:         j.open.GetEpoch(),
		Batches:       uint64(j.plan.Batches()),
		Samples:       uint64(j.plan.Samples()),
		DatasetSize:   uint64(j.ds.Len()),
		Fingerprint:   j.ds.Fingerprint(),
		Classes:       j.ds.Classes(),
		SampleShape:   []uint32{uint32(shape[0]), uint32(shape[1]), uint32(shape[2])},
		Dtype:         j.dtype,
		MaxChunkBytes: MaxChunkBytes,
	}
}
