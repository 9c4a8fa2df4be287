package bench

// A simulated trainer that behaves like CUDA, for the autoscale scenario.
//
// A PyTorch training step on a GPU is asynchronous: the trainer's Python
// takes a batch (next()), launches the step's kernels (CPU time of its
// own) and goes on to the next batch while the GPU still runs them; it
// blocks only when it has run ahead of the GPU by a step or two (a
// synchronizing call: loss.item(), the caching allocator, a full launch
// queue). So when input is short the trainer waits in next() while the GPU
// still works through the steps queued before, and its wait share
// overstates the GPU's idle share (on an H100 training ResNet-50: wait
// 0.645 where the GPU idled 0.337). simGPU is that GPU: a consumer of a
// short queue at a fixed time per batch, measuring its own idle share.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// simGPU runs submitted steps one after another, each taking step, with at
// most runAhead submitted and not finished.
type simGPU struct {
	step   time.Duration
	window time.Duration // the idle share's window
	slots  chan struct{} // a step holds one from submit to its end
	work   chan simStep

	images, batches atomic.Int64

	mu      sync.Mutex
	start   time.Time
	lastEnd time.Time  // when the last step ran ended (or ends)
	busy    []interval // steps run, merged where they abut, over the last window
}

type interval struct{ from, to time.Time }

// simStep is one training step: its batch's images, and release, called
// when the GPU starts it (its input copied: the batch's buffer is free).
type simStep struct {
	images  int
	release func()
	at      time.Time // submitted (set by submit)
}

func newSimGPU(step time.Duration, runAhead int, window time.Duration) *simGPU {
	now := time.Now()
	return &simGPU{step: step, window: window, slots: make(chan struct{}, runAhead), work: make(chan simStep, runAhead), start: now, lastEnd: now}
}

// submit queues s, blocking while runAhead steps are queued or running (the
// trainer has run ahead as far as CUDA lets it).
func (g *simGPU) submit(ctx context.Context, s simStep) error {
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.at = time.Now()
	g.work <- s // never blocks: work has as much room as slots
	return nil
}

// run is the GPU: it runs the steps in order until ctx ends. A step starts
// when the one before ended or when it was submitted, whichever is later,
// and ends step later: a timer's lateness does not slow the GPU down while
// it has work.
func (g *simGPU) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		var s simStep
		select {
		case s = <-g.work:
		case <-ctx.Done():
			return
		}
		now := time.Now()
		g.mu.Lock()
		from := later(g.lastEnd, s.at)
		end := from.Add(g.step)
		g.lastEnd = end
		if n := len(g.busy); n > 0 && g.busy[n-1].to.Equal(from) {
			g.busy[n-1].to = end
		} else {
			g.busy = append(g.busy, interval{from, end})
		}
		g.mu.Unlock()
		if s.release != nil {
			s.release()
		}
		t.Reset(end.Sub(now))
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		g.images.Add(int64(s.images))
		g.batches.Add(1)
		<-g.slots
	}
}

// idle is the GPU's idle share over the last window (or since it started,
// when that is shorter), as of now.
func (g *simGPU) idle(now time.Time) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	from := later(now.Add(-g.window), g.start)
	span := now.Sub(from)
	if span <= 0 {
		return 1
	}
	i := 0
	for i < len(g.busy) && !g.busy[i].to.After(from) {
		i++
	}
	g.busy = append(g.busy[:0], g.busy[i:]...)
	var busy time.Duration
	for _, b := range g.busy {
		lo, hi := later(b.from, from), b.to
		if hi.After(now) {
			hi = now
		}
		if hi.After(lo) {
			busy += hi.Sub(lo)
		}
	}
	return min(max(1-busy.Seconds()/span.Seconds(), 0), 1)
}

// writeIdle writes the idle share to path every every, replacing the file
// whole, until ctx ends: what stoker serve --bench-gpu-idle-file reads.
func (g *simGPU) writeIdle(ctx context.Context, path string, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := writeFileAtomic(path, fmt.Sprintf("%.4f\n", g.idle(time.Now()))); err != nil {
			return err
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil
		}
	}
}

// writeFileAtomic writes data to path through a rename, so that a reader
// never sees it half-written.
func writeFileAtomic(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err = tmp.WriteString(data); err == nil {
		err = tmp.Close()
	} else {
		tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
