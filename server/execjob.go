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
	// replayed is the job's first whole batch, under Config.BenchReplay.
	replayed atomic.Pointer[pipeline.Batch]
}

var _ work.JobQueue = (*execJob)(nil)

// openExecJob opens job j's queue on the executor, named by j.id.
func openExecJob(exec *pipeline.Executor, sh *shares, j *job) *execJob {
	e := &execJob{j: j, q: exec.Queue(j.id), shares: sh}
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

// Fill makes lease l's batch into b on the job's queue, the lease's
// demand weighing it from now on (under the benchmark flags, as
// benchMaking says).
func (e *execJob) Fill(ctx context.Context, l *work.Lease, b *pipeline.Batch) error {
	d := l.Demand
	e.demand.Store(&d)
	j := e.j
	if j.bench != nil {
		return j.bench.fill(ctx, e, j, l.Epoch, l.Indices, b)
	}
	return e.q.Fill(ctx, j.ds, j.t, j.spec.GetSeed(), l.Epoch, l.Indices, j.policy, b)
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
