package limits

import (
	"context"
	"sync"
	"time"
)

// StreamMemory is what one Feed stream holds of the server's memory
// budget: its batch buffers (the two it opens with, the ones its window
// grows to) and its shared-memory ring. It is the one place a stream's
// bytes are counted (its coordinator's coord.Memory); close gives back
// whatever is still held when the stream ends.
type StreamMemory struct {
	b    *Budget
	mu   sync.Mutex
	held int64
}

// NewStreamMemory is a stream's account in b.
func NewStreamMemory(b *Budget) *StreamMemory { return &StreamMemory{b: b} }

// Acquire takes n bytes, waiting up to wait for other streams to give some
// back; its error wraps ErrMemoryBudget and says what needed them.
func (m *StreamMemory) Acquire(ctx context.Context, n int64, wait time.Duration, what string) error {
	if err := m.b.Acquire(ctx, n, wait, what); err != nil {
		return err
	}
	m.add(n)
	return nil
}

// Try takes n bytes if they fit now.
func (m *StreamMemory) Try(n int64) bool {
	if !m.b.Try(n) {
		return false
	}
	m.add(n)
	return true
}

func (m *StreamMemory) add(n int64) {
	m.mu.Lock()
	m.held += n
	m.mu.Unlock()
}

// Release gives n of the held bytes back.
func (m *StreamMemory) Release(n int64) {
	m.mu.Lock()
	n = min(n, m.held)
	m.held -= n
	m.mu.Unlock()
	m.b.Release(n)
}

// Close gives back everything still held.
func (m *StreamMemory) Close() {
	m.mu.Lock()
	n := m.held
	m.held = 0
	m.mu.Unlock()
	m.b.Release(n)
}
