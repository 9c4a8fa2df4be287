package server

import (
	"strings"
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
