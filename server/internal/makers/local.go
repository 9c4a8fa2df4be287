package makers

import (
	"context"
	"sync"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/job"
)

// Local makes batches on this server's executor, for its own
// coordinators. Each job gets a queue of its own at its first lease,
// closed by Forget.
type Local struct {
	exec   *pipeline.Executor
	shares *Shares // nil with the fifo schedule
	making func(dataset.Dataset, int, MakeFunc) MakeFunc
	slots  int

	mu   sync.Mutex
	jobs map[coord.Job]*ExecJob
}

var _ coord.Maker = (*Local)(nil)

// NewLocal is the local executor's maker: its jobs' queues weighed by sh
// (nil: fifo), their batches made as making wraps each queue's Fill (nil:
// as it is), and slots leases at once at most.
func NewLocal(exec *pipeline.Executor, sh *Shares, making func(dataset.Dataset, int, MakeFunc) MakeFunc, slots int) *Local {
	return &Local{exec: exec, shares: sh, making: making, slots: slots, jobs: make(map[coord.Job]*ExecJob)}
}

// queue is j's queue, opened on first use.
func (m *Local) queue(j coord.Job) *ExecJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.jobs[j]
	if e == nil {
		jj := JobOf(j)
		e = OpenExecJob(m.exec, m.shares, m.making, jj, false, jj.Client())
		m.jobs[j] = e
	}
	return e
}

// Make makes l's batch into b on j's queue, at the lease's places.
func (m *Local) Make(ctx context.Context, j coord.Job, l *lease.Lease, b *pipeline.Batch) (lease.Made, error) {
	l.Count() // Free counts no lease: its slots are the queues'
	return lease.Made{}, m.queue(j).Fill(ctx, l, b)
}

func (m *Local) Name() string  { return "local" }
func (m *Local) Trusted() bool { return true }
func (m *Local) Remote() bool  { return false }
func (m *Local) Free() int     { return m.slots }
func (m *Local) Ready() bool   { return true }

// Forget closes the job's queue: what it still has queued fails at once.
func (m *Local) Forget(j coord.Job) {
	m.mu.Lock()
	lj := m.jobs[j]
	delete(m.jobs, j)
	m.mu.Unlock()
	if lj != nil {
		lj.Close()
	}
}

// JobOf is the server's job behind j: every job this server's
// coordinators run, and so every job its makers and its verifier are
// given, is one of its own.
func JobOf(j coord.Job) *job.Job { return j.(*job.Job) }

// Jobs is how many jobs hold a queue here (each until Forget).
func (m *Local) Jobs() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.jobs)
}

// Pending is what j's queue has waiting for a core; ok is false when j
// holds no queue here yet.
func (m *Local) Pending(j coord.Job) (pending int, ok bool) {
	m.mu.Lock()
	e := m.jobs[j]
	m.mu.Unlock()
	if e == nil {
		return 0, false
	}
	e.mu.Lock()
	q := e.q
	e.mu.Unlock()
	if q == nil {
		return 0, false
	}
	return q.Pending(), true
}
