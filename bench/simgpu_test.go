package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestSimGPU: the simulated GPU runs steps back to back while it has them,
// lets the trainer run ahead by runAhead steps and no more, releases each
// batch as its step starts, and measures its idle share over its window.
func TestSimGPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const step = 100 * time.Millisecond
		g := newSimGPU(step, 2, time.Second)
		go g.run(ctx)
		t0 := time.Now()

		// Four steps submitted at once: the first two are taken at once,
		// the third waits for the first to end, the fourth for the second.
		var released atomic.Int32
		var returned []time.Duration
		for range 4 {
			if err := g.submit(ctx, simStep{images: 8, release: func() { released.Add(1) }}); err != nil {
				t.Fatal(err)
			}
			returned = append(returned, time.Since(t0))
		}
		if want := []time.Duration{0, 0, step, 2 * step}; !slices.Equal(returned, want) {
			t.Errorf("submits returned at %v, want %v (two steps of run-ahead)", returned, want)
		}
		synctest.Wait()
		if n := released.Load(); n != 3 {
			t.Errorf("at %v: %d batches released, want 3 (the running step's and those before)", time.Since(t0), n)
		}
		time.Sleep(4*step - time.Since(t0))
		synctest.Wait()
		if g.batches.Load() != 4 || g.images.Load() != 32 {
			t.Errorf("after 400ms: %d batches, %d images, want 4, 32", g.batches.Load(), g.images.Load())
		}
		if idle := g.idle(time.Now()); idle != 0 {
			t.Errorf("idle over the first 400ms (busy throughout) = %v, want 0", idle)
		}
		// Idle 600 ms: over the last second (the window), 0.6 idle.
		time.Sleep(600 * time.Millisecond)
		if idle := g.idle(time.Now()); math.Abs(idle-0.6) > 1e-9 {
			t.Errorf("idle after 600ms without work = %v, want 0.6", idle)
		}
		// One step, then idle: 0.1 busy in the last second.
		g.submit(ctx, simStep{images: 8})
		time.Sleep(time.Second)
		if idle := g.idle(time.Now()); math.Abs(idle-0.9) > 1e-9 {
			t.Errorf("idle over a second with one step = %v, want 0.9", idle)
		}

		// The file stoker serve reads.
		path := filepath.Join(t.TempDir(), "idle")
		done := make(chan error, 1)
		wctx, wcancel := context.WithCancel(ctx)
		go func() { done <- g.writeIdle(wctx, path, 250*time.Millisecond) }()
		synctest.Wait()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64); err != nil || math.Abs(v-0.9) > 1e-4 {
			t.Errorf("idle file %q, want 0.9", data)
		}
		wcancel()
		if err := <-done; err != nil {
			t.Errorf("writeIdle: %v", err)
		}
	})
}
