package server

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestShmBatchesMadeInSlots: with the trainer on shared memory, batches are
// made in their ring slots, none copied into one as it goes out: by the
// server's executor, and by peers (their chunks received into the slot) on
// a coordinator that makes nothing itself. The bytes are a server's alone,
// in chunks.
func TestShmBatchesMadeInSlots(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	alone := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
	want := alone.collect(t, smallJob("tiny", 4))
	_, addrs := peers(t, root, 2)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"local executor", Config{Datasets: map[string]string{"tiny": root}, Workers: 2, Shm: true}},
		{"peers", Config{Datasets: map[string]string{"tiny": root}, Peers: addrs, Shm: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startServer(t, tc.cfg)
			if tc.cfg.Peers != "" {
				waitPeers(t, e, 2)
			}
			st := e.shmAccepted(t, smallJob("tiny", 4), 4)
			got, inSlots := st.readEpoch(t, false)
			sameBatches(t, "made in slots", want.batches, got.batches)
			if inSlots != len(want.batches) {
				t.Errorf("%d of %d batches in slots", inSlots, len(want.batches))
			}
			if n := testutil.ToFloat64(e.srv.m.shmSlotCopies.WithLabelValues("tiny")); n != 0 {
				t.Errorf("%v batches copied into their slot, want all made there (a ring of %d slots)", n, st.offer.GetSlots())
			}
		})
	}
}

// TestShmTrainerCannotFramePeer: a trainer can write its ring, slots it
// does not hold included, while a peer's batch is received there and
// verified. It spoils only its own batches: the verifier compares the
// pixels kept aside as they came, so the honest peer is not quarantined.
func TestShmTrainerCannotFramePeer(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	ws, addr := peers(t, root, 1)
	e := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addr, Shm: true, VerifyFraction: 1})
	waitPeers(t, e, 1)
	st := e.shmAccepted(t, smallJob("tiny", 4), 4)
	// The trainer's own mapping of the memfd (not the server's): writes
	// through it are the trainer's.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt) // before the mapping goes (cleanups run last first)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range st.mem {
				st.mem[i] = 0xaa
			}
		}
	}()
	got, inSlots := st.readEpoch(t, false)
	halt()
	if inSlots != len(got.batches) || testutil.ToFloat64(ws[0].srv.m.work.Leases.WithLabelValues("done")) == 0 {
		t.Fatalf("%d of %d batches in slots, made by the peer: %v", inSlots, len(got.batches), testutil.ToFloat64(ws[0].srv.m.work.Leases.WithLabelValues("done")))
	}
	if why := e.srv.verify.Why(quarantinedMaker(t, e, addr)); why != nil {
		t.Errorf("the honest peer is quarantined: %v", why)
	}
	if n := testutil.ToFloat64(e.srv.m.coord.LeaseFailures.WithLabelValues(addr, "mismatch")); n != 0 {
		t.Errorf("%v mismatches on the honest peer", n)
	}
}
