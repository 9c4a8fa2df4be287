package source

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestCoalesce(t *testing.T) {
	a := Object{Key: "a", Size: 1 << 20}
	b := Object{Key: "b", Size: 1 << 20}
	r := func(o Object, off, n int64) Range { return Range{Obj: o, Off: off, Len: n} }
	type want struct {
		key      string
		off, end int64
		members  []int
	}
	for _, tc := range []struct {
		name           string
		rs             []Range
		maxGap, maxReq int64
		want           []want
	}{
		{"adjacent", []Range{r(a, 0, 100), r(a, 100, 50), r(a, 150, 10)}, 0, 1 << 20,
			[]want{{"a", 0, 160, []int{0, 1, 2}}}},
		{"gap within", []Range{r(a, 0, 100), r(a, 164, 100)}, 64, 1 << 20,
			[]want{{"a", 0, 264, []int{0, 1}}}},
		{"gap beyond", []Range{r(a, 0, 100), r(a, 165, 100)}, 64, 1 << 20,
			[]want{{"a", 0, 100, []int{0}}, {"a", 165, 265, []int{1}}}},
		{"hint order kept across objects", []Range{r(b, 0, 10), r(a, 10, 10), r(b, 10, 10), r(a, 0, 10)}, 0, 1 << 20,
			[]want{{"b", 0, 20, []int{0, 2}}, {"a", 0, 20, []int{3, 1}}}},
		{"unsorted hint of one object", []Range{r(a, 200, 100), r(a, 0, 100), r(a, 100, 100)}, 0, 1 << 20,
			[]want{{"a", 0, 300, []int{1, 2, 0}}}},
		{"max request", []Range{r(a, 0, 100), r(a, 100, 100), r(a, 200, 100), r(a, 300, 100)}, 0, 250,
			[]want{{"a", 0, 200, []int{0, 1}}, {"a", 200, 400, []int{2, 3}}}},
		{"another version is another object", []Range{r(a, 0, 10), r(Object{Key: "a", Version: "2", Size: a.Size}, 10, 10)}, 0, 1 << 20,
			[]want{{"a", 0, 10, []int{0}}, {"a", 10, 20, []int{1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []want
			for _, s := range coalesce(tc.rs, tc.maxGap, tc.maxReq) {
				got = append(got, want{s.obj.Key, s.off, s.end, s.members})
			}
			if !slices.EqualFunc(got, tc.want, func(x, y want) bool {
				return x.key == y.key && x.off == y.off && x.end == y.end && slices.Equal(x.members, y.members)
			}) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestFetcherCoalescesAndSplits: hinted ranges of a shard with small gaps
// between them are read in few requests, and each Read gets its own bytes
// from them, none read again.
func TestFetcherCoalescesAndSplits(t *testing.T) {
	st, rs, contents := testShards(t, 2, 50, 1000, 24)
	synctest.Test(t, func(t *testing.T) {
		f := NewFetcher(st, WithCoalesce(64, 10_240))
		defer f.Close()
		f.Prefetch(rs)
		synctest.Wait()
		// 50 ranges of 1000 bytes, 24 apart: 10 fit in 10,240 bytes.
		if got := st.getCount(); got != 10 {
			t.Errorf("%d requests for 100 ranges, want 10", got)
		}
		var buf []byte
		for _, r := range rs {
			out, err := f.Read(context.Background(), r, buf)
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, contents, r, out)
			buf = out
		}
		if got := st.getCount(); got != 10 {
			t.Errorf("%d requests after the reads, want 10", got)
		}
		s := f.Stats()
		if s.Ready != 100 || s.Direct != 0 || s.Held != 0 {
			t.Errorf("stats %+v: want 100 ready, none direct, nothing held", s)
		}
	})
}

// TestFetcherBounds: read-ahead never holds more than its budget nor has
// more requests in flight than its bound, and consuming bytes lets it go
// on, so that a reader in hint order finds every range read ahead.
func TestFetcherBounds(t *testing.T) {
	st, rs, contents := testShards(t, 1, 100, 1000, 4096) // gaps too wide to coalesce
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		st.setGate(gate)
		budget := NewBudget(10_000)
		f := NewFetcher(st, WithBudget(budget), WithMaxInFlight(4), WithCoalesce(0, 1000))
		defer f.Close()
		f.Prefetch(rs)
		synctest.Wait()
		if got := st.getCount(); got != 4 {
			t.Errorf("%d requests in flight, want 4 (the bound)", got)
		}
		close(gate)
		synctest.Wait()
		if got, held := st.getCount(), budget.Used(); got != 10 || held != 10_000 {
			t.Errorf("%d requests, %d bytes held with nothing read; want 10, 10000 (the budget)", got, held)
		}
		if s := f.Stats(); s.Hinted != 90 {
			t.Errorf("%d hints waiting, want 90", s.Hinted)
		}
		for _, r := range rs {
			out, err := f.Read(context.Background(), r, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkBytes(t, contents, r, out)
			synctest.Wait() // the loop starts the next request
			if held := budget.Used(); held > 10_000 {
				t.Fatalf("%d bytes held, over the budget", held)
			}
		}
		if s := f.Stats(); s.Ready != 100 || s.Direct != 0 || st.getCount() != 100 || s.Held != 0 || budget.Used() != 0 {
			t.Errorf("stats %+v, %d requests, %d held: want 100 ready, 100 requests, nothing held", s, st.getCount(), budget.Used())
		}
		if st.maxRun > 4 {
			t.Errorf("%d requests at once, over the bound of 4", st.maxRun)
		}
	})
}

// TestFetcherReleasesUnread: bytes read ahead and never read, and hints
// never started, are dropped after the unused age: a hint that does not
// materialise does not pin memory.
func TestFetcherReleasesUnread(t *testing.T) {
	st, rs, _ := testShards(t, 1, 20, 1000, 4096)
	synctest.Test(t, func(t *testing.T) {
		budget := NewBudget(5000)
		f := NewFetcher(st, WithBudget(budget), WithCoalesce(0, 1000), WithUnusedAfter(time.Minute))
		defer f.Close()
		f.Prefetch(rs)
		synctest.Wait()
		if held, s := budget.Used(), f.Stats(); held != 5000 || s.Hinted != 15 {
			t.Fatalf("%d bytes held, %d hints waiting; want 5000, 15", held, s.Hinted)
		}
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if held := budget.Used(); held != 5000 {
			t.Fatalf("%d bytes held before the unused age, want 5000", held)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		s := f.Stats()
		if held := budget.Used(); held != 0 || s.Held != 0 || s.Hinted != 0 || s.Expired != 20 {
			t.Errorf("after the unused age: %d bytes held, stats %+v; want none held or waiting, 20 expired", held, s)
		}
		if got := st.getCount(); got != 5 {
			t.Errorf("%d requests, want 5 (the hints that waited expired with the bytes)", got)
		}
		// A range dropped is read directly, and correctly.
		if _, err := f.Read(context.Background(), rs[0], nil); err != nil {
			t.Fatal(err)
		}
		if s := f.Stats(); s.Direct != 1 {
			t.Errorf("stats %+v: want the read direct", s)
		}
	})
}

// TestFetcherWaitsForInFlight: a Read of a range whose read-ahead is in
// flight waits for it instead of asking again.
func TestFetcherWaitsForInFlight(t *testing.T) {
	st, rs, contents := testShards(t, 1, 4, 1000, 0)
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		st.setGate(gate)
		f := NewFetcher(st)
		defer f.Close()
		f.Prefetch(rs)
		synctest.Wait()
		var wg sync.WaitGroup
		for _, r := range rs {
			wg.Go(func() {
				out, err := f.Read(context.Background(), r, nil)
				if err != nil {
					t.Error(err)
					return
				}
				checkBytes(t, contents, r, out)
			})
		}
		synctest.Wait()
		if s := f.Stats(); s.Waited != 0 || s.Ready != 0 {
			t.Fatalf("stats %+v: reads done before the request was", s)
		}
		close(gate)
		wg.Wait()
		if s, n := f.Stats(), st.getCount(); s.Waited != 4 || n != 1 || s.Held != 0 {
			t.Errorf("stats %+v, %d requests: want 4 waited on 1 request, nothing held", s, n)
		}
	})
}

// TestFetcherReadCanceled: a Read waiting for a read-ahead returns when
// its context ends, and the bytes are still released.
func TestFetcherReadCanceled(t *testing.T) {
	st, rs, _ := testShards(t, 1, 1, 1000, 0)
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		st.setGate(gate)
		f := NewFetcher(st)
		defer f.Close()
		f.Prefetch(rs)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, err := f.Read(ctx, rs[0], nil)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Read: %v, want context.Canceled", err)
		}
		close(gate)
		synctest.Wait()
		if s := f.Stats(); s.Held != 0 {
			t.Errorf("stats %+v: bytes of a read nobody waits for are held", s)
		}
	})
}

// TestFetcherFailedReadAhead: a read-ahead that fails is not kept; the
// Read that wanted it reads directly (succeeding when the store recovered)
// and returns the direct read's error when it does not.
func TestFetcherFailedReadAhead(t *testing.T) {
	st, rs, contents := testShards(t, 1, 2, 1000, 0)
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		failing := 1 // the next n calls fail
		st.fail = func(string, int64, int) error {
			mu.Lock()
			defer mu.Unlock()
			if failing > 0 {
				failing--
				return errInjected
			}
			return nil
		}
		cache, _ := NewCache(WithMemory(1 << 20))
		f := NewFetcher(st, WithCache(cache))
		defer f.Close()
		f.Prefetch(rs) // one request for both: it fails
		synctest.Wait()
		if cache.Contains(f.name, rs[0]) {
			t.Fatal("a failed read-ahead was cached")
		}
		out, err := f.Read(context.Background(), rs[0], nil)
		if err != nil {
			t.Fatalf("Read after a failed read-ahead: %v (want a direct read)", err)
		}
		checkBytes(t, contents, rs[0], out)
		mu.Lock()
		failing = 1
		mu.Unlock()
		if _, err := f.Read(context.Background(), rs[1], nil); !errors.Is(err, errInjected) {
			t.Errorf("Read failing directly too: %v, want its error", err)
		}
		if s := f.Stats(); s.Failed != 2 || s.Direct != 2 || s.Held != 0 {
			t.Errorf("stats %+v: want 2 failed, read again directly, nothing held", s)
		}
		if n := st.getCount(); n != 3 {
			t.Errorf("%d requests, want 3 (the read-ahead, and each range again)", n)
		}
	})
}

// TestFetcherConcurrent: many readers and hinters at once get the right
// bytes, and nothing stays held (run with -race).
func TestFetcherConcurrent(t *testing.T) {
	st, rs, contents := testShards(t, 4, 64, 512, 64)
	cache, _ := NewCache(WithMemory(40 << 10)) // about a third of the data
	budget := NewBudget(32 << 10)
	f := NewFetcher(st, WithCache(cache), WithBudget(budget), WithMaxInFlight(3), WithCoalesce(128, 4096))
	order := shuffled(rs, 3)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			var buf []byte
			for i := w * 32; i < (w+1)*32; i++ {
				if i%8 == 0 {
					f.Prefetch(order[i:min(i+16, len(order))])
				}
				out, err := f.Read(context.Background(), order[i], buf)
				if err != nil {
					t.Error(err)
					return
				}
				checkBytes(t, contents, order[i], out)
				buf = out
			}
		})
	}
	wg.Wait()
	f.Close()
	if s := f.Stats(); s.Held != 0 || budget.Used() != 0 {
		t.Errorf("after Close: stats %+v, budget %d held", s, budget.Used())
	}
}

// TestFetcherCloseStopsGoroutines: Close ends every goroutine of the
// Fetcher, requests in flight included, and gives their bytes back.
func TestFetcherCloseStopsGoroutines(t *testing.T) {
	st, rs, _ := testShards(t, 1, 50, 1000, 4096)
	before := runtime.NumGoroutine()
	gate := make(chan struct{}) // never opened: requests hang until canceled
	st.setGate(gate)
	budget := NewBudget(1 << 20)
	f := NewFetcher(st, WithBudget(budget), WithMaxInFlight(8), WithCoalesce(0, 1000))
	f.Prefetch(rs)
	for st.getCount() < 8 {
		runtime.Gosched() // the requests are starting
	}
	f.Close()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
	if budget.Used() != 0 {
		t.Errorf("%d bytes held after Close", budget.Used())
	}
	f.Prefetch(rs) // after Close: nothing starts
	if runtime.NumGoroutine() > before || st.getCount() != 8 {
		t.Errorf("Prefetch after Close started requests")
	}
}

// TestFetcherSharedBudget: two Fetchers share one budget; bytes one gives
// back let the other's waiting read-ahead start.
func TestFetcherSharedBudget(t *testing.T) {
	st1, rs1, _ := testShards(t, 1, 4, 1000, 4096)
	st2, rs2, _ := testShards(t, 1, 4, 1000, 4096)
	synctest.Test(t, func(t *testing.T) {
		budget := NewBudget(4000)
		f1 := NewFetcher(st1, WithBudget(budget), WithCoalesce(0, 1000))
		defer f1.Close()
		f2 := NewFetcher(st2, WithBudget(budget), WithCoalesce(0, 1000))
		defer f2.Close()
		f1.Prefetch(rs1)
		synctest.Wait()
		f2.Prefetch(rs2)
		synctest.Wait()
		if n1, n2 := st1.getCount(), st2.getCount(); n1 != 4 || n2 != 0 {
			t.Fatalf("%d and %d requests, want 4 and 0 (the budget is the first's)", n1, n2)
		}
		for _, r := range rs1[:2] {
			if _, err := f1.Read(context.Background(), r, nil); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if n2 := st2.getCount(); n2 != 2 {
			t.Errorf("%d requests of the second after 2000 bytes were given back, want 2", n2)
		}
	})
}

// Read of a range outside its object is refused, not a panic.
func TestFetcherBadRange(t *testing.T) {
	st, rs, _ := testShards(t, 1, 1, 100, 0)
	f := NewFetcher(st)
	defer f.Close()
	for _, r := range []Range{{Obj: rs[0].Obj, Off: -1, Len: 10}, {Obj: rs[0].Obj, Off: 0, Len: -1}, {Obj: rs[0].Obj, Off: 50, Len: 51}} {
		if _, err := f.Read(context.Background(), r, nil); err == nil {
			t.Errorf("Read %+v: no error", r)
		}
	}
	f.Prefetch([]Range{{Obj: rs[0].Obj, Off: 50, Len: 51}})
	if s := f.Stats(); s.Hinted != 0 {
		t.Errorf("a bad range was hinted: %+v", s)
	}
}
