package server

import (
	"context"
	"sync"
	"time"
)

// streamMemory is what one Feed stream holds of the server's memory
// budget: its batch buffers (the two it opens with, the ones its window
// grows to) and its shared-memory ring. It is the one place a stream's
// bytes are counted (its coordinator's coord.Memory); close gives back
// whatever is still held when the stream ends.
type streamMemory struct {
	b    *budget
	mu   sync.Mutex
	held int64
}

func newStreamMemory(b *budget) *streamMemory { return &streamMemory{b: b} }

// acquire takes n bytes, waiting up to wait for other streams to give some
// back; its error wraps errMemoryBudget and says what needed them.
func (m *streamMemory) acquire(ctx context.Context, n int64, wait time.Duration, what string) error {
	if err := m.b.acquire(ctx, n, wait, what); err != nil {
		return err
	}
	m.add(n)
	return nil
}

// Try takes n bytes if they fit now.
func (m *streamMemory) Try(n int64) bool {
	if !m.b.try(n) {
		return false
	}
	m.add(n)
	return true
}

func (m *streamMemory) add(n int64) {
	m.mu.Lock()
	m.held += n
	m.mu.Unlock()
}

// Release gives n of the held bytes back.
func (m *streamMemory) Release(n int64) {
	m.mu.Lock()
	n = min(n, m.held)
	m.held -= n
	m.mu.Unlock()
	m.b.release(n)
}

// close gives back everything still held.
func (m *streamMemory) close() {
	m.mu.Lock()
	n := m.held
	m.held = 0
	m.mu.Unlock()
	m.b.release(n)
}
