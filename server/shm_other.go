//go:build !linux

package server

import (
	"errors"
	"log/slog"
)

// Shared-memory delivery needs memfds and abstract Unix sockets: Linux
// only. Elsewhere there is no hub, and trainers get chunks.

type shmHub struct {
	name, bootID string
}

func newShmHub(*slog.Logger, func(string, string, ...any)) (*shmHub, error) {
	return nil, errors.New("shared-memory delivery needs Linux")
}

type ring struct {
	*slots
	token [shmTokenBytes]byte
	size  int64
}

func (h *shmHub) offer(int, int64) (*ring, error) { return nil, errors.ErrUnsupported }
func (h *shmHub) withdraw(*ring)                  {}
func (h *shmHub) close()                          {}
func (r *ring) Slot(uint32) []byte                { return nil }
func (r *ring) wasHanded() (bool, int32, uint32)  { return false, 0, 0 }
func (r *ring) close()                            {}
