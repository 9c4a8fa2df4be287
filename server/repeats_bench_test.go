package server

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// BenchmarkRepeatsDecodes measures what routing a sample's copies to its
// home saves under repeated augmentation: 3 ranks of a job of 3 repeats,
// concurrently, over a coordinator with 3 peers (cache affinity, one
// decode goroutine each), against the same job whose copies are each
// decoded on their own (the peers without a coefficient cache: what a
// DataLoader per rank does). It reports the MCUs entropy-decoded per epoch
// (all peers, summed) of both, per epoch, and their ratio:
//
//	go test ./server -run '^$' -bench RepeatsDecodes -benchtime 1x
func BenchmarkRepeatsDecodes(b *testing.B) {
	root := makeDataset(b, []string{"a", "b", "c"}, 120, false) // 360: 256 // 3 = 85 a rank
	run := func(coefBudget int64) [2]float64 {
		var envs []*testEnv
		var addrs []string
		for range 3 {
			e := startServer(b, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, CoefBudget: coefBudget})
			envs, addrs = append(envs, e), append(addrs, e.addr)
		}
		c := startServer(b, Config{Datasets: map[string]string{"tiny": root}, Peers: strings.Join(addrs, ",")})
		waitPeers(b, c, 3)
		decoded := func() int64 {
			n := int64(0)
			for _, e := range envs {
				n += e.srv.index.ix.Stats().MCUsDecoded
			}
			return n
		}
		var per [2]float64
		for ep := range uint64(2) {
			before := decoded()
			var wg sync.WaitGroup
			for r := range uint32(3) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					o := repeatsJob(r)
					o.Epoch, o.Job.Trace = ep, false
					ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
					defer cancel()
					if _, err := readEpoch(c.feedStream(b, ctx, o)); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			per[ep] = float64(decoded() - before)
		}
		return per
	}
	for b.Loop() {
		home, alone := run(0), run(-1)
		for ep := range 2 {
			b.Logf("epoch %d: %.0f MCUs entropy-decoded with the copies routed home, %.0f with each copy decoded on its own: %.2fx",
				ep, home[ep], alone[ep], home[ep]/alone[ep])
		}
		b.ReportMetric(home[0]/alone[0], "epoch0-ratio")
		b.ReportMetric(home[1]/alone[1], "epoch1-ratio")
	}
}
