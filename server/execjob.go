package server

import (
	"context"
	"sync/atomic"

	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// execJob is one job's queue on the local executor: the local maker keeps
// one per job of this server's coordinators, and a Work stream one per job
// a remote coordinator registered (work.JobQueue). The queue is weighed
// (the stall schedule) by the demand the job's last lease carried, and
// closed when the job ends, which drops its queued samples at once.
type execJob struct {
	j      *job
	q      *pipeline.Queue
	demand atomic.Pointer[pipeline.JobDemand]
	shares *shares // nil with the fifo schedule
	// make makes the job's batches: the queue's Fill, or what
	// Config.Making wrapped around it.
	make MakeFunc
}

var _ work.JobQueue = (*execJob)(nil)

// openExecJob opens job j's queue on the executor, named by j.id; its
// batches are made as making (Config.Making) wraps the queue's Fill, when
// set.
func openExecJob(exec *pipeline.Executor, sh *shares, making func(pipeline.Dataset, int, MakeFunc) MakeFunc, j *job) *execJob {
	e := &execJob{j: j, q: exec.Queue(j.id), shares: sh}
	e.make = e.fill
	if making != nil {
		e.make = making(j.ds, int(j.spec.GetBatchSize()), e.make)
	}
	if sh != nil {
		sh.add(e.q, e.demandNow)
	}
	return e
}

// demandNow is what the job's last lease said of it.
func (e *execJob) demandNow() pipeline.JobDemand {
	if d := e.demand.Load(); d != nil {
		return *d
	}
	return pipeline.JobDemand{}
}

// Fill makes lease l's batch into b, the lease's demand weighing the
// job's queue from now on.
func (e *execJob) Fill(ctx context.Context, l *work.Lease, b *pipeline.Batch) error {
	d := l.Demand
	e.demand.Store(&d)
	return e.make(ctx, l.Epoch, l.Indices, b)
}

// fill makes the samples indices of epoch into b on the job's queue.
func (e *execJob) fill(ctx context.Context, epoch uint64, indices []int64, b *pipeline.Batch) error {
	j := e.j
	if sp, ok := j.ds.(pipeline.ShardPrefetcher); ok && j.shuffle.starts != nil {
		// The block shuffle reads the window's shards whole over the
		// next batches: read each ahead in a few long requests.
		sp.PrefetchShards(indices)
	}
	if err := e.q.Fill(ctx, j.ds, j.t, j.spec.GetSeed(), epoch, indices, j.policy, b); err != nil {
		return err
	}
	return storeDown(b)
}

// Header is the BatchHeader of batch k of epoch, as made into b.
func (e *execJob) Header(epoch uint64, k int, b *pipeline.Batch) *stokerv1.BatchHeader {
	return e.j.header(epoch, k, b)
}

// BatchSize is the job's batch size.
func (e *execJob) BatchSize() int { return int(e.j.spec.GetBatchSize()) }

// SampleBytes is one sample's size.
func (e *execJob) SampleBytes() int { return e.j.t.SampleBytes() }

// Close drops the job's queue; its queued samples fail at once.
func (e *execJob) Close() {
	if e.shares != nil {
		e.shares.remove(e.q)
	}
	e.q.Close()
}
