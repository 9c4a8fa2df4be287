package limits

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrMemoryBudget is the refusal of bytes the memory budget does not have.
var ErrMemoryBudget = errors.New("memory budget")

// Budget is the server-wide memory budget that batch buffers come out of:
// every Feed job's reorder buffers and every Work lease.
type Budget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	freed chan struct{} // closed and replaced when bytes are released
	// ret gives memory back to the OS when much of the budget is
	// released (memreturn.go); it is told of every change, under mu.
	ret *memReturn
}

// NewBudget is a budget of limit bytes that gives memory back to the OS
// when much of it is released after being used (memreturn.go).
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, freed: make(chan struct{}), ret: newMemReturn(freeOSMemory)}
}

// Try takes n bytes if they fit.
func (b *Budget) Try(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	b.ret.note(b.used)
	return true
}

// Acquire takes n bytes, waiting up to wait for others to release them. Its
// error wraps ErrMemoryBudget and gives the numbers.
func (b *Budget) Acquire(ctx context.Context, n int64, wait time.Duration, what string) error {
	deadline := time.Now().Add(wait)
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.ret.note(b.used)
			b.mu.Unlock()
			return nil
		}
		used, freed := b.used, b.freed
		b.mu.Unlock()
		left := time.Until(deadline)
		if n > b.limit || left <= 0 {
			return fmt.Errorf("%w: %s needs %d bytes; %d of the server's %d bytes are in use (--memory-budget)", ErrMemoryBudget, what, n, used, b.limit)
		}
		select {
		case <-freed:
		case <-time.After(left):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Release gives n bytes back.
func (b *Budget) Release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.ret.note(b.used)
	close(b.freed)
	b.freed = make(chan struct{})
}

// InUse is the bytes taken.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// DefaultMemoryBudget is half of the memory this process may use: the
// machine's, or its cgroup's limit when lower (cgroup v2 or v1).
func DefaultMemoryBudget() int64 {
	return memoryBudgetOf(machineMemory(), cgroupMemoryLimit("/"))
}

// memoryBudgetOf is half of the machine's total memory, or of the cgroup's
// limit when there is one and it is lower.
func memoryBudgetOf(total, cgroupLimit int64) int64 {
	if cgroupLimit > 0 && cgroupLimit < total {
		total = cgroupLimit
	}
	return total / 2
}

// Returns counts the times the budget gave memory back to the OS.
func (b *Budget) Returns() int64 { return b.ret.returns.Load() }

// Limit is the budget's bytes.
func (b *Budget) Limit() int64 { return b.limit }
