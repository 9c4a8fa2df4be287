// Package waitfor is how a test waits for something that has no channel
// to wait on: it polls a condition until it holds, and turns a hang into a
// failure that names what did not happen. No assertion rests on how long
// it took: the limit is only where waiting stops making sense.
//
// Standard library only, so that any package's tests may use it.
package waitfor

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"time"
)

// TB is the part of testing.TB a wait needs.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Wait is one wait's settings: Until polls until its condition holds.
type Wait struct {
	// Within is how long Until polls before it fails the test.
	Within time.Duration
	// Ctx, when set, also ends the wait (a failure) when it is done.
	Ctx context.Context
	// State, when set, is called on failure and says what the state was
	// instead of what was awaited.
	State func() string
	// Stacks, when set, has a failure print every goroutine's stack: what
	// waits is often what is wrong.
	Stacks bool
	// Every is the longest pause between polls (default 20ms); the first
	// polls come sooner (from 1ms, doubling), so a condition about to hold
	// costs little latency.
	Every time.Duration
}

// Until polls cond until it holds and returns how long that took, failing
// t (naming what) when w.Within passes or w.Ctx ends first.
func (w Wait) Until(t TB, what string, cond func() bool) time.Duration {
	t.Helper()
	every := w.Every
	if every <= 0 {
		every = 20 * time.Millisecond
	}
	start := time.Now()
	pause := min(time.Millisecond, every)
	for !cond() {
		if time.Since(start) > w.Within {
			t.Fatalf("%s did not happen within %v%s", what, w.Within, w.state())
		}
		var done <-chan struct{}
		if w.Ctx != nil {
			done = w.Ctx.Done()
		}
		timer := time.NewTimer(pause)
		select {
		case <-done:
			timer.Stop()
			t.Fatalf("%s did not happen: %v%s", what, w.Ctx.Err(), w.state())
		case <-timer.C:
		}
		pause = min(pause*2, every)
	}
	return time.Since(start)
}

func (w Wait) state() string {
	var s string
	if w.State != nil {
		s = fmt.Sprintf(" (%s)", w.State())
	}
	if w.Stacks {
		var stacks strings.Builder
		pprof.Lookup("goroutine").WriteTo(&stacks, 1)
		s += "\n" + stacks.String()
	}
	return s
}

// Until is Wait{Within: within}.Until.
func Until(t TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return Wait{Within: within}.Until(t, what, cond)
}
