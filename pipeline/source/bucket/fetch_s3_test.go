package bucket

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/faultproxy"
	"github.com/stoker-dev/stoker/internal/storetest"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// s3Shards starts a real S3 server holding shards objects of n samples of
// size bytes, gap bytes apart (a tar member's header and padding), behind
// a fault proxy adding latency to every request, and opens the store
// through the proxy. It returns the store, the samples' ranges shard by
// shard, and the shards' bytes.
func s3Shards(tb testing.TB, shards, n int, size, gap int64, latency time.Duration, opts ...source.Option) (source.Store, *faultproxy.Proxy, []source.Range, map[string][]byte) {
	tb.Helper()
	s := storetest.StartS3(tb, tb.TempDir())
	s.CreateBucket(tb, "bkt")
	rng := rand.New(rand.NewPCG(3, 4))
	contents := map[string][]byte{}
	for i := range shards {
		key := fmt.Sprintf("shard-%06d.tar", i)
		data := make([]byte, int64(n)*(size+gap))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		s.Put(tb, "bkt", "data/"+key, data)
		contents[key] = data
	}
	p, err := faultproxy.New(s.Endpoint, 1, faultproxy.Plan{Latency: latency})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	for _, kv := range s.EnvFor(p.URL()) {
		k, v, _ := strings.Cut(kv, "=")
		tb.Setenv(k, v)
	}
	st, err := source.Open(context.Background(), "s3://bkt/data", opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	var rs []source.Range
	err = st.List(context.Background(), "", func(o source.Object) error {
		for j := range int64(n) {
			rs = append(rs, source.Range{Obj: o, Off: j*(size+gap) + gap, Len: size})
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return st, p, rs, contents
}

// consume reads rs with readers goroutines, as an executor's workers
// take a batch's samples, hinting each batch of batch ranges window
// batches before it is read (hint false: no hints). It returns the first
// error.
func consume(ctx context.Context, rg source.Ranges, rs []source.Range, readers, batch, window int, hint bool, check func(source.Range, []byte)) error {
	batches := (len(rs) + batch - 1) / batch
	hintBatch := func(k int) {
		if hint && k < batches {
			rg.Prefetch(rs[k*batch : min((k+1)*batch, len(rs))])
		}
	}
	for k := range window {
		hintBatch(k)
	}
	// Taking a sample and hinting the batch window batches on are one
	// step: no reader reaches a batch before its hint.
	var mu sync.Mutex
	next := 0
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		i := next
		next++
		if i < len(rs) && i%batch == 0 {
			hintBatch(i/batch + window)
		}
		return i
	}
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range readers {
		wg.Go(func() {
			var buf []byte
			for {
				i := take()
				if i >= len(rs) {
					return
				}
				out, err := rg.Read(ctx, rs[i], buf)
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				if check != nil {
					check(rs[i], out)
				}
				buf = out
			}
		})
	}
	wg.Wait()
	return first
}

// TestFetcherS3: through a real S3 server 30 ms away, a reader that reads
// ranges in the order it hinted them finds every one read ahead (in
// flight or done), in fewer GETs than ranges (a shard's adjacent samples
// are one request); a second epoch of a dataset that fits the cache makes
// no request at all.
func TestFetcherS3(t *testing.T) {
	st, p, rs, contents := s3Shards(t, 4, 32, 8<<10, 512, 30*time.Millisecond)
	cache, _ := source.NewCache(source.WithMemory(4 << 20))
	f := source.NewFetcher(st, source.WithCache(cache), source.WithBudget(source.NewBudget(2<<20)), source.WithMaxInFlight(64), source.WithCoalesce(4<<10, 64<<10))
	defer f.Close()
	var mu sync.Mutex
	check := func(r source.Range, got []byte) {
		mu.Lock()
		defer mu.Unlock()
		checkBytes(t, contents, r, got)
	}
	before := p.Stats().Requests
	// Block order: shards in turn, samples in order within each.
	if err := consume(t.Context(), f, rs, 4, 16, 3, true, check); err != nil {
		t.Fatal(err)
	}
	s := f.Stats()
	gets := p.Stats().Requests - before
	if s.Direct != 0 || s.Ready+s.Waited != int64(len(rs)) || s.Dropped+s.Expired+s.Failed != 0 {
		t.Errorf("epoch 1: stats %+v: want every read answered by its read-ahead", s)
	}
	// 16 samples of 8.5 KiB are one request of at most 64 KiB: 2 or 3 each.
	if gets != s.Requests || gets > int64(len(rs))/4 {
		t.Errorf("epoch 1: %d requests to the store (%d read-ahead) for %d ranges: want the batches' adjacent samples coalesced", gets, s.Requests, len(rs))
	}
	before = p.Stats().Requests
	// Epoch 2, in a global random order: all from the cache.
	if err := consume(t.Context(), f, shuffled(rs, 9), 4, 16, 3, true, check); err != nil {
		t.Fatal(err)
	}
	if gets := p.Stats().Requests - before; gets != 0 {
		t.Errorf("epoch 2 of a dataset that fits: %d requests, want 0", gets)
	}
	if cs := cache.Stats(); cs.MemoryHits != int64(len(rs)) {
		t.Errorf("epoch 2: cache %+v, want %d hits", cs, len(rs))
	}
}

// TestFetcherS3StoreDown: read-aheads that fail (the store answers 503
// SlowDown to every try) are not kept; while the store is down a Read
// fails with the store's error, and once it is back the Reads of the
// failed ranges read them directly, with the right bytes.
func TestFetcherS3StoreDown(t *testing.T) {
	st, p, rs, contents := s3Shards(t, 1, 16, 4<<10, 512, 0, source.WithPolicy(fastPolicy()))
	cache, _ := source.NewCache(source.WithMemory(1 << 20))
	f := source.NewFetcher(st, source.WithCache(cache), source.WithCoalesce(0, 4<<10))
	defer f.Close()
	p.SetPlan(faultproxy.Plan{Down: faultproxy.SlowDown, Only: faultproxy.ObjectGETs})
	f.Prefetch(rs)
	deadline := time.Now().Add(time.Minute)
	for f.Stats().Failed < int64(len(rs)) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: the read-aheads did not all fail", f.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.Read(t.Context(), rs[0], nil); !errors.Is(err, source.ErrUnavailable) || !strings.Contains(err.Error(), "SlowDown") {
		t.Errorf("Read with the store down: %v, want source.ErrUnavailable naming its answer", err)
	}
	if s := f.Stats(); s.Held != 0 || cache.Stats().MemoryRanges != 0 {
		t.Errorf("stats %+v, cache %+v: failed read-aheads held or cached", s, cache.Stats())
	}
	p.SetPlan(faultproxy.Plan{})
	for _, r := range rs {
		out, err := f.Read(t.Context(), r, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkBytes(t, contents, r, out)
	}
	if s := f.Stats(); s.Direct != int64(len(rs))+1 || s.Ready+s.Waited != 0 {
		t.Errorf("stats %+v: want every read direct", s)
	}
}

// BenchmarkFetcherS3 reads ranges of a sample's size (110 KiB, an
// ImageNet photo's mean) through a real S3 server behind the fault proxy,
// with 0 and 30 ms added to every request, 8 readers as a decoder's
// workers: read ahead with hints of 4 batches of 32 (global: a random
// order across shards, so nothing to coalesce; block: in shard order,
// adjacent samples coalesced), or each read direct (no hints). No cache:
// every iteration reads from the store. It reports bytes/s and the GETs
// per range the proxy saw.
func BenchmarkFetcherS3(b *testing.B) {
	if testing.Short() {
		b.Skip("-short: starts a real S3 server")
	}
	for _, lat := range []time.Duration{0, 30 * time.Millisecond} {
		st, p, rs, _ := s3Shards(b, 8, 64, 110<<10, 512, lat)
		global := shuffled(rs, 1)
		for _, mode := range []struct {
			name  string
			order []source.Range
			hint  bool
		}{{"global/ahead", global, true}, {"block/ahead", rs, true}, {"global/direct", global, false}} {
			b.Run(fmt.Sprintf("latency=%s/%s", lat, mode.name), func(b *testing.B) {
				f := source.NewFetcher(st, source.WithBudget(source.NewBudget(64<<20)))
				defer f.Close()
				b.SetBytes(int64(len(rs)) * rs[0].Len)
				before := p.Stats().Requests
				for b.Loop() {
					if err := consume(context.Background(), f, mode.order, 8, 32, 4, mode.hint, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(p.Stats().Requests-before)/float64(b.N*len(rs)), "GETs/range")
				s := f.Stats()
				b.ReportMetric(float64(s.Direct)/float64(b.N*len(rs)), "direct/range")
			})
		}
	}
}
