package server

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestFieldsWithViews: a job of the simclr preset's two views (MultiView)
// and fields gets each sample's fields beside its views, in batch order,
// whether the server makes it alone, leases it whole to a peer, or in
// parts to 3 (cache affinity): every slot's fields are its index's, the
// same index having the same key on every topology; a failed sample's
// slot, padded, is a copy of a good slot in its fields and in both views;
// and the relayed batches are the lone server's, headers and pixels.
func TestFieldsWithViews(t *testing.T) {
	dir, want := clipDir(t)
	job := clipJob(pb.ShuffleMode_SHUFFLE_MODE_BLOCK, pb.FailPolicy_FAIL_POLICY_PAD)
	job.Job.Transform = &pb.TransformSpec{Preset: "simclr"}
	const side = 224
	keyOf := map[int64]string{} // over every topology
	var alone epoch
	for _, n := range []int{0, 1, 3} {
		var e *testEnv
		if n == 0 {
			e = startServer(t, Config{Datasets: map[string]string{"clip": dir}, Workers: 2})
		} else {
			var addrs []string
			for range n {
				addrs = append(addrs, startServer(t, Config{Datasets: map[string]string{"clip": dir}, Workers: 1}).addr)
			}
			e = startServer(t, Config{Datasets: map[string]string{"clip": dir}, Peers: strings.Join(addrs, ",")})
			waitPeers(t, e, n)
		}
		ep := e.collect(t, job)
		checkFields(t, ep, want)
		pads := 0
		for _, b := range ep.batches {
			h := b.hdr
			nb := len(h.GetIndices())
			vs := h.GetViews()
			if len(vs) != 2 || !slices.Equal(vs[0].GetDims(), []uint32{uint32(nb), 3, side, side}) ||
				!slices.Equal(vs[1].GetDims(), []uint32{uint32(nb), 3, side, side}) {
				t.Fatalf("%d peers, batch %d: views %v, want 2 of [%d 3 %d %d]", n, h.GetNumber(), vs, nb, side, side)
			}
			const size = 3 * side * side
			if len(b.data) != 2*nb*size {
				t.Fatalf("%d peers, batch %d: %d bytes, want %d", n, h.GetNumber(), len(b.data), 2*nb*size)
			}
			// view v of slot i: the views are view after view, each its
			// batch's samples back to back.
			pixels := func(v, i int) []byte { return b.data[(v*nb+i)*size : (v*nb+i+1)*size] }
			keys := h.GetFields()[1].GetValues()
			for i, idx := range h.GetIndices() {
				if k, ok := keyOf[idx]; ok && k != string(keys[i]) {
					t.Errorf("%d peers, batch %d slot %d: index %d has key %q, elsewhere %q", n, h.GetNumber(), i, idx, keys[i], k)
				}
				keyOf[idx] = string(keys[i])
				j := slices.Index(h.GetIndices(), idx)
				if j == i {
					continue
				}
				pads++ // slot i is slot j's copy, in its place
				for _, f := range h.GetFields() {
					if !bytes.Equal(f.GetValues()[i], f.GetValues()[j]) {
						t.Errorf("%d peers, batch %d: padded slot %d's %s is not slot %d's", n, h.GetNumber(), i, f.GetName(), j)
					}
				}
				for v := range 2 {
					if !bytes.Equal(pixels(v, i), pixels(v, j)) {
						t.Errorf("%d peers, batch %d: padded slot %d's view %d is not slot %d's", n, h.GetNumber(), i, v, j)
					}
				}
			}
		}
		if pads != 2 {
			t.Errorf("%d peers: %d padded slots, want 2 (the two bad samples')", n, pads)
		}
		if n == 0 {
			alone = ep
			continue
		}
		if len(ep.batches) != len(alone.batches) {
			t.Fatalf("%d peers: %d batches, want %d", n, len(ep.batches), len(alone.batches))
		}
		for i, b := range ep.batches {
			w := alone.batches[i]
			if !sameFields(b.hdr, w.hdr) || !bytes.Equal(b.data, w.data) || !slices.Equal(b.hdr.GetIndices(), w.hdr.GetIndices()) {
				t.Errorf("%d peers: batch %d differs from the lone server's", n, i)
			}
		}
		if home := testutil.ToFloat64(e.srv.m.coord.AffinitySamples.WithLabelValues("home")); n == 3 && home == 0 {
			t.Errorf("3 peers: no sample made at its home peer: the batches were not leased in parts")
		}
	}
}
