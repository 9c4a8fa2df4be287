//go:build !linux

package shm

import (
	"errors"
	"log/slog"
	"time"
)

// Shared-memory delivery needs memfds and abstract Unix sockets: Linux
// only. Elsewhere there is no hub, and trainers get chunks.

// Hub is none here: NewHub says why.
type Hub struct {
	name, bootID string
}

// NewHub says that shared memory needs Linux.
func NewHub(*slog.Logger, func(string, string, ...any)) (*Hub, error) {
	return nil, errors.New("shared-memory delivery needs Linux")
}

// Ring is never made here (Offer refuses).
type Ring struct {
	*slots
	token [shmTokenBytes]byte
	size  int64
}

func (h *Hub) Offer(int, int64) (*Ring, error)   { return nil, errors.ErrUnsupported }
func (h *Hub) Withdraw(*Ring)                    {}
func (h *Hub) Close()                            {}
func (r *Ring) Slot(uint32) []byte               { return nil }
func (r *Ring) WasHanded() (bool, int32, uint32) { return false, 0, 0 }
func (r *Ring) HandedAt() time.Time              { return time.Time{} }
func (r *Ring) Close()                           {}
