package server

import (
	"encoding/binary"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestLyingPeerTargets: a peer whose batches' targets (ragged arrays) lie,
// a box's coordinate changed or its offsets out of range or going down,
// never reaches the trainer: the coordinator refuses the arrays before it
// reads them (the offsets: a malformed answer, which ends the peer's
// stream as any malformed header does, the lease failing as an error) or
// finds the sample made again differs (the box: a mismatch), and the
// trainer gets exactly the epoch a server alone makes, targets and all.
func TestLyingPeerTargets(t *testing.T) {
	ann, _ := photosCOCO(t)
	cfg := Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	job := smallJob("det", 4)
	job.Job.Targets = true
	want := startServer(t, cfg).collect(t, job)
	for _, tc := range []struct {
		name, reason string
		lie          func(*pb.BatchTargets)
	}{
		{"a box", "mismatch", func(bt *pb.BatchTargets) {
			if len(bt.Boxes) > 0 {
				bt.Boxes[1] ^= 0x01
			}
		}},
		{"offsets going down", "error", func(bt *pb.BatchTargets) {
			o := bt.Offsets
			if len(o) < 3 { // a lease of one sample: its offsets start past 0
				o[0] = o[1] + 1
				return
			}
			o[1] = o[2] + 1
		}},
		{"offsets out of range", "error", func(bt *pb.BatchTargets) { bt.Offsets[len(bt.Offsets)-1] += 1 << 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			liar := startServer(t, cfg, grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				if strings.HasSuffix(info.FullMethod, "/Work") {
					ss = &liar{ServerStream: ss, lie: func(r *pb.WorkResponse) {
						if bt := r.GetDone().GetBatch().GetTargets(); bt != nil {
							tc.lie(bt)
						}
					}}
				}
				return h(srv, ss)
			}))
			honest := startServer(t, cfg)
			c := cfg
			c.Peers, c.VerifyFraction, c.Workers = liar.addr+","+honest.addr, 1, 0
			coord := startServer(t, c)
			waitPeers(t, coord, 2)
			got := coord.collect(t, job)
			sameBatches(t, "with a peer lying in its targets", want.batches, got.batches)
			if n := testutil.ToFloat64(coord.srv.m.coord.LeaseFailures.WithLabelValues(liar.addr, tc.reason)); n < 1 {
				t.Errorf("stoker_lease_failures_total{reason=%s} for the liar: %v, want >= 1", tc.reason, n)
			}
		})
	}
}

// TestLyingPeerTargetValues: a peer honest for its first answers that then
// sends targets whose values are out of range (a NaN box, a label past
// the dataset's classes, a crowd flag of 2) is caught in the first batch
// it lies in, with the byte comparison off (VerifyFraction < 0): every
// peer batch's targets are range-checked before they reach a trainer. No
// such batch reaches it (the epoch is the lone server's, byte for byte,
// each batch once), and the peer is quarantined for its values.
func TestLyingPeerTargetValues(t *testing.T) {
	ann, _ := photosCOCO(t)
	cfg := Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 1}
	job := smallJob("det", 2)
	job.Job.Targets = true
	want := startServer(t, cfg).collect(t, job)
	const honestFor = 2 // answers before the peer starts to lie
	for _, tc := range []struct {
		name, why string
		lie       func(bt *pb.BatchTargets, k int)
	}{
		{"NaN box", "finite", func(bt *pb.BatchTargets, k int) {
			binary.LittleEndian.PutUint32(bt.Boxes[16*k+8:], math.Float32bits(float32(math.NaN())))
		}},
		{"label out of range", "labels are 0 to 3", func(bt *pb.BatchTargets, k int) {
			binary.LittleEndian.PutUint64(bt.Labels[8*k:], 1e12)
		}},
		{"crowd flag", "crowd flag", func(bt *pb.BatchTargets, k int) { bt.Iscrowd[k] = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var answers, lied atomic.Int64
			liar := startServer(t, cfg, grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				if strings.HasSuffix(info.FullMethod, "/Work") {
					ss = &liar{ServerStream: ss, lie: func(r *pb.WorkResponse) {
						bt := r.GetDone().GetBatch().GetTargets()
						if bt == nil || answers.Add(1) <= honestFor {
							return
						}
						// Every instance of the batch: the last one
						// checked is as caught as the first.
						for k := range len(bt.Labels) / 8 {
							tc.lie(bt, k)
						}
						if len(bt.Labels) > 0 {
							lied.Add(1)
						}
					}}
				}
				return h(srv, ss)
			}))
			honest := startServer(t, cfg)
			c := cfg
			c.Peers, c.VerifyFraction, c.Workers = liar.addr+","+honest.addr, -1, 0
			coord := startServer(t, c)
			waitPeers(t, coord, 2)
			got := coord.collect(t, job)
			sameBatches(t, "with a peer lying in its targets' values", want.batches, got.batches)
			if lied.Load() == 0 {
				t.Fatalf("the peer answered %d times and never lied: the test proves nothing", answers.Load())
			}
			why := coord.srv.verify.Why(quarantinedMaker(t, coord, liar.addr))
			if why == nil || !strings.Contains(why.Error(), tc.why) {
				t.Errorf("the liar's quarantine: %v, want it for its targets (%q)", why, tc.why)
			}
			t.Logf("%d answers, %d lying; quarantined: %v", answers.Load(), lied.Load(), why)
		})
	}
}
