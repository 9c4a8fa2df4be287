package coord

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

// TestWatchLease: a lease's context ends with DeadlineExceeded one timeout
// after its maker's last progress, not after the lease: a maker that
// reports progress keeps it for as long as it works; one that stops is
// found; a pool that works while the batch waits keeps it too; the
// parent's cancellation is Canceled.
func TestWatchLease(t *testing.T) {
	const timeout = time.Second
	synctest.Test(t, func(t *testing.T) {
		// No progress at all: one timeout.
		ctx, cancel := watchLease(context.Background(), timeout)
		start := time.Now()
		<-ctx.Done()
		if took := time.Since(start); took != timeout || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("no progress: done after %v with %v, want %v and DeadlineExceeded", took, ctx.Err(), timeout)
		}
		cancel()
	})
	synctest.Test(t, func(t *testing.T) {
		// Progress every half timeout for ten timeouts, then none.
		ctx, cancel := watchLease(context.Background(), timeout)
		defer cancel()
		p := batch.ProgressOf(ctx)
		p.Start()
		start := time.Now()
		for time.Since(start) < 10*timeout {
			time.Sleep(timeout / 2)
			if ctx.Err() != nil {
				t.Fatalf("ended after %v with progress every %v: %v", time.Since(start), timeout/2, ctx.Err())
			}
			p.Add()
		}
		last := time.Now()
		<-ctx.Done()
		if took := time.Since(last); took > 2*timeout || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("after the last progress: done after %v with %v, want within %v, DeadlineExceeded", took, ctx.Err(), 2*timeout)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// Queued behind others on a pool that makes samples: kept;
		// then the pool stops: ended.
		ctx, cancel := watchLease(context.Background(), timeout)
		defer cancel()
		var pool atomic.Uint64
		batch.ProgressOf(ctx).Queued(&pool)
		for range 10 {
			time.Sleep(timeout / 2)
			if ctx.Err() != nil {
				t.Fatalf("queued on a working pool: %v", ctx.Err())
			}
			pool.Add(1)
		}
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("pool stopped: %v, want DeadlineExceeded", ctx.Err())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		parent, stop := context.WithCancel(context.Background())
		ctx, cancel := watchLease(parent, timeout)
		defer cancel()
		stop()
		<-ctx.Done()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Errorf("parent cancelled: %v, want Canceled", ctx.Err())
		}
	})
}
