package server

import (
	"bytes"
	"context"
	"strings"
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
