package makers

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
	"google.golang.org/protobuf/proto"
)

// MakeFunc makes one job's batch of the samples indices of epoch into b,
// reusing b's buffers (the server's Config.Making wraps it); given place
// (a part of a batch, lease.Lease.Place), sample i goes to place[i] in
// b.Data, the whole batch's.
type MakeFunc func(ctx context.Context, epoch uint64, indices []int64, place []int, b *pipeline.Batch) error

// ExecJob is one job's queue on the local executor: the local maker keeps
// one per job of this server's coordinators, and a Work stream one per job
// a remote coordinator registered (work.JobQueue). The queue is opened at
// the job's first batch (a job registered and never leased holds none),
// weighed (the stall schedule) by the demand the job's last lease carried,
// and closed when the job ends, which drops its queued samples at once.
type ExecJob struct {
	j      *job.Job
	exec   *pipeline.Executor
	demand atomic.Pointer[pipeline.JobDemand]
	shares *Shares // nil with the fifo schedule
	// work: a Work job's; client: its coordinator's host, or a Feed
	// job's client (rpc.ClientID; "": a client of its own).
	work   bool
	client string
	// make makes the job's batches: the queue's Fill, or what
	// Config.Making wrapped around it.
	make MakeFunc

	mu     sync.Mutex
	q      *pipeline.Queue // nil until the first batch
	closed bool
}

var _ work.JobQueue = (*ExecJob)(nil)

// ExecJobBytes is what a job's state holds on this server beyond its
// spec: the job and its transform, the ExecJob, its executor queue and
// its place in the stall schedule's maps, rounded up (TestWorkJobBytes
// measures it: 4.1-4.2 KB a job with the spec, 4.9 KB in some runs once
// the transform's ops carried the detection ops' arguments; 5.1 KB in a
// CI run once the decoder's options held the partner cache and the YOLO
// ops their keypoint state, so 6 KB leaves room).
const ExecJobBytes = 6 << 10

// OpenExecJob makes job j's handle on the executor, its queue named by
// j.ID(); its batches are made as making (Config.Making) wraps the queue's
// Fill, when set. A Work job's (work) is weighed as its coordinator's at
// client, a Feed job's as one of client's (rpc.ClientID; "": a client of
// its own).
func OpenExecJob(exec *pipeline.Executor, sh *Shares, making func(dataset.Dataset, int, MakeFunc) MakeFunc, j *job.Job, work bool, client string) *ExecJob {
	e := &ExecJob{j: j, exec: exec, shares: sh, work: work, client: client}
	e.make = e.fill
	if making != nil {
		e.make = making(j.Data(), j.MaxSamples(), e.make)
	}
	return e
}

// queue is the job's queue, opened (and weighed from then on) at the
// first call; ErrClosed once the job is closed.
func (e *ExecJob) queue() (*pipeline.Queue, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return nil, pipeline.ErrClosed
	case e.q == nil:
		e.q = e.exec.Queue(e.j.ID())
		// The cost model's mean is what its samples are charged until
		// the executor has measured some.
		e.q.SetCost(e.j.Cost().Mean)
		e.j.SetCPUSource(e.q)
		if e.shares != nil {
			e.shares.add(e.q, e.demandNow, e.work, e.client, e.j.CPUWeight())
		}
	case e.shares != nil:
		e.shares.wake(e.q)
	}
	return e.q, nil
}

// demandNow is what the job's last lease said of it.
func (e *ExecJob) demandNow() pipeline.JobDemand {
	if d := e.demand.Load(); d != nil {
		return *d
	}
	return pipeline.JobDemand{}
}

// Fill makes lease l's batch into b, the lease's demand weighing the
// job's queue from now on.
func (e *ExecJob) Fill(ctx context.Context, l *lease.Lease, b *pipeline.Batch) error {
	e.demand.Store(&pipeline.JobDemand{Stall: l.Demand.Stall, Work: l.Demand.Work})
	b.Copies = l.Copies // each copy its own draw (repeated augmentation)
	return e.make(ctx, l.Epoch, l.Indices, l.Place, b)
}

// fill makes the samples indices of epoch into b on the job's queue, at
// their places in b.Data when place is set.
func (e *ExecJob) fill(ctx context.Context, epoch uint64, indices []int64, place []int, b *pipeline.Batch) error {
	q, err := e.queue()
	if err != nil {
		return err
	}
	j := e.j
	// A job whose samples measure past the server's bound is failed
	// here, before any more of them run (job.CheckMeasured); its
	// coordinator ends the job with the error.
	if err := j.CheckMeasured(); err != nil {
		return err
	}
	if j.BlockWindow() > 0 {
		// The block shuffle reads the window's shards whole over the
		// next batches: read each ahead in a few long requests.
		if sp, ok := j.Data().(dataset.ShardFieldPrefetcher); ok && j.Fields() != nil {
			sp.PrefetchShardFields(indices, j.Fields())
		} else if sp, ok := j.Data().(dataset.ShardPrefetcher); ok {
			sp.PrefetchShards(indices)
		}
	}
	b.Trace = j.Spec().GetTrace()
	b.FieldSet = j.Fields()
	// A sample that failed by its store's fault fails the batch (Fill's
	// error): its lease is tried again, on a maker whose store may answer,
	// and after maxAttempts the job ends with UNAVAILABLE naming the store.
	if place != nil {
		err = q.FillAt(ctx, j.Data(), j.Transform(), j.Spec().GetSeed(), epoch, indices, place, j.Policy(), b)
	} else {
		err = q.Fill(ctx, j.Data(), j.Transform(), j.Spec().GetSeed(), epoch, indices, j.Policy(), b)
	}
	if err != nil {
		return storeErr(j.Data(), err)
	}
	return nil
}

// Header is the BatchHeader of batch k of epoch, as made into b.
func (e *ExecJob) Header(epoch uint64, k int, b *pipeline.Batch) (*stokerv1.BatchHeader, error) {
	return e.j.Header(epoch, k, b)
}

// BatchSize is the most samples a batch of the job holds.
func (e *ExecJob) BatchSize() int { return e.j.MaxSamples() }

// SampleBytes is what one sample of a lease may hold: its pixels, and
// its fields at their bound (its targets twice: as made, and packed for
// the header).
func (e *ExecJob) SampleBytes() int {
	n := e.j.Transform().SampleBytes() + int(e.j.Fields().SampleMax())
	if fs := e.j.Fields(); fs.HasTargets() {
		n += int(fs.TargetsMax())
	}
	return n
}

// StateBytes is what the job holds while it lives: its spec as kept (its
// known fields) and ExecJobBytes.
func (e *ExecJob) StateBytes() int64 { return ExecJobBytes + int64(proto.Size(e.j.Spec())) }

// Close drops the job's queue; its queued samples fail at once, and a
// later Fill with ErrClosed.
func (e *ExecJob) Close() {
	e.mu.Lock()
	q := e.q
	e.closed = true
	e.mu.Unlock()
	if q == nil {
		return
	}
	if e.shares != nil {
		e.shares.remove(q)
	}
	q.Close()
}
