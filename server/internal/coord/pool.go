package coord

import (
	"errors"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

// The buffer pool: a job's batch buffers, the ring slots they are made in,
// and what they cost the memory budget, in one place.
//
// Batches made in the trainer's ring. When the stream has a shared-memory
// ring, a lease's buffer is given a free slot of it before the maker
// starts: the local executor makes the batch there, a peer's chunks are
// copied there from gRPC's receive buffers, and the batch goes out as a
// header naming the slot, its pixels never copied again. A buffer keeps
// its slot while it stays with the coordinator (a failed or dropped lease,
// a batch made again) and loses it when its batch goes out: the slot is
// the trainer's then, until it releases it. A buffer that finds no slot
// free is made in memory of its own, as on a stream without a ring, and
// goes out in a free slot the pool takes for it then and copies it into
// (or in chunks, when none is free); so that such batches still find a
// slot then, a lease takes a slot only while more are free than the
// batches out of the ring the pool holds. The pool decides every batch's
// slot (Place): the stream sends a header naming it, or chunks, and passes
// on the slots the trainer releases (Released). The ring's slots and their
// state are the stream's, behind Ring.
//
// Memory: the ring is counted whole when it is offered (by the stream); a
// buffer is counted (beyond the reservedBuffers a job starts with) only
// once it needs memory of its own.

// reservedBuffers is how many batch buffers a job is sure of from its
// start (one being made, one being sent): the stream reserves their bytes
// before the job opens. More come from the budget as its window grows.
const reservedBuffers = 2

// ReservedBytes is what a stream reserves of the memory budget for a job
// of batches of batchBytes before it opens.
func ReservedBytes(batchBytes int64) int64 { return reservedBuffers * batchBytes }

// pool is a job's batch buffers. Owned by the coordinator's goroutine.
type pool struct {
	mem        Memory
	ring       Ring // nil when the stream has none
	batchBytes int64

	free    []*batch.Batch
	buffers int // allocated
	// bufs is what is kept of buffers in a slot or with memory of their
	// own; counted is how many of those have memory of their own counted,
	// outOfRing how many are out of the free list, not in a slot.
	bufs      map[*batch.Batch]*bufState
	counted   int
	outOfRing int
}

func newPool(mem Memory, ring Ring, batchBytes int64) *pool {
	return &pool{mem: mem, ring: ring, batchBytes: batchBytes, bufs: make(map[*batch.Batch]*bufState)}
}

// bufState is what the pool keeps of a buffer with a slot, or with
// memory of its own.
type bufState struct {
	slot    uint32
	inSlot  bool   // b.Data is the slot's memory
	own     []byte // the buffer's own memory, put aside while it is in a slot
	counted bool   // its own memory is counted in the stream's
}

// state is b's state, made on first use.
func (p *pool) state(b *batch.Batch) *bufState {
	s := p.bufs[b]
	if s == nil {
		s = &bufState{}
		p.bufs[b] = s
	}
	return s
}

// get returns a free batch buffer, or a new one while the pool has fewer
// than size, ready for a lease: in a slot of the trainer's ring, or in
// memory of its own if, past the reserved ones, the stream's memory has
// room in the budget; nil when there is none.
func (p *pool) get(size int) *batch.Batch {
	var b *batch.Batch
	if n := len(p.free); n > 0 {
		b = p.free[n-1]
		p.free = p.free[:n-1]
	} else if p.buffers < size {
		p.buffers++
		b = new(batch.Batch)
	} else {
		return nil
	}
	if !p.prepare(b) {
		return nil
	}
	return b
}

// prepare readies buffer b, just taken off the free list or made, for a
// lease: in a free slot of the ring if it may have one, else in memory of
// its own, counted; false when that does not fit in the budget (b is then
// free again).
func (p *pool) prepare(b *batch.Batch) bool {
	s := p.state(b)
	if !s.inSlot && p.ring != nil && p.ring.Available() > p.outOfRing {
		if i, ok := p.ring.Take(); ok {
			s.slot, s.inSlot, s.own = i, true, b.Data[:0]
			b.Data = p.ring.Slot(i)[:0]
			return true
		}
	}
	if s.inSlot {
		return true
	}
	if !s.counted {
		if p.counted >= reservedBuffers && !p.mem.Try(p.batchBytes) {
			p.free = append(p.free, b)
			return false
		}
		s.counted = true
		p.counted++
	}
	p.outOfRing++
	return true
}

// release puts buffer b, back from a lease or from the batches ready, on
// the free list; it keeps its slot.
func (p *pool) release(b *batch.Batch) {
	if !p.state(b).inSlot {
		p.outOfRing--
	}
	p.free = append(p.free, b)
}

// handOut is where batch b's pixels are as it goes out: in slot, when
// inSlot; the slot is the trainer's from now on.
func (p *pool) handOut(b *batch.Batch) (slot uint32, inSlot bool) {
	s := p.state(b)
	if !s.inSlot {
		p.outOfRing--
		return 0, false
	}
	return s.slot, true
}

// takeBack puts buffer b, back from out's reader, on the free list; one
// that went out in a slot gets its own memory back, or none.
func (p *pool) takeBack(b *batch.Batch) {
	if s := p.state(b); s.inSlot {
		b.Data, s.own, s.inSlot = s.own, nil, false
	}
	p.free = append(p.free, b)
}

// shrink gives free buffers beyond size (and the reserved ones) back, so
// that a job that narrowed leaves the memory to the jobs that stall.
func (p *pool) shrink(size int) {
	for p.buffers > max(size, reservedBuffers) && len(p.free) > 0 {
		p.drop(p.free[len(p.free)-1])
		p.free = p.free[:len(p.free)-1]
		p.buffers--
	}
}

// drop forgets free buffer b: its slot goes back to the ring, its memory
// to the budget.
func (p *pool) drop(b *batch.Batch) {
	s := p.state(b)
	delete(p.bufs, b)
	if s.inSlot {
		p.ring.GiveBack(s.slot)
	}
	if s.counted {
		p.counted--
		if p.counted >= reservedBuffers {
			p.mem.Release(p.batchBytes)
		}
	}
}

// Place puts batch output o's pixels in a slot of the stream's ring as it
// goes out, and lends the slot to the trainer: the slot it was made in, or
// a free one taken for it, its pixels copied there (copied); ok is false
// when the stream has no ring or no slot is free: it goes in chunks. tail,
// when not nil, is given the slot's memory once the pixels are there and
// before the slot is lent (what else the batch puts in it). Out's
// reader calls it once for each batch, just before sending its header, so
// that a batch made out of the ring finds the slots the trainer released
// meanwhile. Safe from any goroutine: it touches the ring alone (the
// pool's own count of the batch was settled by handOut).
func (c *Coordinator) Place(o Output, tail func(slot []byte)) (slot uint32, copied, ok bool) {
	r := c.st.Ring
	if r == nil {
		return 0, false, false
	}
	i, ok := o.Slot, o.InSlot
	if !ok {
		if i, ok = r.Take(); !ok {
			return 0, false, false
		}
	}
	// A batch made in its slot is there already, unless its maker replaced
	// the buffer.
	b, s := o.Batch, r.Slot(i)
	if !o.InSlot || len(b.Data) > 0 && &s[0] != &b.Data[0] {
		copy(s, b.Data)
		copied = true
	}
	if tail != nil {
		tail(s)
	}
	r.Lend(i)
	return i, copied, true
}

// Released frees the ring slots the trainer released (its credits name
// them). Safe from any goroutine.
func (c *Coordinator) Released(ids []uint32) error {
	if c.st.Ring == nil {
		return errors.New("the stream has no shared-memory ring")
	}
	return c.st.Ring.Release(ids)
}
