package shm

import (
	"fmt"
	"sync"
)

const (
	// shmMinSlots and shmMaxSlots bound a ring: a job's credits plus
	// shmSpareSlots (the batch the trainer works on and the one before it,
	// still referenced while it asks for the next, and one in transit).
	shmMinSlots   = 2
	shmMaxSlots   = 64
	shmSpareSlots = 3
	// shmTokenBytes is the size of an offer's token.
	shmTokenBytes = 16
)

// RingSlots is the number of slots for a stream granted credits at once
// whose coordinator holds up to pool batch buffers: those the trainer may
// hold, and one for each buffer, so that batches are made in their slots.
func RingSlots(credits int64, pool int) int {
	return int(min(max(credits+shmSpareSlots+int64(pool), shmMinSlots), shmMaxSlots))
}

// slots is a ring's bookkeeping: which slots are free, which the
// coordinator's pool fills (taken for a lease, or for a copy of a batch
// made elsewhere as it goes out), and which were sent and hold pixels the
// trainer has not released. The pool takes and gives back slots on the
// coordinator's goroutine and lends them on the send loop's; the
// receiver's Released releases them.
type slots struct {
	mu    sync.Mutex
	free  []uint32 // a stack: the slot released last is filled first, its pages warm
	state []slotState
}

type slotState uint8

const (
	slotFree slotState = iota
	slotFilling
	slotSent
)

func newSlots(n int) *slots {
	s := &slots{state: make([]slotState, n), free: make([]uint32, n)}
	for i := range s.free {
		s.free[i] = uint32(n - 1 - i)
	}
	return s
}

// Take returns a free slot, now being filled, or false when none is free.
func (s *slots) Take() (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.free)
	if n == 0 {
		return 0, false
	}
	i := s.free[n-1]
	s.free = s.free[:n-1]
	s.state[i] = slotFilling
	return i, true
}

// Available is how many slots are free.
func (s *slots) Available() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.free)
}

// GiveBack frees a slot taken and not sent (the batch made in it was
// dropped with its buffer).
func (s *slots) GiveBack(i uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state[i] == slotFilling {
		s.state[i] = slotFree
		s.free = append(s.free, i)
	}
}

// Lend marks a slot taken as sent: the trainer holds it until it releases
// it.
func (s *slots) Lend(i uint32) {
	s.mu.Lock()
	s.state[i] = slotSent
	s.mu.Unlock()
}

// Release frees the slots the trainer gave back. A slot out of range or not
// sent is the trainer's protocol error; the slots before it are freed.
func (s *slots) Release(ids []uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range ids {
		if int(i) >= len(s.state) {
			return fmt.Errorf("released slot %d of a ring of %d", i, len(s.state))
		}
		if s.state[i] != slotSent {
			return fmt.Errorf("released slot %d, which holds no batch", i)
		}
		s.state[i] = slotFree
		s.free = append(s.free, i)
	}
	return nil
}

// Name is the hub's socket's abstract name, without its leading NUL (a
// ShmOffer's socket).
func (h *Hub) Name() string { return h.name }

// BootID is this machine's boot id: a trainer that sends another runs on
// another machine.
func (h *Hub) BootID() string { return h.bootID }

// Token is the token a trainer fetches r with (a ShmOffer's token).
func (r *Ring) Token() []byte { return r.token[:] }

// Bytes is r's memory: its slots' bytes together.
func (r *Ring) Bytes() int64 { return int64(len(r.state)) * r.size }
