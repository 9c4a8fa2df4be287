package server

import (
	"context"
	"slices"
	"sync"

	"github.com/stoker-dev/stoker/pipeline"
)

// A maker makes batches for coordinators: the local executor is one, each
// peer server another. Make is called concurrently, by many coordinators.
type maker interface {
	// Make makes the batch l names into b, reusing b's buffers. It returns
	// when the batch is made, when it failed, or when ctx ends (the lease's
	// deadline or the job's end), and after it returns it never touches b
	// again. An error that is the job's fault, not the maker's (the maker
	// refuses the job), wraps ErrRefused.
	Make(ctx context.Context, l *batchLease, b *pipeline.Batch) error
	// Name says which maker it is in logs and metrics: "local" or the
	// peer's address.
	Name() string
	// Free is how many more leases the maker would take now, from all
	// jobs together. A Make past it may fail with peer.ErrBusy, which is
	// no failure: the batch is leased again.
	Free() int
	// Ready reports whether the maker can take leases now (a peer that is
	// not connected cannot).
	Ready() bool
	// Forget drops what the maker keeps about a job that ended.
	Forget(j *job)
}

// batchLease is one batch a coordinator asked a maker for.
type batchLease struct {
	job    *job
	Epoch  uint64
	Number int
	// Indices are the batch's samples, as the plan has them; shared, not to
	// be modified.
	Indices []int64
	// Demand is the job's input stall and GPU work per sample when leased,
	// sent to peers so that a worker serving several coordinators shares
	// its cores by them.
	Demand pipeline.JobDemand
	// Keep names the samples a peer's batch is verified by, byte for byte
	// (verifier.pick): a peer maker copies their pixels into Kept as they
	// arrive, out of reach of the trainer whose ring slot the batch may be
	// made in. Makers on this server ignore them.
	Keep []int64
	Kept map[int64][]byte
}

// localMaker makes batches on this server's executor. Each job gets a
// queue of its own at its first lease, closed by Forget.
type localMaker struct {
	exec   *pipeline.Executor
	shares *shares // nil with the fifo schedule
	slots  int

	mu   sync.Mutex
	jobs map[*job]*execJob
}

func newLocalMaker(exec *pipeline.Executor, sh *shares, slots int) *localMaker {
	return &localMaker{exec: exec, shares: sh, slots: slots, jobs: make(map[*job]*execJob)}
}

// job is j's queue, opened on first use.
func (m *localMaker) job(j *job) *execJob {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.jobs[j]
	if e == nil {
		e = openExecJob(m.exec, m.shares, j.id)
		m.jobs[j] = e
	}
	return e
}

func (m *localMaker) Make(ctx context.Context, l *batchLease, b *pipeline.Batch) error {
	return m.job(l.job).fill(ctx, l.job, l.Epoch, l.Indices, l.Demand, b)
}

func (m *localMaker) Name() string { return "local" }
func (m *localMaker) Free() int    { return m.slots }
func (m *localMaker) Ready() bool  { return true }

// Forget closes the job's queue: what it still has queued fails at once.
func (m *localMaker) Forget(j *job) {
	m.mu.Lock()
	lj := m.jobs[j]
	delete(m.jobs, j)
	m.mu.Unlock()
	if lj != nil {
		lj.close()
	}
}

// makers is the server's set of makers, shared by its coordinators. Peers
// come and go as discovery finds them; changed is closed and replaced on
// every change, so a coordinator waiting for a maker wakes up.
type makers struct {
	mu      sync.Mutex
	list    []maker
	changed chan struct{}
}

func newMakers(ms ...maker) *makers {
	return &makers{list: ms, changed: make(chan struct{})}
}

// snapshot returns the current makers and a channel closed at the next
// change.
func (s *makers) snapshot() ([]maker, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list, s.changed
}

// add adds m.
func (s *makers) add(m maker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(slices.Clip(s.list), m)
	close(s.changed)
	s.changed = make(chan struct{})
}

// remove removes m.
func (s *makers) remove(m maker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = slices.DeleteFunc(slices.Clone(s.list), func(x maker) bool { return x == m })
	close(s.changed)
	s.changed = make(chan struct{})
}

// poke wakes the coordinators waiting on a change (a peer became ready).
func (s *makers) poke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
}
