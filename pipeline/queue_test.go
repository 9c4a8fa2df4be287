//go:build cgo

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestScheduleWeightedOrder: one worker, two loaded queues of weights 3 and
// 1. While both have samples, every prefix of the order the worker takes
// them in is within about one sample of 3:1 (stride scheduling's bound).
func TestScheduleWeightedOrder(t *testing.T) {
	e := NewExecutor(1)
	defer e.Close()
	var log readLog
	qa, qb := e.Queue("a"), e.Queue("b")
	qa.SetWeight(3)
	g := holdWorker(t, e)
	const n = 400
	da := fillAsync(context.Background(), t, qa, &probeDataset{name: "a", n: n, onRead: log.add}, n)
	waitPending(t, qa, n)
	db := fillAsync(context.Background(), t, qb, &probeDataset{name: "b", n: n, onRead: log.add}, n)
	waitPending(t, qb, n)
	close(g.release)
	for _, c := range []<-chan error{g.done, da, db} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if len(log.names) != 2*n {
		t.Fatalf("%d reads, want %d", len(log.names), 2*n)
	}
	var a, b int
	for k, name := range log.names {
		if a == n { // a is done: b alone from here
			break
		}
		if name == "a" {
			a++
		} else {
			b++
		}
		if lag := float64(a) - 0.75*float64(k+1); math.Abs(lag) > 1.25 {
			t.Fatalf("after %d samples: a %d, b %d; want 3:1 within a sample", k+1, a, b)
		}
	}
	t.Logf("when a finished: a %d, b %d", a, b)
}

// TestScheduleWeightedShares: three workers, two saturated queues of weights
// 3 and 1 (several Fills each, always queued): the samples made are ~3:1.
func TestScheduleWeightedShares(t *testing.T) {
	e := NewExecutor(3)
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := smallTrain(t)
	ds := map[string]*probeDataset{}
	var wg sync.WaitGroup
	for name, w := range map[string]float64{"a": 3, "b": 1} {
		q := e.Queue(name)
		q.SetWeight(w)
		d := &probeDataset{name: name, n: 16, onRead: sleepRead(200 * time.Microsecond)}
		ds[name] = d
		for range 3 {
			wg.Go(func() {
				var b Batch
				for ctx.Err() == nil {
					if err := q.Fill(ctx, d, tr, 0, 0, seq(16), Drop, &b); err != nil && ctx.Err() == nil {
						t.Error(err)
					}
				}
			})
		}
	}
	// Count samples, not seconds: the ratio is the scheduler's, however
	// slow the machine.
	waitFor(t, hangGuard, "2,000 samples made", func() bool { return ds["a"].reads.Load()+ds["b"].reads.Load() >= 2000 })
	a, b := ds["a"].reads.Load(), ds["b"].reads.Load()
	cancel()
	wg.Wait()
	ratio := float64(a) / float64(b)
	t.Logf("a %d, b %d: %.2f:1", a, b, ratio)
	if ratio < 2.5 || ratio > 3.5 {
		t.Errorf("a %d, b %d samples (%.2f:1), want ~3:1", a, b, ratio)
	}
}

// TestScheduleFIFO: under ScheduleFIFO Fills are served in arrival order
// across queues, a whole batch before the next, whatever the weights.
func TestScheduleFIFO(t *testing.T) {
	e := NewExecutor(1, WithSchedule(ScheduleFIFO))
	defer e.Close()
	if e.Schedule() != ScheduleFIFO {
		t.Fatalf("schedule %v", e.Schedule())
	}
	var log readLog
	qa, qb, qc := e.Queue("a"), e.Queue("b"), e.Queue("c")
	qb.SetWeight(100)
	g := holdWorker(t, e)
	var dones []<-chan error
	order := []struct {
		q    *Queue
		name string
		n    int
	}{{qa, "a1", 5}, {qb, "b1", 3}, {qa, "a2", 4}, {qc, "c1", 2}, {qb, "b2", 3}}
	var want []string
	for _, f := range order {
		before := f.q.Pending()
		dones = append(dones, fillAsync(context.Background(), t, f.q, &probeDataset{name: f.name, n: f.n, onRead: log.add}, f.n))
		waitPending(t, f.q, before+f.n)
		for range f.n {
			want = append(want, f.name)
		}
	}
	close(g.release)
	<-g.done
	for _, d := range dones {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if fmt.Sprint(log.names) != fmt.Sprint(want) {
		t.Errorf("order %v, want %v", log.names, want)
	}
}

// TestQueueCloseDrops: closing a queue with 10,000 slow samples queued drops
// them at once: its Fill returns ErrClosed with at most the samples already
// running read after Close, none of its samples runs afterwards while the
// other queue keeps going.
func TestQueueCloseDrops(t *testing.T) {
	e := NewExecutor(2)
	defer e.Close()
	qa, qb := e.Queue("a"), e.Queue("b")
	da := &probeDataset{name: "a", n: 10000, onRead: sleepRead(time.Millisecond)}
	db := &probeDataset{name: "b", n: 8, onRead: sleepRead(time.Millisecond)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fa := fillAsync(context.Background(), t, qa, da, 10000)
	var bFills atomic.Int64
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		var b Batch
		for ctx.Err() == nil {
			if err := qb.Fill(ctx, db, smallTrain(t), 0, 0, seq(8), Drop, &b); err != nil {
				if ctx.Err() == nil {
					t.Error(err)
				}
				return
			}
			bFills.Add(1)
		}
	}()
	waitFor(t, hangGuard, "queue a at work", func() bool { return da.reads.Load() > 0 && bFills.Load() > 0 })
	qa.Close()
	readsAtClose := da.reads.Load()
	var err error
	select {
	case err = <-fa:
	case <-time.After(hangGuard):
		t.Fatal("Fill of the closed queue did not return")
	}
	t.Logf("%d of 10000 samples read at Close, %d when its Fill returned", readsAtClose, da.reads.Load())
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Fill of the closed queue: %v, want ErrClosed", err)
	}
	// Only samples already running when Close came may finish: at most one
	// per worker.
	if r := da.reads.Load(); r > readsAtClose+int64(e.Workers()) {
		t.Errorf("%d samples of the closed queue read after Close, want at most %d (the workers')", r-readsAtClose, e.Workers())
	}
	// Queue b makes three more batches; none of a's samples runs meanwhile.
	readsAfter, fillsAfter := da.reads.Load(), bFills.Load()
	waitFor(t, hangGuard, "queue b going on", func() bool { return bFills.Load() >= fillsAfter+3 })
	if r := da.reads.Load(); r != readsAfter {
		t.Errorf("closed queue's samples still read: %d more while b made 3 batches", r-readsAfter)
	}
	if qa.Pending() != 0 {
		t.Errorf("closed queue has %d pending", qa.Pending())
	}
	var b Batch
	if err := qa.Fill(context.Background(), db, smallTrain(t), 0, 0, seq(2), Drop, &b); !errors.Is(err, ErrClosed) {
		t.Errorf("Fill after Close: %v, want ErrClosed", err)
	}
	qa.Close() // twice is fine
	// The name makes a new queue once the old one is closed.
	if q := e.Queue("a"); q == qa {
		t.Error("Queue(name) returned the closed queue")
	} else if err := q.Fill(context.Background(), db, smallTrain(t), 0, 0, seq(2), Drop, &b); err != nil || len(b.Errors) != 2 {
		t.Errorf("Fill on the new queue: %v, %d errors", err, len(b.Errors))
	}
	cancel()
	<-bDone
}

// TestFillCancelDrops: a Fill whose ctx ends drops its queued samples at
// once and returns context.Canceled, at most the samples already running
// read after the cancel; none of them is read afterwards and the executor
// goes on working.
func TestFillCancelDrops(t *testing.T) {
	e := NewExecutor(2)
	defer e.Close()
	ds := &probeDataset{name: "slow", n: 10000, onRead: sleepRead(time.Millisecond)}
	ctx, cancel := context.WithCancel(context.Background())
	done := fillAsync(ctx, t, e.Queue("a"), ds, 10000)
	waitFor(t, hangGuard, "the Fill at work", func() bool { return ds.reads.Load() > 0 })
	cancel()
	atCancel := ds.reads.Load()
	err := <-done
	reads := ds.reads.Load()
	t.Logf("%d of 10000 samples read at the cancel, %d when Fill returned", atCancel, reads)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Fill: %v, want context.Canceled", err)
	}
	if reads > atCancel+int64(e.Workers()) {
		t.Errorf("%d samples read after the cancel, want at most %d (the workers')", reads-atCancel, e.Workers())
	}
	if p := e.Queue("a").Pending(); p != 0 {
		t.Errorf("%d samples pending after cancel", p)
	}
	// The executor goes on: another Fill runs to its end, and none of the
	// cancelled samples was read meanwhile.
	other := &probeDataset{name: "other", n: 4}
	var b Batch
	if err := e.Fill(context.Background(), other, smallTrain(t), 0, 0, seq(4), Drop, &b); err != nil || len(b.Errors) != 4 {
		t.Errorf("after cancel: %v, %d errors", err, len(b.Errors))
	}
	if r := ds.reads.Load(); r != reads {
		t.Errorf("%d samples read after the cancelled Fill returned", r-reads)
	}
}

// TestWorkConserving: a queue alone gets every worker, however small its
// weight next to an idle queue's: its four samples each wait until all
// four are being read at once, on four workers.
func TestWorkConserving(t *testing.T) {
	for _, s := range []Schedule{ScheduleWeighted, ScheduleFIFO} {
		t.Run(s.String(), func(t *testing.T) {
			const workers = 4
			e := NewExecutor(workers, WithSchedule(s))
			defer e.Close()
			e.Queue("idle").SetWeight(1e6)
			q := e.Queue("small")
			q.SetWeight(1e-6)
			var mu sync.Mutex
			cond := sync.NewCond(&mu)
			reading, timedOut := 0, false
			ds := &probeDataset{name: "barrier", n: workers, onRead: func(string, int) {
				mu.Lock()
				defer mu.Unlock()
				reading++
				cond.Broadcast()
				// A scheduler that kept workers for the idle queue
				// would leave this barrier waiting for ever: the
				// guard makes that a failure.
				deadline := time.AfterFunc(hangGuard, func() {
					mu.Lock()
					timedOut = true
					cond.Broadcast()
					mu.Unlock()
				})
				defer deadline.Stop()
				for reading < workers && !timedOut {
					cond.Wait()
				}
			}}
			var b Batch
			if err := q.Fill(context.Background(), ds, smallTrain(t), 0, 0, seq(workers), Drop, &b); err != nil {
				t.Fatal(err)
			}
			if timedOut {
				t.Errorf("only %d of %d workers took the lone queue's samples", reading, workers)
			}
		})
	}
}

// TestQueueIdentity: Queue(name) is the same queue until it is closed;
// weights are clamped; a closed Executor gives closed queues.
func TestQueueIdentity(t *testing.T) {
	e := NewExecutor(1)
	a := e.Queue("job")
	if e.Queue("job") != a || e.Queue("other") == a || a.Name() != "job" {
		t.Error("Queue(name) is not one queue per name")
	}
	if a.Weight() != 1 {
		t.Errorf("default weight %v", a.Weight())
	}
	for _, c := range []struct{ set, want float64 }{{0, minWeight}, {-3, minWeight}, {math.Inf(1), maxWeight}, {math.NaN(), maxWeight}, {2.5, 2.5}} {
		a.SetWeight(c.set)
		if got := a.Weight(); got != c.want {
			t.Errorf("SetWeight(%v): weight %v, want %v", c.set, got, c.want)
		}
	}
	e.Close()
	var b Batch
	ds := &probeDataset{name: "x", n: 1}
	for _, q := range []*Queue{a, e.Queue("job"), e.Queue("new")} {
		if err := q.Fill(context.Background(), ds, smallTrain(t), 0, 0, seq(1), Drop, &b); !errors.Is(err, ErrClosed) {
			t.Errorf("queue %q after the Executor's Close: %v, want ErrClosed", q.Name(), err)
		}
	}
}

// TestParseSchedule: the --schedule values.
func TestParseSchedule(t *testing.T) {
	for in, want := range map[string]Schedule{"stall": ScheduleWeighted, "weighted": ScheduleWeighted, "fifo": ScheduleFIFO} {
		if got, err := ParseSchedule(in); err != nil || got != want {
			t.Errorf("ParseSchedule(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseSchedule("lifo"); !errors.Is(err, errs.Unsupported) {
		t.Errorf("ParseSchedule(lifo): %v", err)
	}
}

// TestExecutorCloseDrainsNoLeak: the Executor's Close lets the samples
// already queued finish (their Fills succeed), then every worker is gone.
func TestExecutorCloseDrainsNoLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	e := NewExecutor(4)
	ds := &probeDataset{name: "d", n: 64, onRead: sleepRead(100 * time.Microsecond)}
	var dones []<-chan error
	for i := range 6 {
		q := e.Queue(fmt.Sprint("job", i%3))
		dones = append(dones, fillAsync(context.Background(), t, q, ds, 64))
	}
	for i := range 3 {
		waitPendingAtLeast(t, e.Queue(fmt.Sprint("job", i)), 1)
	}
	e.Queue("job0").Close()
	e.Close()
	for _, d := range dones {
		if err := <-d; err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Fill: %v", err)
		}
	}
	deadline := time.Now().Add(hangGuard)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestVirtualTimeRebase: a long run of a tiny-weight queue pushes virtual
// time past rebaseAt many times over; the weights' ratio still holds after.
func TestVirtualTimeRebase(t *testing.T) {
	e := NewExecutor(1)
	defer e.Close()
	tiny := e.Queue("tiny")
	tiny.SetWeight(minWeight) // 1e6 of virtual time per sample
	ds := &probeDataset{name: "t", n: 100}
	var b Batch
	if err := tiny.Fill(context.Background(), ds, smallTrain(t), 0, 0, seq(100), Drop, &b); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	vnow := e.vnow[0]
	e.mu.Unlock()
	if vnow >= rebaseAt {
		t.Errorf("virtual time %v, want < %v after rebasing", vnow, float64(rebaseAt))
	}
	var log readLog
	qa, qb := e.Queue("a"), e.Queue("b")
	qa.SetWeight(maxWeight)
	qb.SetWeight(maxWeight / 2)
	g := holdWorker(t, e)
	da := fillAsync(context.Background(), t, qa, &probeDataset{name: "a", n: 300, onRead: log.add}, 300)
	waitPending(t, qa, 300)
	db := fillAsync(context.Background(), t, qb, &probeDataset{name: "b", n: 300, onRead: log.add}, 300)
	waitPending(t, qb, 300)
	close(g.release)
	for _, c := range []<-chan error{g.done, da, db} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	a := 0
	for _, name := range log.names[:300] {
		if name == "a" {
			a++
		}
	}
	if a < 199 || a > 201 {
		t.Errorf("weights 2:1: a got %d of the first 300 samples, want 200", a)
	}
}

// TestIdleQueueBanksNoCredit: a queue that was idle while another ran alone
// starts again at the executor's virtual time, not where it left off: the
// two then alternate, instead of the idle one taking the worker for as
// long as the other ran alone.
func TestIdleQueueBanksNoCredit(t *testing.T) {
	e := NewExecutor(1)
	defer e.Close()
	qa, qb := e.Queue("a"), e.Queue("b")
	var b Batch
	if err := qa.Fill(context.Background(), &probeDataset{name: "a", n: 200}, smallTrain(t), 0, 0, seq(200), Drop, &b); err != nil {
		t.Fatal(err)
	}
	var log readLog
	g := holdWorker(t, e)
	da := fillAsync(context.Background(), t, qa, &probeDataset{name: "a", n: 100, onRead: log.add}, 100)
	waitPending(t, qa, 100)
	db := fillAsync(context.Background(), t, qb, &probeDataset{name: "b", n: 100, onRead: log.add}, 100)
	waitPending(t, qb, 100)
	close(g.release)
	for _, c := range []<-chan error{g.done, da, db} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	a := 0
	for _, name := range log.names[:20] {
		if name == "a" {
			a++
		}
	}
	if a < 9 || a > 11 {
		t.Errorf("a got %d of the first 20 samples after b was idle, want 10: %v", a, log.names[:20])
	}
}

func TestStageObserver(t *testing.T) {
	var mu sync.Mutex
	var n int
	var read, decode time.Duration
	e := NewExecutor(2, WithStageObserver(func(q, r, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		n++
		read += r
		decode += d
		if q < 0 || r < 0 || d < 0 {
			t.Errorf("negative stage time: queue %v read %v decode %v", q, r, d)
		}
	}))
	defer e.Close()
	ds := memDataset{goldenJPEGs()[:6]}
	tr, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpResize, Size: [2]int{16, 16}})
	if err != nil {
		t.Fatal(err)
	}
	var b Batch
	if err := e.Fill(context.Background(), ds, tr, 1, 0, []int64{0, 1, 2, 3, 4, 5}, PadFromBatch, &b); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 6 || decode <= 0 {
		t.Errorf("%d observations, decode %v: want 6, > 0", n, decode)
	}
}

// TestFillPrefetches: a Fill tells a Prefetcher dataset its batch's indices
// before any of them is read, and each batch's hint comes before its reads.
func TestFillPrefetches(t *testing.T) {
	e := NewExecutor(1)
	defer e.Close()
	g := holdWorker(t, e)
	ds := &prefetchDataset{}
	ds.n = 8
	ds.onRead = func(_ string, i int) {
		ds.mu.Lock()
		ds.events = append(ds.events, fmt.Sprint("read ", i))
		ds.mu.Unlock()
	}
	q := e.Queue("q")
	tr := smallTrain(t)
	done := make(chan error, 2)
	for i, idx := range [][]int64{{3, 1}, {5, 7}} {
		go func() {
			var b Batch
			done <- q.Fill(context.Background(), ds, tr, 0, 0, idx, Drop, &b)
		}()
		waitPending(t, q, 2*(i+1)) // queued in this order
	}
	close(g.release)
	<-g.done
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"hint [3 1]", "hint [5 7]", "read 3", "read 1", "read 5", "read 7"}
	if fmt.Sprint(ds.events) != fmt.Sprint(want) {
		t.Errorf("events %q, want %q", ds.events, want)
	}
}
