package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/faultproxy"
)

// TestServeStoreOutageNoPad: a store that goes away mid-epoch, with part
// of the dataset in the server's byte cache, pads nothing: every batch the
// trainer got before the job ended is the one a clean epoch has (no sample
// error, the same bytes), the job ends with UNAVAILABLE naming the store
// and saying how to resume, and, the store back, the epoch resumed from
// the next batch is byte for byte the clean epoch's rest.
func TestServeStoreOutageNoPad(t *testing.T) {
	waitingTest(t)
	ctx := processTest(t, 4*time.Minute)
	const n = 64
	data := writeDataset(t, n, 4, 0)
	s := s3Store(t)
	s.PutTree(t, "bkt", "if/", data)
	runIndexCmd(t, ctx, s.Env(), s.URL("bkt", "if/"))
	spec := testJob(4, 11)
	local := startServe(t, ctx, serveConfig{name: "local", dataset: data, workers: 2})
	_, want := epochSums(t, ctx, local.addr, spec, n)

	p, env := faultProxy(t, s, 1, faultproxy.Plan{})
	srv := startServe(t, ctx, serveConfig{name: "s3", dataset: s.URL("bkt", "if/"), workers: 2,
		args: []string{"--store-attempts=2", "--store-timeout=2s"}, env: env})
	// The epoch's first batches, read into the byte cache.
	warm, cancel := context.WithCancel(ctx)
	runEpoch(warm, srv.addr, spec, consumeOpts{credits: 1, after: func(k int) {
		if k == 3 {
			cancel()
		}
	}})
	cancel()
	if err := p.SetPlan(faultproxy.Plan{Down: faultproxy.Reset, Only: faultproxy.ObjectGETs}); err != nil {
		t.Fatal(err)
	}
	res, err := runEpoch(ctx, srv.addr, spec, consumeOpts{credits: 1})
	if err == nil || !strings.Contains(err.Error(), "code = Unavailable") || !strings.Contains(err.Error(), "s3://bkt") ||
		!strings.Contains(err.Error(), "load_state_dict") {
		t.Fatalf("epoch with the store gone: %v; want UNAVAILABLE naming s3://bkt and how to resume", err)
	}
	t.Logf("%d batches, then: %v", len(res.batches), err)
	if len(res.batches) >= len(want) {
		t.Fatalf("all %d batches came from the cache: the outage was not met", len(res.batches))
	}
	for i, b := range res.batches {
		if len(b.hdr.GetErrors()) > 0 || b.sum() != want[i] {
			t.Errorf("batch %d during the outage: %d sample errors, same bytes as a clean epoch's: %v", i, len(b.hdr.GetErrors()), b.sum() == want[i])
		}
	}
	if err := p.SetPlan(faultproxy.Plan{}); err != nil {
		t.Fatal(err)
	}
	rest := consumeEpoch(t, ctx, srv.addr, spec, consumeOpts{start: uint64(len(res.batches))})
	if got := len(res.batches) + len(rest.batches); got != len(want) {
		t.Fatalf("%d batches before the outage and %d resumed; a clean epoch has %d", len(res.batches), len(rest.batches), len(want))
	}
	for i, b := range rest.batches {
		k := len(res.batches) + i
		if len(b.hdr.GetErrors()) > 0 || b.sum() != want[k] {
			t.Errorf("resumed batch %d: %d sample errors, same bytes as a clean epoch's: %v", k, len(b.hdr.GetErrors()), b.sum() == want[k])
		}
	}
}
