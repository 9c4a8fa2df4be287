package server

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// budget is the server-wide memory budget that batch buffers come out of:
// every Feed job's reorder buffers and every Work lease.
type budget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	freed chan struct{} // closed and replaced when bytes are released
	// ret gives memory back to the OS when much of the budget is
	// released (memreturn.go); it is told of every change, under mu.
	ret *memReturn
}

func newBudget(limit int64) *budget {
	return &budget{limit: limit, freed: make(chan struct{}), ret: newMemReturn(freeOSMemory)}
}

// try takes n bytes if they fit.
func (b *budget) try(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	b.ret.note(b.used)
	return true
}

// acquire takes n bytes, waiting up to wait for others to release them. Its
// error is RESOURCE_EXHAUSTED with the numbers.
func (b *budget) acquire(ctx context.Context, n int64, wait time.Duration, what string) error {
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
			return status.Errorf(codes.ResourceExhausted, "memory budget: %s needs %d bytes; %d of the server's %d bytes are in use (--memory-budget)", what, n, used, b.limit)
		}
		select {
		case <-freed:
		case <-time.After(left):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives n bytes back.
func (b *budget) release(n int64) {
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

// inUse is the bytes taken.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// defaultMemoryBudget is half of the memory this process may use: the
// machine's, or its cgroup's limit when lower.
func defaultMemoryBudget() int64 {
	var si syscall.Sysinfo_t
	total := int64(8 << 30)
	if syscall.Sysinfo(&si) == nil {
		total = int64(si.Totalram) * int64(si.Unit)
	}
	if data, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil && n > 0 && n < total {
			total = n
		}
	}
	return total / 2
}
