package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
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

// TestVerifyStrictStart: a peer's first batches have every slot compared,
// and each time its Work stream comes up again; then the share decays,
// halving every strictHalfLife batches, to the configured fraction.
func TestVerifyStrictStart(t *testing.T) {
	const f = DefaultVerifyFraction
	v := newVerifier(f, nil, slog.New(slog.DiscardHandler), func() {})
	a, b := &streamMaker{}, &streamMaker{}
	picked := func(m coord.Maker) int { return len(v.Pick(m, 64, 64)) }
	for k := range strictBatches {
		if n := picked(a); n != 64 {
			t.Fatalf("a new peer's lease %d: %d of 64 slots compared, want all", k, n)
		}
	}
	if n := picked(b); n != 64 {
		t.Errorf("another new peer's first lease: %d of 64 slots compared, want all", n)
	}
	prev := 1.0
	for k := range 100 {
		r := strictRate(k, f)
		if r > prev || r < f || k < strictBatches && r != 1 {
			t.Fatalf("strictRate(%d) = %v after %v: want 1 for the first %d, then non-increasing down to %v", k, r, prev, strictBatches, f)
		}
		prev = r
	}
	if r := strictRate(strictBatches+strictHalfLife-1, f); r != 0.5 {
		t.Errorf("strictRate one half-life after the strict start: %v, want 0.5", r)
	}
	if r := strictRate(40, f); r != f {
		t.Errorf("strictRate(40) = %v, want the configured %v", r, f)
	}
	for range 60 {
		v.Pick(a, 64, 64)
	}
	sum := 0
	for range 2000 {
		sum += picked(a)
	}
	if mean := float64(sum) / 2000; mean > 4*64*f {
		t.Errorf("after its strict start a peer has %.2f of 64 slots compared on average, want about %.2f", mean, 64*f)
	}
	a.streams.Add(1) // its Work stream came up again
	if n := picked(a); n != 64 {
		t.Errorf("a returning peer's first lease: %d of 64 slots compared, want all", n)
	}

	// Parts of batches (cache affinity) count as their share of a batch:
	// a peer's first strictBatches batches' worth of quarter-batch parts
	// are compared whole, as many samples as whole leases would be.
	c := &streamMaker{}
	for k := range 4 * strictBatches {
		if n := len(v.Pick(c, 16, 64)); n != 16 {
			t.Fatalf("a new peer's quarter-batch part %d: %d of 16 slots compared, want all", k, n)
		}
	}
	if r := v.rate(c, 0); r >= 1 {
		t.Errorf("after %d batches' worth of parts the rate is %v: want the strict start over", strictBatches, r)
	}
}

// streamMaker is a peer as the verifier sees it: a maker whose Work
// stream comes up again (Connection).
type streamMaker struct {
	coord.Maker
	streams atomic.Uint64
}

func (m *streamMaker) Connection() uint64 { return m.streams.Load() }

// TestVerifyBound: the expected corrupted samples a peer delivers before
// it is quarantined, lying in one sample per batch from its lease W on
// (the sum over batches k >= W of the chance that none of W..k was
// caught), as the README states them for the default fraction: none from
// its first lease, about 1/f - 1 once the strict start is over, never
// more.
func TestVerifyBound(t *testing.T) {
	const f = DefaultVerifyFraction
	expected := func(w int) float64 {
		sum, missed := 0.0, 1.0
		for k := w; missed > 1e-12; k++ {
			missed *= 1 - strictRate(k, f)
			sum += missed
		}
		return sum
	}
	for _, tc := range []struct {
		w    int
		want float64
	}{{0, 0}, {8, 13}, {16, 115}, {24, 183}, {40, 199}, {1000, 199}} {
		got := expected(tc.w)
		t.Logf("lying from lease %d on: %.1f corrupted samples expected before quarantine", tc.w, got)
		if math.Abs(got-tc.want) > 0.5 || got > (1-f)/f+1e-6 {
			t.Errorf("lying from lease %d on: %.2f expected, the README says %v (never more than %.1f)", tc.w, got, tc.want, (1-f)/f)
		}
	}
}
