package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/limits"
)

// Same-host delivery. A trainer on this machine asks for it in OpenJob.shm;
// the server offers a ring of batch-sized slots in a sealed memfd, handed
// over on an abstract Unix socket (shm_linux.go), and sends each batch's
// pixels in a slot, with only its header on the stream. The ring is a
// coord.Ring: the coordinator's buffer pool decides each batch's slot (the
// one it was made in, or a free one it is copied into) and frees those the
// trainer releases in its credits. A batch that finds no free slot goes in
// chunks, so a trainer that keeps its batches is never stalled by the ring.

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

// ringSlots is the number of slots for a stream granted credits at once
// whose coordinator holds up to pool batch buffers: those the trainer may
// hold, and one for each buffer, so that batches are made in their slots.
func ringSlots(credits int64, pool int) int {
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

// shmHandshake answers a trainer's ShmRequest: a ShmOffer, then, for an
// offered ring, the trainer's ShmAccept. It returns the ring the stream's
// batches go through, or nil when they go in chunks (the server declined,
// or the trainer could not map the ring: the reason is logged). An error
// ends the stream.
func (s *Server) shmHandshake(ctx context.Context, stream stokerv1.FeedService_FeedServer, req *stokerv1.ShmRequest, credits, batchBytes int64, pool int, mem *limits.StreamMemory, log *slog.Logger) (*ring, error) {
	offer, r := s.shmOffer(req, credits, batchBytes, pool, mem)
	if err := stream.Send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Shm{Shm: offer}}); err != nil {
		s.dropRing(r, mem)
		return nil, err
	}
	if r == nil {
		log.Info("shared memory declined: chunks", "reason", offer.GetDeclined())
		return nil, nil
	}
	defer s.shm.withdraw(r)
	m, err := s.recvWithin(ctx, stream.Recv, "answer to the shared-memory offer")
	if err == nil && m.GetShm() == nil {
		err = status.Errorf(codes.InvalidArgument, "after a ShmOffer the trainer's next message must be ShmAccept, got %T", m.GetMsg())
	}
	if err != nil {
		s.dropRing(r, mem)
		return nil, err
	}
	handed, pid, uid := r.wasHanded()
	switch a := m.GetShm(); {
	case !a.GetOk():
		log.Info("shared memory: the trainer could not map the ring: chunks", "reason", job.Truncate(a.GetReason(), 256))
	case !handed:
		log.Warn("shared memory: the trainer accepted a ring it never fetched: chunks")
	default:
		// The process that fetched it: the trainer, whose token it had.
		log.Info("shared memory", "slots", offer.GetSlots(), "slot_bytes", offer.GetSlotBytes(), "pid", pid, "uid", uid)
		return r, nil
	}
	s.dropRing(r, mem)
	return nil, nil
}

// shmOffer decides on a ShmRequest: a ring of slots of batchBytes for
// credits batches and the coordinator's pool of buffers, out of the
// stream's memory (or, when that does not fit, for the credits alone: the
// batches are then made outside the ring and copied into it), or the
// reason there is none.
func (s *Server) shmOffer(req *stokerv1.ShmRequest, credits, batchBytes int64, pool int, mem *limits.StreamMemory) (*stokerv1.ShmOffer, *ring) {
	decline := func(format string, a ...any) (*stokerv1.ShmOffer, *ring) {
		return &stokerv1.ShmOffer{Declined: fmt.Sprintf(format, a...)}, nil
	}
	if s.shm == nil {
		return decline("shared memory is off on this server (%s)", s.shmOff)
	}
	if req.GetBootId() != s.shm.bootID {
		// "another machine": the Python client warns of every other
		// decline under transport="auto", not of this one (_stream.py).
		return decline("the trainer runs on another machine (its boot id is not the server's)")
	}
	n := ringSlots(credits, pool)
	if !mem.Try(int64(n) * batchBytes) {
		n = ringSlots(credits, 0)
		if !mem.Try(int64(n) * batchBytes) {
			return decline("a ring of %d slots of %d bytes does not fit in the memory budget now (--memory-budget)", n, batchBytes)
		}
	}
	total := int64(n) * batchBytes
	r, err := s.shm.offer(n, batchBytes)
	if err != nil {
		mem.Release(total)
		return decline("%v", err)
	}
	s.m.shmRings.Add(float64(total))
	return &stokerv1.ShmOffer{Socket: s.shm.name, Token: r.token[:], Slots: uint32(n), SlotBytes: uint64(batchBytes)}, r
}

// dropRing unmaps r, if any, and gives its bytes back to the stream's
// memory.
func (s *Server) dropRing(r *ring, mem *limits.StreamMemory) {
	if r == nil {
		return
	}
	total := int64(len(r.state)) * r.size
	r.close()
	mem.Release(total)
	s.m.shmRings.Sub(float64(total))
}
