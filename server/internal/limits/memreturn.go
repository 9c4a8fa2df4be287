package limits

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Memory goes back to the OS once large streams have ended. Left to the Go
// runtime, it stays: with nothing allocated after the streams end no GC
// runs until the runtime forces one (every 2 min), so their buffers stay
// uncollected, and the scavenger then returns the pages over minutes more.
// Measured (bench load --idle, BENCHMARKS.md): 4 streams of 38 MB batches
// ended, RSS 1256 MiB for 2 min, 852 MiB at 2.5 min, with 48 MiB of heap
// in use. So when the memory budget in use has fallen by memReturnMin
// from its peak and is still down memReturnSettle later, the server
// collects and returns the free memory at once, at most once per
// memReturnEvery (a GC and the page faults of memory used again are the
// cost, bounded so under a churn of streams).
const (
	memReturnMin    = 64 << 20
	memReturnSettle = 2 * time.Second
	memReturnEvery  = 15 * time.Second
)

// memReturn watches the budget in use and returns memory when it falls.
type memReturn struct {
	free func() // what returns it: freeOSMemory, or a test's

	mu    sync.Mutex
	used  int64
	peak  int64       // the most in use since the last return
	timer *time.Timer // a check pending
	last  time.Time   // the last return

	returns atomic.Int64 // how many times it returned memory
}

func newMemReturn(free func()) *memReturn { return &memReturn{free: free} }

// note records the bytes in use after a change of the budget.
func (m *memReturn) note(used int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used = used
	m.peak = max(m.peak, used)
	if m.peak-used >= memReturnMin && m.timer == nil {
		m.timer = time.AfterFunc(memReturnSettle, m.check)
	}
}

// check returns the memory if the budget in use is still down, waiting
// out memReturnEvery since the last return.
func (m *memReturn) check() {
	m.mu.Lock()
	m.timer = nil
	if m.peak-m.used < memReturnMin { // in use again
		m.mu.Unlock()
		return
	}
	if wait := memReturnEvery - time.Since(m.last); !m.last.IsZero() && wait > 0 {
		m.timer = time.AfterFunc(wait, m.check)
		m.mu.Unlock()
		return
	}
	m.last, m.peak = time.Now(), m.used
	m.mu.Unlock()
	m.free()
	m.returns.Add(1)
}

// freeOSMemory collects twice (the buffers pooled in sync.Pools survive
// one GC) and returns every free page to the OS.
func freeOSMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
