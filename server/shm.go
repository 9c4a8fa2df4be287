package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/ragged"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
	"github.com/stoker-dev/stoker/server/internal/limits"
	"github.com/stoker-dev/stoker/server/internal/shm"
)

// Same-host delivery. A trainer on this machine asks for it in OpenJob.shm;
// the server offers a ring of batch-sized slots in a sealed memfd, handed
// over on an abstract Unix socket (server/internal/shm), and sends each batch's
// pixels in a slot, with only its header on the stream (and, for a trainer
// that reads them there, its targets' arrays after the pixels when they fit
// in the room the slot keeps for them, ragged.SlotRoom). The ring is a
// coord.Ring: the coordinator's buffer pool decides each batch's slot (the
// one it was made in, or a free one it is copied into) and frees those the
// trainer releases in its credits. A batch that finds no free slot goes in
// chunks, so a trainer that keeps its batches is never stalled by the ring.

// shmHandshake answers a trainer's ShmRequest: a ShmOffer, then, for an
// offered ring, the trainer's ShmAccept. It returns the ring the stream's
// batches go through, or nil when they go in chunks (the server declined,
// or the trainer could not map the ring: the reason is logged). An error
// ends the stream.
func (s *Server) shmHandshake(ctx context.Context, stream stokerv1.FeedService_FeedServer, req *stokerv1.ShmRequest, credits, batchBytes int64, pool int, mem *limits.StreamMemory, log *slog.Logger) (*shm.Ring, error) {
	offer, r := s.shmOffer(req, credits, batchBytes, pool, mem)
	if err := stream.Send(&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Shm{Shm: offer}}); err != nil {
		s.dropRing(r, mem)
		return nil, err
	}
	if r == nil {
		log.Info("shared memory declined: chunks", "reason", offer.GetDeclined())
		return nil, nil
	}
	defer s.shm.Withdraw(r)
	offered := time.Now()
	m, err := s.recvWithin(ctx, stream.Recv, "answer to the shared-memory offer")
	if status.Code(err) == codes.DeadlineExceeded {
		// Which side stalled: a trainer that fetched the ring had only
		// its ShmAccept left to send.
		msg := status.Convert(err).Message()
		if at := r.HandedAt(); !at.IsZero() {
			_, pid, _ := r.WasHanded()
			msg += fmt.Sprintf(": the trainer's process (pid %d) fetched the ring %v after the offer, and sent no answer", pid, at.Sub(offered).Round(time.Millisecond))
		} else {
			msg += ": the trainer never fetched the ring from the server's socket"
		}
		log.Warn("shared memory: no answer to the offer", "err", msg)
		err = status.Error(codes.DeadlineExceeded, msg)
	}
	if err == nil && m.GetShm() == nil {
		err = status.Errorf(codes.InvalidArgument, "after a ShmOffer the trainer's next message must be ShmAccept, got %T", m.GetMsg())
	}
	if err != nil {
		s.dropRing(r, mem)
		return nil, err
	}
	handed, pid, uid := r.WasHanded()
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
func (s *Server) shmOffer(req *stokerv1.ShmRequest, credits, batchBytes int64, pool int, mem *limits.StreamMemory) (*stokerv1.ShmOffer, *shm.Ring) {
	decline := func(format string, a ...any) (*stokerv1.ShmOffer, *shm.Ring) {
		return &stokerv1.ShmOffer{Declined: fmt.Sprintf(format, a...)}, nil
	}
	if s.shm == nil {
		return decline("shared memory is off on this server (%s)", s.shmOff)
	}
	if req.GetBootId() != s.shm.BootID() {
		// "another machine": the Python client warns of every other
		// decline under transport="auto", not of this one (_stream.py).
		return decline("the trainer runs on another machine (its boot id is not the server's)")
	}
	n := shm.RingSlots(credits, pool)
	if !mem.Try(int64(n) * batchBytes) {
		n = shm.RingSlots(credits, 0)
		if !mem.Try(int64(n) * batchBytes) {
			return decline("a ring of %d slots of %d bytes does not fit in the memory budget now (--memory-budget)", n, batchBytes)
		}
	}
	total := int64(n) * batchBytes
	r, err := s.shm.Offer(n, batchBytes)
	if err != nil {
		mem.Release(total)
		return decline("%v", err)
	}
	s.m.shmRings.Add(float64(total))
	return &stokerv1.ShmOffer{Socket: s.shm.Name(), Token: r.Token(), Slots: uint32(n), SlotBytes: uint64(batchBytes)}, r
}

// slotTargets moves a batch's targets' arrays (bt) into its slot (slot,
// the slot's memory, its pixels taking its first pixels bytes) when they
// fit after the pixels, bt then saying where (BatchTargets.in_slot);
// else they stay in the header. Nothing is written outside slot, whatever
// their size: ragged.ToSlot checks the room first.
func slotTargets(m *metrics, dataset string, bt *stokerv1.BatchTargets, slot []byte, pixels int) {
	via := "header"
	if ragged.ToSlot(bt, slot, pixels) {
		via = "slot"
	}
	m.shmTargets.WithLabelValues(dataset, via).Inc()
}

// dropRing unmaps r, if any, and gives its bytes back to the stream's
// memory.
func (s *Server) dropRing(r *shm.Ring, mem *limits.StreamMemory) {
	if r == nil {
		return
	}
	total := r.Bytes()
	r.Close()
	mem.Release(total)
	s.m.shmRings.Sub(float64(total))
}
