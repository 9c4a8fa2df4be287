package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/server/internal/plan"
)

// peerMakerOf is e's peer maker for addr, nil when it has none.
func peerMakerOf(e *testEnv, addr string) *peerMaker {
	ms, _ := e.srv.makers.Snapshot()
	for _, m := range ms {
		if pm, ok := m.(*peerMaker); ok && pm.Name() == addr {
			return pm
		}
	}
	return nil
}

// makerSeries counts e's metric series labelled maker=addr.
func makerSeries(t *testing.T, e *testEnv, addr string) int {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "maker" && l.GetValue() == addr {
					n++
				}
			}
		}
	}
	return n
}

// TestPeerDecoderRefused: a peer whose decoder would make other bytes is
// never leased to: it is counted as a "decoder" lease failure and says why
// it is unavailable, naming both identities; a peer of another stoker
// version with the same output is used; the epoch is made, exactly once.
func TestPeerDecoderRefused(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	ours := pipeline.LocalIdentity()
	otherBytes, otherVersion := ours, ours
	otherBytes.Output++
	otherVersion.Version = "v9.9.9"
	bad := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, identity: &otherBytes})
	good := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, identity: &otherVersion})
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: bad.addr + "," + good.addr})
	waitPeers(t, coord, 1)
	waitUntil(t, "the peer with other bytes counted as refused", func() bool {
		return testutil.ToFloat64(coord.srv.m.coord.LeaseFailures.WithLabelValues(bad.addr, "decoder")) > 0
	})
	checkOnce(t, coord.collect(t, smallJob("tiny", 4)), plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 4}))
	if n := testutil.ToFloat64(coord.srv.m.coord.Leases.WithLabelValues(bad.addr)); n != 0 {
		t.Errorf("%v leases to the peer with other bytes", n)
	}
	if n := testutil.ToFloat64(coord.srv.m.coord.Leases.WithLabelValues(good.addr)); n == 0 {
		t.Error("no lease to the peer of another stoker version with the same output")
	}
	err := peerMakerOf(coord, bad.addr).Unavailable()
	if !errors.Is(err, work.ErrDecoder) || !strings.Contains(err.Error(), ours.String()) || !strings.Contains(err.Error(), otherBytes.String()) {
		t.Errorf("Unavailable: %v; want the decoder naming %v and %v", err, ours, otherBytes)
	}
	if err := peerMakerOf(coord, good.addr).Unavailable(); err != nil {
		t.Errorf("the ready peer says %v", err)
	}
	if n := bad.workJobs(); n != 0 || testutil.ToFloat64(bad.srv.m.work.Leases.WithLabelValues("done")) != 0 {
		t.Errorf("the refused worker holds %d jobs", n)
	}
}

// TestPeerUnavailableSays: a peer that refuses the coordinator says why in
// a user's words, with the gRPC message kept.
func TestPeerUnavailableSays(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	ca, cert, key := testCA(t)
	otherCA, _, _ := testCA(t)
	tokened := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, AuthTokens: writeFile(t, "tokens", "s3cret\n")})
	tlsWorker := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, TLSCert: cert, TLSKey: key})
	for _, tc := range []struct {
		name string
		cfg  Config
		addr string
		want string
	}{
		{"no token", Config{Peers: tokened.addr}, tokened.addr, "Unauthenticated: missing or invalid bearer token"},
		{"unknown CA", Config{Peers: tlsWorker.addr, PeerCA: otherCA}, tlsWorker.addr, "TLS: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"plaintext to TLS", Config{Peers: tlsWorker.addr}, tlsWorker.addr, "Unavailable: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Datasets = map[string]string{"tiny": root}
			coord := startServer(t, tc.cfg)
			var pm *peerMaker
			waitUntil(t, "the peer says why it is unavailable", func() bool {
				pm = peerMakerOf(coord, tc.addr)
				return pm != nil && pm.Unavailable() != nil
			})
			t.Logf("%s", pm.Unavailable())
			if err := pm.Unavailable(); !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Unavailable: %q, want it to begin %q", err, tc.want)
			}
		})
	}
	// With the right CA the same worker is ready.
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: tlsWorker.addr, PeerCA: ca})
	waitPeers(t, coord, 1)
}

// TestPeerSeriesGoWithPeer: a peer that leaves a dns:/// peer set takes its
// metric series (stoker_leases_total, stoker_lease_failures_total) with
// it, so DNS churn cannot grow them without bound.
func TestPeerSeriesGoWithPeer(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	ours := pipeline.LocalIdentity()
	otherBytes := ours
	otherBytes.Output++
	good := startServerOn(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1}, "127.0.0.2:0")
	_, port, _ := net.SplitHostPort(good.addr)
	bad := startServerOn(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1, identity: &otherBytes}, "127.0.0.3:"+port)
	var mu sync.Mutex
	hosts := []string{"127.0.0.2", "127.0.0.3"}
	lookup := func(ctx context.Context, host string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return hosts, nil
	}
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: "dns:///workers.test:" + port,
		PeerRefresh: 20 * time.Millisecond, LeaseTimeout: time.Second, lookup: lookup})
	waitPeers(t, coord, 1)
	waitUntil(t, "the peer with other bytes counted", func() bool { return makerSeries(t, coord, bad.addr) > 0 })
	coord.collect(t, smallJob("tiny", 4))
	if makerSeries(t, coord, good.addr) == 0 {
		t.Fatal("no series for the peer that made batches")
	}
	mu.Lock()
	hosts = nil
	mu.Unlock()
	waitUntil(t, "the peers' series gone", func() bool {
		return makerSeries(t, coord, good.addr) == 0 && makerSeries(t, coord, bad.addr) == 0
	})
	// Back in the set, a peer counts again.
	mu.Lock()
	hosts = []string{"127.0.0.2"}
	mu.Unlock()
	waitPeers(t, coord, 1)
	coord.collect(t, smallJob("tiny", 4))
	if makerSeries(t, coord, good.addr) == 0 {
		t.Error("no series for the peer back in the set")
	}
}
