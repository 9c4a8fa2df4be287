package server

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/stoker-dev/stoker/internal/rpc"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
)

// liar is a Work stream that rewrites what a real worker sends: the
// worker's batches, altered by lie before they leave.
type liar struct {
	grpc.ServerStream
	lie func(*pb.WorkResponse)
}

func (l *liar) SendMsg(m any) error {
	switch r := m.(type) {
	case *pb.WorkResponse:
		r = proto.CloneOf(r) // the worker reuses its messages and buffers
		l.lie(r)
		m = r
	case *rpc.OutChunk:
		// Its pixels are the worker's batch, lent: lied about in a copy.
		c := &pb.WorkResponse{Msg: &pb.WorkResponse_Chunk{Chunk: &pb.Chunk{Number: r.Number, Offset: r.Offset, Data: bytes.Clone(r.Data.ReadOnlyData())}}}
		r.Data.Free()
		l.lie(c)
		m = c
	}
	return l.ServerStream.SendMsg(m)
}

// lyingWorker is a real worker whose Work streams lie by lie.
func lyingWorker(t *testing.T, root string, lie func(*pb.WorkResponse)) *testEnv {
	return startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1},
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if strings.HasSuffix(info.FullMethod, "/Work") {
				ss = &liar{ServerStream: ss, lie: lie}
			}
			return h(srv, ss)
		}))
}

// TestLyingPeer: a peer whose batches carry wrong labels, wrong indices or
// wrong pixels never reaches the trainer. Its first batch fails the lease
// as a mismatch, the peer is quarantined (the metric, Status), its batches
// are made by the honest peer, and the trainer gets exactly the epoch a
// server alone makes, byte for byte.
func TestLyingPeer(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	alone := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
	want := alone.collect(t, smallJob("tiny", 4))
	for _, tc := range []struct {
		name string
		lie  func(*pb.WorkResponse)
	}{
		{"labels", func(r *pb.WorkResponse) {
			if h := r.GetDone().GetBatch(); h != nil {
				for i := range h.Labels {
					h.Labels[i] = 7777
				}
			}
		}},
		{"indices", func(r *pb.WorkResponse) {
			if h := r.GetDone().GetBatch(); h != nil {
				for i := range h.Indices {
					h.Indices[i] = -int64(i) - 1
				}
			}
		}},
		{"pixels", func(r *pb.WorkResponse) {
			if c := r.GetChunk(); c != nil && len(c.Data) > 0 {
				c.Data[len(c.Data)/2] ^= 0x40
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			liar := lyingWorker(t, root, tc.lie)
			_, honest := peers(t, root, 1)
			// Every sample compared, so that the pixel lie is caught in its
			// first batch (the default compares one in 200).
			coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: liar.addr + "," + honest, VerifyFraction: 1})
			waitPeers(t, coord, 2)
			got := coord.collect(t, smallJob("tiny", 4))
			sameBatches(t, "with a lying peer", want.batches, got.batches)
			if n := testutil.ToFloat64(coord.srv.m.coord.LeaseFailures.WithLabelValues(liar.addr, "mismatch")); n < 1 {
				t.Errorf("stoker_lease_failures_total{reason=mismatch} for the liar: %v, want >= 1", n)
			}
			if why := coord.srv.verify.Why(quarantinedMaker(t, coord, liar.addr)); why == nil {
				t.Error("the lying peer is not quarantined")
			} else {
				t.Logf("quarantined: %v", why)
			}
			st, err := coord.client.Status(context.Background(), &pb.StatusRequest{})
			if err != nil || st.GetPeersReady() != 1 {
				t.Errorf("Status: %d peers ready (%v), want 1: the liar is not counted", st.GetPeersReady(), err)
			}
			if n := testutil.ToFloat64(coord.srv.m.peersReady); n != 1 {
				t.Errorf("stoker_peers_ready %v, want 1: the liar is not counted", n)
			}
		})
	}
}

// quarantinedMaker finds the coordinator's maker for the peer at addr.
func quarantinedMaker(t *testing.T, e *testEnv, addr string) coord.Maker {
	t.Helper()
	ms, _ := e.srv.makers.Snapshot()
	for _, m := range ms {
		if m.Name() == addr {
			return m
		}
	}
	t.Fatalf("no maker %s", addr)
	return nil
}

// padLiar lies only in the pad slots of a worker's batches: the copies of
// good samples a batch's failed ones are replaced by (fail_policy pad).
// It reads the leases as they come in, to know which slots those are, and
// counts the pad copies it corrupted.
type padLiar struct {
	mu     sync.Mutex
	leases map[uint64][]int64 // lease id → its samples
	pads   map[uint64][]int   // lease id → the byte offsets of its pad slots
	size   map[uint64]int     // lease id → a sample's bytes
	lied   atomic.Int64
}

// stream wraps a worker's Work stream.
func (p *padLiar) stream(ss grpc.ServerStream) grpc.ServerStream {
	return &liar{ServerStream: &recvTap{ServerStream: ss, p: p}, lie: p.lie}
}

// recvTap notes each lease a worker receives.
type recvTap struct {
	grpc.ServerStream
	p *padLiar
}

func (r *recvTap) RecvMsg(m any) error {
	err := r.ServerStream.RecvMsg(m)
	if req, ok := m.(*pb.WorkRequest); ok && err == nil && req.GetLease() != nil {
		l := req.GetLease()
		r.p.mu.Lock()
		r.p.leases[l.GetId()] = slices.Clone(l.GetIndices())
		r.p.mu.Unlock()
	}
	return err
}

func (p *padLiar) lie(r *pb.WorkResponse) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := r.GetDone(); d != nil {
		h := d.GetBatch()
		failed := make(map[int64]bool)
		for _, e := range h.GetErrors() {
			failed[e.GetIndex()] = true
		}
		n := len(h.GetIndices())
		if n == 0 || len(failed) == 0 {
			return
		}
		size := int(h.GetDataBytes()) / n
		var pads []int
		for slot, idx := range p.leases[d.GetLease()] {
			if failed[idx] && slot < n {
				pads = append(pads, slot*size)
			}
		}
		p.pads[d.GetLease()], p.size[d.GetLease()] = pads, size
		return
	}
	if c := r.GetChunk(); c != nil {
		size := p.size[c.GetNumber()]
		for _, off := range p.pads[c.GetNumber()] {
			// The slot's middle byte, if this chunk carries it.
			if at := off + size/2 - int(c.GetOffset()); at >= 0 && at < len(c.Data) {
				c.Data[at] ^= 0x40
				p.lied.Add(1)
			}
		}
	}
}

// TestLyingPeerPadSlots: a peer that lies only in pad slots (the copy of a
// good sample a failed one is replaced by) never gets a corrupted pad copy
// to the trainer at --verify-fraction 1: every slot is compared, not each
// sample once, and the peer is quarantined.
func TestLyingPeerPadSlots(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 30, true)
	for i := range 30 {
		// A quarter of the samples fail: most batches have pad slots.
		if err := os.WriteFile(filepath.Join(root, []string{"a", "b", "c"}[i%3], fmt.Sprintf("bad%02d.jpg", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	job := smallJob("tiny", 4)
	job.Job.MaxSampleErrors = &pb.SampleErrorLimit{Fraction: 1} // a quarter fail, by design
	alone := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
	want := alone.collect(t, job)
	pl := &padLiar{leases: make(map[uint64][]int64), pads: make(map[uint64][]int), size: make(map[uint64]int)}
	liar := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1},
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if strings.HasSuffix(info.FullMethod, "/Work") {
				ss = pl.stream(ss)
			}
			return h(srv, ss)
		}))
	_, honest := peers(t, root, 1)
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: liar.addr + "," + honest, VerifyFraction: 1})
	waitPeers(t, coord, 2)
	got := coord.collect(t, job)
	pads := 0
	for _, b := range want.batches {
		pads += len(b.hdr.GetErrors())
	}
	if pads == 0 {
		t.Fatal("no batch has a pad slot: the test does not exercise them")
	}
	sameBatches(t, "with a peer lying in pad slots", want.batches, got.batches)
	t.Logf("%d pad slots in the epoch; the liar corrupted %d pad copies", pads, pl.lied.Load())
	if pl.lied.Load() == 0 {
		t.Fatal("the liar corrupted no pad copy: the lie was not exercised")
	}
	if why := coord.srv.verify.Why(quarantinedMaker(t, coord, liar.addr)); why == nil {
		t.Error("the peer lying in pad slots is not quarantined")
	} else {
		t.Logf("quarantined: %v", why)
	}
}
