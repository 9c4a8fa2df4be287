package ragged

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestToSlotFromSlot: a batch's arrays moved into a slot past its pixels
// lie there each at a multiple of SlotAlign, none overlapping, the pixels
// and the rest of the slot untouched, and read back (FromSlot) they are
// the header's arrays byte for byte; arrays that do not fit leave the
// batch as it was and the slot unwritten.
func TestToSlotFromSlot(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name     string
		p        int
		masks    bool
		ks       []int
		pixels   int
		fitsRoom bool
	}{
		{"boxes", 0, false, []int{7, 0, 3}, 301, true},
		{"keypoints and masks", 17, true, []int{2, 5, 0, 1}, 64, true},
		{"no instances", 0, false, []int{0, 0}, 7, true},
		{"too large", 17, true, []int{9, 9}, 64, false},
	} {
		vals := batchOf(r, c.ks, c.p, false, c.masks)
		bt, _, err := Pack(vals, c.masks, Overlap{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := proto.Clone(bt).(*stokerv1.BatchTargets)
		need := alignUp(int64(c.pixels))
		for _, b := range [][]byte{bt.Boxes, bt.Labels, bt.Iscrowd, bt.Keypoints, bt.KeypointsVisibility, bt.MaskOffsets, bt.MaskRuns} {
			need = alignUp(need + int64(len(b)))
		}
		size := int(need)
		if !c.fitsRoom {
			size = int(need) - SlotAlign - 1
		}
		slot := bytes.Repeat([]byte{0xee}, size+100)[:size]
		if !ToSlot(bt, slot, c.pixels) {
			if c.fitsRoom {
				t.Fatalf("%s: %d bytes of slot, %d needed: did not fit", c.name, size, need)
			}
			if !proto.Equal(bt, want) || bytes.Count(slot[:size+100], []byte{0xee}) != size+100 {
				t.Errorf("%s: not fitting, the batch or the slot changed", c.name)
			}
			continue
		}
		if !c.fitsRoom {
			t.Fatalf("%s: fit in %d bytes, %d needed", c.name, size, need)
		}
		if len(bt.GetBoxes())+len(bt.GetLabels())+len(bt.GetMaskRuns()) != 0 || bt.GetInSlot() == nil {
			t.Fatalf("%s: arrays left in the header, or no in_slot", c.name)
		}
		in := bt.GetInSlot()
		for _, rg := range []*stokerv1.SlotRange{in.Boxes, in.Labels, in.Iscrowd, in.Keypoints, in.KeypointsVisibility, in.MaskOffsets, in.MaskRuns} {
			if rg.GetOffset()%SlotAlign != 0 || rg.GetOffset() < uint64(c.pixels) || rg.GetOffset()+rg.GetLength() > uint64(size) {
				t.Errorf("%s: range %v in a slot of %d past %d pixels", c.name, rg, size, c.pixels)
			}
		}
		for i := range c.pixels {
			if slot[i] != 0xee {
				t.Fatalf("%s: pixel byte %d written", c.name, i)
			}
		}
		got := proto.Clone(bt).(*stokerv1.BatchTargets)
		if err := FromSlot(got, slot, uint64(c.pixels)); err != nil {
			t.Fatalf("%s: FromSlot: %v", c.name, err)
		}
		// Empty arrays come back nil; the header had them empty.
		for _, b := range []*[]byte{&want.Keypoints, &want.KeypointsVisibility, &want.MaskOffsets, &want.MaskRuns, &want.Boxes, &want.Labels, &want.Iscrowd} {
			if len(*b) == 0 {
				*b = nil
			}
		}
		if !proto.Equal(got, want) {
			t.Errorf("%s: read back from the slot, the arrays differ from the header's", c.name)
		}
	}
}

// TestFromSlotHostile: ranges in the pixels, past the slot, unaligned,
// overlapping, missing, or beside arrays in the header are refused,
// naming the array, and leave the batch as it was.
func TestFromSlotHostile(t *testing.T) {
	ok := func() *stokerv1.BatchTargets {
		rg := func(o, n uint64) *stokerv1.SlotRange { return &stokerv1.SlotRange{Offset: o, Length: n} }
		return &stokerv1.BatchTargets{Offsets: []uint32{0, 2}, InSlot: &stokerv1.TargetsInSlot{
			Boxes: rg(64, 32), Labels: rg(128, 16), Iscrowd: rg(192, 2), Keypoints: rg(256, 0),
			KeypointsVisibility: rg(256, 0), MaskOffsets: rg(256, 0), MaskRuns: rg(256, 0), OverlapMasks: rg(256, 0),
			MaskFillOffsets: rg(256, 0), MaskFills: rg(256, 0)}}
	}
	slot := make([]byte, 256)
	if err := FromSlot(ok(), slot, 64); err != nil {
		t.Fatalf("a well-formed batch: %v", err)
	}
	for _, c := range []struct {
		spoil func(*stokerv1.BatchTargets)
		want  string
	}{
		{func(b *stokerv1.BatchTargets) { b.InSlot.Boxes.Offset = 32 }, "boxes at [32, +32)"},
		{func(b *stokerv1.BatchTargets) { b.InSlot.Labels.Length = 1 << 62 }, "labels at [128, +4611686018427387904)"},
		{func(b *stokerv1.BatchTargets) { b.InSlot.Iscrowd.Offset = 1<<64 - 8 }, "iscrowd at [18446744073709551608, +2)"},
		{func(b *stokerv1.BatchTargets) { b.InSlot.Labels.Offset = 68 }, "labels at [68, +16)"},
		{func(b *stokerv1.BatchTargets) { b.InSlot.Labels.Offset = 80 }, "labels at [80, +16) overlaps boxes"},
		{func(b *stokerv1.BatchTargets) { b.InSlot.MaskRuns = nil }, "mask_runs: no place"},
		{func(b *stokerv1.BatchTargets) { b.Labels = []byte{1} }, "labels both in the slot and in the header"},
		{func(b *stokerv1.BatchTargets) { b.InSlot.MaskRuns.Offset = 264 }, "mask_runs at [264, +0)"},
	} {
		bt := ok()
		c.spoil(bt)
		before := proto.Clone(bt)
		err := FromSlot(bt, slot, 64)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error with %q", err, c.want)
		}
		if !proto.Equal(bt, before) {
			t.Errorf("%q: the batch changed", c.want)
		}
	}
}

// TestSlotRoom: the room is the targets' bound and the arrays' alignment,
// at most an eighth of the pixels, a multiple of SlotAlign.
func TestSlotRoom(t *testing.T) {
	for _, c := range []struct{ pixels, batch, max, want int64 }{
		{64 * 3 * 640 * 640, 64, 16 << 10, alignUp(Size(64*16<<10) + 10*SlotAlign)},
		{8 * 3 * 32 * 32, 8, 16 << 10, 8 * 3 * 32 * 32 / 8},
		{7, 1, 16 << 10, 0},
		{9 * 8, 1, 16 << 10, SlotAlign},
	} {
		if got := SlotRoom(c.pixels, c.batch, c.max); got != c.want {
			t.Errorf("SlotRoom(%d, %d, %d) = %d, want %d", c.pixels, c.batch, c.max, got, c.want)
		}
	}
}
