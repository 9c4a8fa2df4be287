package server

import "github.com/stoker-dev/stoker/pipeline"

// Batches made in the trainer's ring. When the stream has a shared-memory
// ring, a lease's buffer is given a free slot of it before the maker
// starts: the local executor makes the batch there, a peer's chunks are
// copied there from gRPC's receive buffers, and the batch goes out as a
// header naming the slot, its pixels never copied again. A buffer keeps
// its slot while it stays with the coordinator (a failed or dropped lease,
// a batch made again) and loses it when its batch goes out: the slot is
// the trainer's then, until it releases it. A buffer that finds no slot
// free is made in memory of its own, as on a stream without a ring, and
// copied into a slot (or sent in chunks) when it goes out; so that such
// batches still find a slot then, a lease takes a slot only while more are
// free than the batches out of the ring the coordinator holds.
//
// Memory: the ring is counted whole when it is offered; a buffer is
// counted (beyond the reservedBuffers a job starts with) only once it needs
// memory of its own.

// bufState is what the coordinator keeps of a buffer with a slot, or with
// memory of its own. Owned by run's goroutine.
type bufState struct {
	slot    uint32
	inSlot  bool   // b.Data is the slot's memory
	own     []byte // the buffer's own memory, put aside while it is in a slot
	counted bool   // its own memory is counted in the stream's
}

// state is b's state, made on first use.
func (c *coordinator) state(b *pipeline.Batch) *bufState {
	s := c.bufs[b]
	if s == nil {
		s = &bufState{}
		c.bufs[b] = s
	}
	return s
}

// prepare readies buffer b, just taken off the free list or made, for a
// lease: in a free slot of the ring if it may have one, else in memory of
// its own, counted; false when that does not fit in the budget (b is then
// free again).
func (c *coordinator) prepare(b *pipeline.Batch) bool {
	s := c.state(b)
	if !s.inSlot && c.ring != nil && c.ring.available() > c.outOfRing {
		if i, ok := c.ring.take(); ok {
			s.slot, s.inSlot, s.own = i, true, b.Data[:0]
			b.Data = c.ring.slot(i)[:0]
			return true
		}
	}
	if s.inSlot {
		return true
	}
	if !s.counted {
		if c.counted >= reservedBuffers && !c.mem.try(c.j.batchBytes()) {
			c.free = append(c.free, b)
			return false
		}
		s.counted = true
		c.counted++
	}
	c.outOfRing++
	return true
}

// release puts buffer b, back from a lease or from the batches ready, on
// the free list; it keeps its slot.
func (c *coordinator) release(b *pipeline.Batch) {
	if !c.state(b).inSlot {
		c.outOfRing--
	}
	c.free = append(c.free, b)
}

// handOut is where batch b's pixels are as it goes out: in slot, when
// inSlot; the slot is the trainer's from now on.
func (c *coordinator) handOut(b *pipeline.Batch) (slot uint32, inSlot bool) {
	s := c.state(b)
	if !s.inSlot {
		c.outOfRing--
		return 0, false
	}
	return s.slot, true
}

// takeBack puts buffer b, back from out's reader, on the free list; one
// that went out in a slot gets its own memory back, or none.
func (c *coordinator) takeBack(b *pipeline.Batch) {
	if s := c.state(b); s.inSlot {
		b.Data, s.own, s.inSlot = s.own, nil, false
	}
	c.free = append(c.free, b)
}

// drop forgets free buffer b: its slot goes back to the ring, its memory
// to the budget.
func (c *coordinator) drop(b *pipeline.Batch) {
	s := c.state(b)
	delete(c.bufs, b)
	if s.inSlot {
		c.ring.giveBack(s.slot)
	}
	if s.counted {
		c.counted--
		if c.counted >= reservedBuffers {
			c.mem.release(c.j.batchBytes())
		}
	}
}
