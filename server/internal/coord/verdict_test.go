package coord

import (
	"math"
	"strings"
	"testing"
)

// TestVerdict: each rule of the verdict, from the figures that call for
// it.
func TestVerdict(t *testing.T) {
	starved := verdictInput{begun: true, delivered: 10, target: 0.02, starved: 0.6, stall: 0.6, workers: 3}
	with := func(f func(*verdictInput)) verdictInput {
		in := starved
		f(&in)
		return in
	}
	local := func(queue, read, decode, transform float64) *MakingShares {
		return &MakingShares{Queue: queue, Read: read, Decode: decode, Transform: transform, Batches: 5}
	}
	onPeer := &MakingShares{Queue: 0.1, Decode: 0.1, Peer: 0.3, Network: 0.5, Batches: 5}
	for _, tc := range []struct {
		name string
		in   verdictInput
		want string // the bottleneck
		says string // in the line
	}{
		{"starting", with(func(in *verdictInput) { in.starting = true }), bnStarting, "starting"},
		{"nothing yet", with(func(in *verdictInput) { in.begun, in.delivered = false, 0 }), bnStarting, "starting"},
		{"trainer stopped", with(func(in *verdictInput) { in.delivered, in.buffered, in.waited = 0, 6, 1 }), bnIdle, "6 made batches"},
		// A trainer reports its wait once it ends: one blocked for the
		// whole window has reported none.
		{"blocked trainer", with(func(in *verdictInput) {
			in.delivered, in.credit, in.starved, in.stall, in.making = 0, true, 0, 0, local(0.5, 0, 0.5, 0)
		}), bnDecode, "decode-bound"},
		{"blocked, makers stuck", with(func(in *verdictInput) { in.delivered, in.credit, in.starved, in.stall = 0, true, 0, 0 }), bnMaking, "no batch"},
		{"slow trainer, no GPU monitor", with(func(in *verdictInput) { in.starved, in.stall = 0.01, 0.01 }), bnTrainer, "waits for input 1%"},
		{"slow trainer, busy GPU", with(func(in *verdictInput) { in.starved, in.gpuOK, in.gpuIdle = 0, true, 0.01 }), bnTrainer, "the GPU is busy"},
		{"trainer's CPU", with(func(in *verdictInput) { in.starved, in.gpuOK, in.gpuIdle = 0, true, 0.4 }), bnTrainer, "idles 40%"},
		{"delivery", with(func(in *verdictInput) { in.sending, in.making, in.bytes = 0.9, local(0, 0, 1, 0), 2e8 }), bnDelivery, "200 MB/s"},
		{"stuck makers", with(func(in *verdictInput) {}), bnMaking, "no batch was made"},
		{"decode", with(func(in *verdictInput) { in.making = local(0.7, 0.02, 0.27, 0.01) }), bnDecode, "decode-bound on 3 local cores"},
		{"one core", with(func(in *verdictInput) { in.making, in.workers = local(0.9, 0, 0.1, 0), 1 }), bnDecode, "on 1 local core"},
		{"read", with(func(in *verdictInput) { in.making = local(0.6, 0.3, 0.1, 0) }), bnRead, "75% of the local work"},
		{"transform", with(func(in *verdictInput) { in.making = local(0.3, 0.1, 0.2, 0.4) }), bnTransform, "ColorJitter"},
		{"network", with(func(in *verdictInput) {
			in.making = onPeer
			in.makers = []makerFigures{{"a:1", 0.2, 1, 0.1}, {"b:2", 0.6, 3, 0.8}}
		}), bnNetwork, "network-bound to peer b:2: 80%"},
		{"slow peer", with(func(in *verdictInput) {
			in.making = onPeer
			in.makers = []makerFigures{{"a:1", 0.7, 2.5, 0.1}, {"b:2", 0.1, 0.1, 0.8}}
		}), bnPeer, "peer a:1 is slow (2.50 s a batch)"},
		{"peer without times", with(func(in *verdictInput) {
			in.making = onPeer
			in.makers = []makerFigures{{"a:1", 0.8, 2, math.NaN()}}
		}), bnPeer, "peer a:1 is slow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, line := verdict(tc.in)
			if got != tc.want || !strings.Contains(line, tc.says) {
				t.Errorf("verdict %q: %q; want %q saying %q", got, line, tc.want, tc.says)
			}
		})
	}
}
