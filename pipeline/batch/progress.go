package batch

import (
	"context"
	"sync/atomic"
	"time"
)

// Progress is a batch's work as its maker reports it, for a lease whose
// deadline follows the work (the coordinator's watchdog): Started counts
// each sample begun, Add each sample finished and each step of one, and
// while none has begun, Queued says what the maker's pool as a whole has
// done, so that a batch waiting behind others on a working maker is not
// taken for a hung one. Safe for concurrent use; the zero value is ready.
type Progress struct {
	// Every is how often a maker that reports over the network (a peer)
	// is asked to (Lease.progress_ms); set before the Progress is shared.
	Every time.Duration

	own     atomic.Uint64
	started atomic.Bool
	pool    atomic.Pointer[atomic.Uint64]
}

// Add records work done on the batch: a sample or a step of one.
func (p *Progress) Add() { p.own.Add(1) }

// Start records that a sample of the batch was begun.
func (p *Progress) Start() {
	p.started.Store(true)
	p.own.Add(1)
}

// Queued says that the batch waits for a pool whose work done is counted
// by done (every sample of every batch it makes).
func (p *Progress) Queued(done *atomic.Uint64) { p.pool.Store(done) }

// Count is the progress so far: the batch's own work once a sample of it
// began, the pool's before. A count that did not move in a while is a
// maker that did nothing in that while.
func (p *Progress) Count() uint64 {
	if p.started.Load() {
		return p.own.Load() | 1<<63
	}
	if d := p.pool.Load(); d != nil {
		return d.Load()
	}
	return 0
}

type progressKey struct{}

// WithProgress is ctx carrying p: a maker's Make reports the batch's
// progress to it (ProgressOf).
func WithProgress(ctx context.Context, p *Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, p)
}

// ProgressOf is the Progress ctx carries, or nil.
func ProgressOf(ctx context.Context) *Progress {
	p, _ := ctx.Value(progressKey{}).(*Progress)
	return p
}
