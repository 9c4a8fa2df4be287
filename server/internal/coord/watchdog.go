package coord

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

// A lease's deadline follows its work: the lease ends with
// context.DeadlineExceeded when its maker reported no progress for the
// lease timeout (batch.Progress: a sample begun or finished, a step of
// one; before any began, the maker's pool making anything at all), not a
// fixed time after the lease. A slow maker that keeps working is never
// raced by a copy of its own lease, and a batch waiting behind others on
// a busy maker does not time out; a hung maker (no progress) is still
// found after one timeout (two when it had queued the batch: the first
// look sees the pool's count, not yet the one before it). A maker that reports nothing (a peer) times out
// one timeout after the lease, as before.

// leaseCtx is a lease's context: its Err is DeadlineExceeded once the
// watchdog ended it.
type leaseCtx struct {
	context.Context
	expired atomic.Bool
}

func (c *leaseCtx) Err() error {
	if c.expired.Load() {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// watchLease is ctx for a lease whose maker may report its progress
// (batch.ProgressOf the returned context) and which ends after timeout
// without any; cancel ends it and stops the watchdog.
func watchLease(ctx context.Context, timeout time.Duration) (lctx context.Context, cancel context.CancelFunc) {
	inner, stop := context.WithCancel(ctx)
	p := &batch.Progress{Every: max(timeout/4, time.Millisecond)}
	lc := &leaseCtx{Context: batch.WithProgress(inner, p)}
	var seen atomic.Uint64
	var t *time.Timer
	// Made stopped (an age away) and then set, so that t is set before
	// the callback can run.
	t = time.AfterFunc(math.MaxInt64, func() {
		if n := p.Count(); n != seen.Load() {
			seen.Store(n)
			t.Reset(timeout)
			return
		}
		if inner.Err() == nil {
			lc.expired.Store(true)
			stop()
		}
	})
	t.Reset(timeout)
	return lc, func() {
		t.Stop()
		stop()
	}
}
