package server

import (
	"context"
	"sync/atomic"

	"github.com/stoker-dev/stoker/pipeline"
)

// execJob is one job's queue on the local executor: the local maker keeps
// one per job of this server's coordinators, and a Work stream one per job
// a remote coordinator registered. The queue is weighed (the stall
// schedule) by the demand the job's last lease carried, and closed when the
// job ends, which drops its queued samples at once.
type execJob struct {
	q      *pipeline.Queue
	demand atomic.Pointer[pipeline.JobDemand]
	shares *shares // nil with the fifo schedule
	// replayed is the job's first whole batch, under Config.BenchReplay.
	replayed atomic.Pointer[pipeline.Batch]
}

// openExecJob opens a queue named name on the executor.
func openExecJob(exec *pipeline.Executor, sh *shares, name string) *execJob {
	e := &execJob{q: exec.Queue(name), shares: sh}
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

// fill makes batch epoch/indices of j into b on the job's queue, the
// demand d weighing it from now on (under the benchmark flags, as
// benchMaking says).
func (e *execJob) fill(ctx context.Context, j *job, epoch uint64, indices []int64, d pipeline.JobDemand, b *pipeline.Batch) error {
	e.demand.Store(&d)
	if j.bench != nil {
		return j.bench.fill(ctx, e, j, epoch, indices, b)
	}
	if err := e.q.Fill(ctx, j.ds, j.t, j.spec.GetSeed(), epoch, indices, j.policy, b); err != nil {
		return err
	}
	return storeDown(b)
}

// close drops the job's queue; its queued samples fail at once.
func (e *execJob) close() {
	if e.shares != nil {
		e.shares.remove(e.q)
	}
	e.q.Close()
}
