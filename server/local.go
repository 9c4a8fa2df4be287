package server

import (
	"context"
	"sync"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/job"
)

// localMaker makes batches on this server's executor, for its own
// coordinators. Each job gets a queue of its own at its first lease,
// closed by Forget.
type localMaker struct {
	exec   *pipeline.Executor
	shares *shares // nil with the fifo schedule
	making func(pipeline.Dataset, int, MakeFunc) MakeFunc
	slots  int

	mu   sync.Mutex
	jobs map[coord.Job]*execJob
}

var _ coord.Maker = (*localMaker)(nil)

func newLocalMaker(exec *pipeline.Executor, sh *shares, making func(pipeline.Dataset, int, MakeFunc) MakeFunc, slots int) *localMaker {
	return &localMaker{exec: exec, shares: sh, making: making, slots: slots, jobs: make(map[coord.Job]*execJob)}
}

// queue is j's queue, opened on first use.
func (m *localMaker) queue(j coord.Job) *execJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.jobs[j]
	if e == nil {
		e = openExecJob(m.exec, m.shares, m.making, jobOf(j), false, "")
		m.jobs[j] = e
	}
	return e
}

func (m *localMaker) Make(ctx context.Context, j coord.Job, l *lease.Lease, b *pipeline.Batch) (lease.Made, error) {
	return lease.Made{}, m.queue(j).Fill(ctx, l, b)
}

func (m *localMaker) Name() string  { return "local" }
func (m *localMaker) Trusted() bool { return true }
func (m *localMaker) Remote() bool  { return false }
func (m *localMaker) Free() int     { return m.slots }
func (m *localMaker) Ready() bool   { return true }

// Forget closes the job's queue: what it still has queued fails at once.
func (m *localMaker) Forget(j coord.Job) {
	m.mu.Lock()
	lj := m.jobs[j]
	delete(m.jobs, j)
	m.mu.Unlock()
	if lj != nil {
		lj.Close()
	}
}

// jobOf is the server's job behind j: every job this server's
// coordinators run, and so every job its makers and its verifier are
// given, is one of its own.
func jobOf(j coord.Job) *job.Job { return j.(*job.Job) }
