package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestShmTargetsInSlot: a trainer on shared memory that reads targets
// from the slot (ShmRequest.targets_in_slot) gets each batch's target
// arrays after its pixels when they fit in the slot's room, in its header
// when they do not (a 4x4 output leaves 64 bytes of room: only a batch
// short enough to leave more, or with no box, fits), and in its header
// always when it did not ask (the Go
// client); the batches are the same bytes as over gRPC's chunks in every
// case, targets, masks and pixels.
func TestShmTargetsInSlot(t *testing.T) {
	ann, _ := photosMasks(t)
	e := startServer(t, Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1, Shm: true})
	job := func(size uint32) *pb.OpenJob {
		j := smallJob("det", 8)
		j.Job.Transform.Ops[0] = rrcOp(size)
		j.Job.Targets = true
		j.Job.TargetFields = []string{"boxes", "labels", "iscrowd", "masks"}
		return j
	}
	for _, c := range []struct {
		name              string
		size              uint32
		ask               bool
		inSlot, inHeaders bool
	}{
		{"in the slot", 32, true, true, false},
		{"too large for the slot: in the header", 4, true, false, true},
		{"not asked: in the header", 32, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := e.collect(t, job(c.size))
			slotsBefore := testutil.ToFloat64(e.srv.m.shmTargets.WithLabelValues("det", "slot"))
			headersBefore := testutil.ToFloat64(e.srv.m.shmTargets.WithLabelValues("det", "header"))
			open := job(c.size)
			open.Shm = &pb.ShmRequest{TargetsInSlot: c.ask}
			st := e.shmAccepted(t, open, 4)
			got, inSlots := st.readEpoch(t, false)
			sameBatches(t, c.name, want.batches, got.batches)
			n := len(want.batches)
			pixels := uint64(8 * 3 * c.size * c.size)
			if inSlots != n {
				t.Errorf("%d of %d batches in slots", inSlots, n)
			}
			if grew := st.offer.GetSlotBytes() > pixels; grew != c.ask {
				t.Errorf("slots of %d bytes for %d bytes of pixels; asked for targets in the slot %v", st.offer.GetSlotBytes(), pixels, c.ask)
			}
			slots := int(testutil.ToFloat64(e.srv.m.shmTargets.WithLabelValues("det", "slot")) - slotsBefore)
			headers := int(testutil.ToFloat64(e.srv.m.shmTargets.WithLabelValues("det", "header")) - headersBefore)
			switch {
			case c.inSlot && (st.targetsInSlot != n || slots != n || headers != 0):
				t.Errorf("%d of %d batches' targets read from the slot (counted: %d slot, %d header), want all", st.targetsInSlot, n, slots, headers)
			case c.inHeaders && (st.targetsInSlot != slots || headers == 0 || slots+headers != n):
				t.Errorf("%d of %d batches' targets read from the slot (counted: %d slot, %d header), want some in the header", st.targetsInSlot, n, slots, headers)
			case !c.ask && (st.targetsInSlot != 0 || slots+headers != 0):
				t.Errorf("not asked: %d batches' targets in the slot (counted: %d slot, %d header)", st.targetsInSlot, slots, headers)
			}
		})
	}
}
