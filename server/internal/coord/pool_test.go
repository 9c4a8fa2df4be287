package coord

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stoker-dev/stoker/pipeline"
)

// testRing is a Ring of n slots of size bytes, with its slots' states.
type testRing struct {
	mem   [][]byte
	free  []uint32
	lent  map[uint32]bool
	taken map[uint32]bool
}

func newTestRing(n, size int) *testRing {
	r := &testRing{lent: map[uint32]bool{}, taken: map[uint32]bool{}}
	for i := range n {
		r.mem = append(r.mem, make([]byte, size))
		r.free = append(r.free, uint32(i))
	}
	return r
}

func (r *testRing) Available() int { return len(r.free) }
func (r *testRing) Take() (uint32, bool) {
	if len(r.free) == 0 {
		return 0, false
	}
	i := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	r.taken[i] = true
	return i, true
}
func (r *testRing) Slot(i uint32) []byte { return r.mem[i] }
func (r *testRing) GiveBack(i uint32) {
	delete(r.taken, i)
	r.free = append(r.free, i)
}
func (r *testRing) Lend(i uint32) {
	delete(r.taken, i)
	r.lent[i] = true
}
func (r *testRing) Release(ids []uint32) error {
	for _, i := range ids {
		if !r.lent[i] {
			return fmt.Errorf("released slot %d, which holds no batch", i)
		}
		delete(r.lent, i)
		r.free = append(r.free, i)
	}
	return nil
}

// TestPlace: a batch goes out in the slot it was made in, uncopied (unless
// its maker replaced the buffer), or is copied into a free slot the pool
// takes for it, or goes in chunks when none is free or there is no ring;
// the slots it lends come back with Released.
func TestPlace(t *testing.T) {
	if _, _, ok := (&Coordinator{}).Place(Output{Batch: &pipeline.Batch{Data: []byte{1}}}, nil); ok {
		t.Error("placed a batch without a ring")
	}
	if err := (&Coordinator{}).Released([]uint32{0}); err == nil {
		t.Error("released slots without a ring")
	}

	r := newTestRing(3, 4)
	c := &Coordinator{st: Stream{Ring: r}}
	made, _ := r.Take()
	copy(r.Slot(made), "made")
	slot, copied, ok := c.Place(Output{Batch: &pipeline.Batch{Data: r.Slot(made)}, Slot: made, InSlot: true}, nil)
	if !ok || slot != made || copied || !r.lent[made] {
		t.Errorf("made in slot %d: Place = %d, copied %v, ok %v; lent %v", made, slot, copied, ok, r.lent[made])
	}

	replaced, _ := r.Take()
	slot, copied, ok = c.Place(Output{Batch: &pipeline.Batch{Data: []byte("repl")}, Slot: replaced, InSlot: true}, nil)
	if !ok || slot != replaced || !copied || string(r.Slot(replaced)) != "repl" {
		t.Errorf("buffer replaced in slot %d: Place = %d, copied %v, ok %v; slot holds %q", replaced, slot, copied, ok, r.Slot(replaced))
	}

	slot, copied, ok = c.Place(Output{Batch: &pipeline.Batch{Data: []byte("else")}}, nil)
	if !ok || !copied || !r.lent[slot] || !bytes.Equal(r.Slot(slot), []byte("else")) {
		t.Errorf("made out of the ring: Place = %d, copied %v, ok %v; slot holds %q", slot, copied, ok, r.Slot(slot))
	}
	if _, _, ok := c.Place(Output{Batch: &pipeline.Batch{Data: []byte("none")}}, nil); ok {
		t.Error("placed a batch with every slot lent")
	}

	if err := c.Released([]uint32{made, replaced}); err != nil || r.Available() != 2 {
		t.Errorf("Released: %v, %d slots free, want 2", err, r.Available())
	}
	if err := c.Released([]uint32{made}); err == nil {
		t.Error("released a slot twice")
	}
}
