package ragged

import (
	"fmt"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// SlotAlign is where each array begins in a shared-memory slot: at a
// multiple of it from the slot's first byte (the wire promises 8; 64 keeps
// each on a cache line of its own).
const SlotAlign = 64

// SlotRoom is what a slot keeps after a batch's pixels (pixels bytes, at
// their largest) for its targets' arrays, when each sample's targets take
// at most sampleMax bytes (FieldSet.TargetsMax) in a batch of batch
// samples: their bound and the alignment of ten arrays, but never more
// than an eighth of the pixels, so that the ring grows by 12.5% at most;
// a batch whose arrays do not fit has them in its header (ToSlot).
func SlotRoom(pixels, batch, sampleMax int64) int64 {
	room := min(Size(batch*sampleMax)+10*SlotAlign, pixels/8)
	return alignUp(room)
}

func alignUp(n int64) int64 { return (n + SlotAlign - 1) / SlotAlign * SlotAlign }

// arrays is bt's byte arrays and their places in a TargetsInSlot, in the
// wire's order.
func arrays(bt *stokerv1.BatchTargets, in *stokerv1.TargetsInSlot) []struct {
	name string
	data *[]byte
	at   **stokerv1.SlotRange
} {
	return []struct {
		name string
		data *[]byte
		at   **stokerv1.SlotRange
	}{
		{"boxes", &bt.Boxes, &in.Boxes}, {"labels", &bt.Labels, &in.Labels}, {"iscrowd", &bt.Iscrowd, &in.Iscrowd},
		{"keypoints", &bt.Keypoints, &in.Keypoints}, {"keypoints_visibility", &bt.KeypointsVisibility, &in.KeypointsVisibility},
		{"mask_offsets", &bt.MaskOffsets, &in.MaskOffsets}, {"mask_runs", &bt.MaskRuns, &in.MaskRuns},
		{"overlap_masks", &bt.OverlapMasks, &in.OverlapMasks},
		{"mask_fill_offsets", &bt.MaskFillOffsets, &in.MaskFillOffsets}, {"mask_fills", &bt.MaskFills, &in.MaskFills},
	}
}

// ToSlot moves bt's arrays into slot (a batch's shared-memory slot, its
// whole memory), past its pixels (from bytes), each at a multiple of
// SlotAlign, and says where in bt.InSlot, the arrays in bt then empty.
// When they do not all fit in slot it writes nothing and reports false:
// bt is as it was, its arrays to go in the header. Nothing is written
// outside slot[from:].
func ToSlot(bt *stokerv1.BatchTargets, slot []byte, from int) bool {
	if bt == nil || from < 0 || from > len(slot) {
		return false
	}
	in := &stokerv1.TargetsInSlot{}
	as := arrays(bt, in)
	at, end := alignUp(int64(from)), int64(len(slot))
	offs := make([]int64, len(as))
	for i, a := range as {
		offs[i] = at
		at = alignUp(at + int64(len(*a.data)))
		if offs[i]+int64(len(*a.data)) > end {
			return false
		}
	}
	for i, a := range as {
		n := len(*a.data)
		copy(slot[offs[i]:offs[i]+int64(n)], *a.data)
		*a.at = &stokerv1.SlotRange{Offset: uint64(offs[i]), Length: uint64(n)}
		*a.data = nil
	}
	bt.InSlot = in
	return true
}

// FromSlot is ToSlot undone, for a reader of the slot (a trainer): bt's
// arrays are set to the ranges of slot that bt.InSlot names (slices of
// it, not copies), bt.InSlot cleared; a batch whose pixels take
// dataBytes. Nothing of bt is trusted: each range must lie past the
// pixels and within the slot, at a multiple of 8, none overlapping
// another, and bt's own arrays be empty; else an error naming it, bt as
// it was. Without InSlot, nothing changes.
func FromSlot(bt *stokerv1.BatchTargets, slot []byte, dataBytes uint64) error {
	in := bt.GetInSlot()
	if in == nil {
		return nil
	}
	as := arrays(bt, in)
	type span struct {
		name     string
		off, end uint64
	}
	var spans []span
	for _, a := range as {
		if len(*a.data) != 0 {
			return fmt.Errorf("targets: %s both in the slot and in the header", a.name)
		}
		r := *a.at
		if r == nil {
			return fmt.Errorf("targets: %s: no place in the slot", a.name)
		}
		off, n := r.GetOffset(), r.GetLength()
		if off < dataBytes || off%8 != 0 || off > uint64(len(slot)) || n > uint64(len(slot))-off {
			return fmt.Errorf("targets: %s at [%d, +%d) of a slot of %d bytes whose pixels take %d: want past them, within the slot, at a multiple of 8", a.name, off, n, len(slot), dataBytes)
		}
		if n == 0 {
			continue
		}
		for _, s := range spans {
			if off < s.end && s.off < off+n {
				return fmt.Errorf("targets: %s at [%d, +%d) overlaps %s", a.name, off, n, s.name)
			}
		}
		spans = append(spans, span{a.name, off, off + n})
	}
	for _, a := range as {
		r := *a.at
		if n := r.GetLength(); n > 0 {
			*a.data = slot[r.GetOffset() : r.GetOffset()+n : r.GetOffset()+n]
		}
	}
	bt.InSlot = nil
	return nil
}
