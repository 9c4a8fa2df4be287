package pipeline

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// virtualCPU is a CPU clock the probe samples advance by what each is
// made to cost: with one worker, the thread's clock is this one, and the
// schedule sees exactly the costs the test chose (no wall clock, no load).
type virtualCPU struct{ ns atomic.Int64 }

func (v *virtualCPU) clock() time.Duration { return time.Duration(v.ns.Load()) }

// costRead is an onRead that charges the clock cost per sample and logs
// the queue's name.
func (v *virtualCPU) costRead(log *readLog, cost time.Duration) func(string, int) {
	return func(name string, i int) {
		v.ns.Add(int64(cost))
		log.add(name, i)
	}
}

// loadAndRun holds e's only worker, queues n samples of each named queue
// (costing costs[k] each on v), releases the worker and waits for all.
func loadAndRun(t *testing.T, e *Executor, v *virtualCPU, log *readLog, names []string, costs []time.Duration, n int) {
	t.Helper()
	g := holdWorker(t, e)
	var dones []<-chan error
	for k, name := range names {
		q := e.Queue(name)
		dones = append(dones, fillAsync(context.Background(), t, q, &probeDataset{name: name, n: n, onRead: v.costRead(log, costs[k])}, n))
		waitPending(t, q, n)
	}
	close(g.release)
	for _, c := range append([]<-chan error{g.done}, dones...) {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
}

// TestScheduleCPUShares: one worker, a queue whose samples cost 10 ms of
// CPU and one whose cost 1 ms, equal weights. With a CPU clock they share
// the worker's time, not its samples: at every point while both have
// work, their CPU differs by at most one sample of each (start-time fair
// queuing's bound), so the cheap queue gets ten samples for each of the
// other's. With weights 2:1 the CPU is 2:1.
func TestScheduleCPUShares(t *testing.T) {
	for _, wa := range []float64{1, 2} {
		t.Run(fmt.Sprintf("weight%v", wa), func(t *testing.T) {
			var v virtualCPU
			e := NewExecutor(1, WithCPUClock(v.clock))
			defer e.Close()
			e.Queue("a").SetWeight(wa)
			var log readLog
			costA, costB := 10*time.Millisecond, time.Millisecond
			const n = 300
			loadAndRun(t, e, &v, &log, []string{"a", "b"}, []time.Duration{costA, costB}, n)
			var a, b int
			for k, name := range log.names {
				if a == n || b == n {
					break
				}
				if name == "a" {
					a++
				} else {
					b++
				}
				cpuA, cpuB := time.Duration(a)*costA, time.Duration(b)*costB
				if lag := math.Abs(float64(cpuA) - wa*float64(cpuB)); lag > float64(costA)+wa*float64(costB) {
					t.Fatalf("after %d samples: a %d (%v), b %d (%v): want a's CPU %v times b's within a sample of each", k+1, a, cpuA, b, cpuB, wa)
				}
			}
			t.Logf("when one finished: a %d samples, b %d", a, b)
			if got := e.Queue("a").CPU(); got != n*costA {
				t.Errorf("a's CPU %v, want %v", got, n*costA)
			}
			if got := e.Queue("b").Charged(); got != n*1 {
				t.Errorf("b charged %v ms, want %d", got, n)
			}
		})
	}
}

// TestScheduleCPUCheapBesideExpensive: a cheap queue (1 ms a sample)
// beside eight expensive ones (25 ms): by CPU it keeps a ninth of the
// worker's time, 25 samples for each expensive one's; by samples (no
// CPU clock, what the executor did before) it got a ninth of the
// samples, a 25th of that.
func TestScheduleCPUCheapBesideExpensive(t *testing.T) {
	names := []string{"cheap"}
	costs := []time.Duration{time.Millisecond}
	for k := range 8 {
		names = append(names, fmt.Sprintf("x%d", k))
		costs = append(costs, 25*time.Millisecond)
	}
	const n = 200
	for _, clocked := range []bool{true, false} {
		t.Run(fmt.Sprintf("cpu=%v", clocked), func(t *testing.T) {
			var v virtualCPU
			var opts []Option
			if clocked {
				opts = append(opts, WithCPUClock(v.clock))
			}
			e := NewExecutor(1, opts...)
			defer e.Close()
			var log readLog
			loadAndRun(t, e, &v, &log, names, costs, n)
			// The samples each queue got before the cheap one was done.
			got := map[string]int{}
			for _, name := range log.names {
				got[name]++
				if got["cheap"] == n {
					break
				}
			}
			cheapCPU := time.Duration(got["cheap"]) * time.Millisecond
			for _, name := range names[1:] {
				x := time.Duration(got[name]) * 25 * time.Millisecond
				if clocked && (x > cheapCPU+26*time.Millisecond || x < cheapCPU-26*time.Millisecond) {
					t.Errorf("%s: %v of CPU beside the cheap queue's %v, want equal within a sample of each", name, x, cheapCPU)
				}
				if !clocked && got[name] < n-1 {
					t.Errorf("by samples: %s got %d samples beside the cheap one's %d, want equal", name, got[name], n)
				}
			}
			t.Logf("cpu clock %v: the expensive queues got %d samples each while the cheap one made %d", clocked, got["x0"], n)
		})
	}
}

// TestQueueSetCostCharged: the cost model's hint is what a queue's first
// sample is charged when taken (before any is measured), so that several
// workers do not all take an expensive job's samples at the price of a
// cheap one's; once the sample is measured, its own cost replaces it.
func TestQueueSetCostCharged(t *testing.T) {
	var v virtualCPU
	e := NewExecutor(1, WithCPUClock(v.clock))
	defer e.Close()
	q := e.Queue("x")
	q.SetCost(40 * time.Millisecond)
	started, release := make(chan struct{}), make(chan struct{})
	ds := &probeDataset{name: "x", n: 1, onRead: func(string, int) {
		close(started)
		<-release
		v.ns.Add(int64(3 * time.Millisecond))
	}}
	done := fillAsync(context.Background(), t, q, ds, 1)
	<-started
	e.mu.Lock()
	vt := q.vtime - e.vnow[0]
	e.mu.Unlock()
	if vt != 40 {
		t.Errorf("charged %v cpuUnits at take, want the hint's 40", vt)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	vt, est := q.vtime-e.vnow[0], q.est
	e.mu.Unlock()
	if vt != 3 || est != 3 || q.CPU() != 3*time.Millisecond {
		t.Errorf("after the sample: charged %v, estimate %v, CPU %v; want 3, 3, 3ms", vt, est, q.CPU())
	}
	// Without a CPU clock the hint means nothing: samples count alike.
	e2 := NewExecutor(1)
	defer e2.Close()
	q2 := e2.Queue("y")
	q2.SetCost(time.Second)
	e2.mu.Lock()
	est = q2.est
	e2.mu.Unlock()
	if est != 1 {
		t.Errorf("no CPU clock: estimate %v after SetCost, want 1", est)
	}
}

// TestEmptiedQueueKeepsOneSampleOfLag: a queue that empties and comes
// back starts at most one sample of the costliest active queue behind the
// executor's virtual time (lagBound), not at it. One worker, a cheap
// queue (1 ms a sample) idle while an expensive one (100 ms) made three
// samples alone: back, with both queued, the cheap one gets 200 samples
// (the 100 ms of the expensive one's sample in progress when it came,
// and one sample's worth of lag) before the expensive one's next, not
// 100 (no lag, as before) nor 300 (all it missed: banking).
func TestEmptiedQueueKeepsOneSampleOfLag(t *testing.T) {
	var v virtualCPU
	e := NewExecutor(1, WithCPUClock(v.clock))
	defer e.Close()
	var log readLog
	cheap, dear := e.Queue("cheap"), e.Queue("dear")
	var b Batch
	if err := cheap.Fill(context.Background(), &probeDataset{name: "cheap", n: 1, onRead: v.costRead(&log, time.Millisecond)}, smallTrain(t), 0, 0, seq(1), Drop, &b); err != nil {
		t.Fatal(err)
	}
	if err := dear.Fill(context.Background(), &probeDataset{name: "dear", n: 3, onRead: v.costRead(&log, 100*time.Millisecond)}, smallTrain(t), 0, 0, seq(3), Drop, &b); err != nil {
		t.Fatal(err)
	}
	g := holdWorker(t, e)
	dd := fillAsync(context.Background(), t, dear, &probeDataset{name: "dear", n: 50, onRead: v.costRead(&log, 100*time.Millisecond)}, 50)
	waitPending(t, dear, 50)
	dc := fillAsync(context.Background(), t, cheap, &probeDataset{name: "cheap", n: 400, onRead: v.costRead(&log, time.Millisecond)}, 400)
	waitPending(t, cheap, 400)
	close(g.release)
	for _, c := range []<-chan error{g.done, dd, dc} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, name := range log.names[4:] { // after the first 4 samples, made alone
		if name != "cheap" {
			break
		}
		n++
	}
	if n != 200 {
		t.Errorf("back from idle, the cheap queue got %d samples before the expensive one's next, want 200", n)
	}
}

// heavyGate is a probe dataset whose reads block until release is
// closed, each telling started first: samples that hold their worker as
// long as the test wants, with no clock.
func heavyGate(name string, n int) (*probeDataset, chan struct{}, chan struct{}) {
	started, release := make(chan struct{}, n), make(chan struct{})
	return &probeDataset{name: name, n: n, onRead: func(string, int) {
		started <- struct{}{}
		<-release
	}}, started, release
}

// TestHeavyLeavesAWorker: two workers, a light queue that has had work,
// and a heavy queue (its samples estimated at 500 ms) with four samples
// that hold their worker until released. The heavy queue takes one
// worker, not both: a light batch queued while its sample runs is made
// on the other, before any heavy sample ends (without the bound both
// workers would hold heavy samples and the light batch would wait for
// them: the hang guard fails it). Once released, every heavy sample is
// made.
func TestHeavyLeavesAWorker(t *testing.T) {
	var v virtualCPU
	e := NewExecutor(2, WithCPUClock(v.clock))
	defer e.Close()
	light, heavy := e.Queue("light"), e.Queue("heavy")
	light.SetCost(time.Millisecond)
	heavy.SetCost(500 * time.Millisecond)
	<-fillAsync(context.Background(), t, light, &probeDataset{name: "light", n: 2}, 2) // its samples fail (probes): the queue has had work
	ds, started, gate := heavyGate("heavy", 4)
	release := sync.OnceFunc(func() { close(gate) })
	defer release() // before e.Close: a failure leaves no worker held
	hd := fillAsync(context.Background(), t, heavy, ds, 4)
	<-started
	waitPending(t, heavy, 3)
	done := fillAsync(context.Background(), t, light, &probeDataset{name: "light", n: 3}, 3)
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatalf("the light batch waited %v behind the heavy samples", hangGuard)
	}
	select {
	case <-started:
		t.Fatal("a second heavy sample started beside the first while a light queue had work")
	default:
	}
	release()
	<-hd
	if got := heavy.Made(); got != 4 {
		t.Fatalf("heavy made %d samples, want 4", got)
	}
}

// TestHeavyAloneTakesEveryWorker: with no light queue about, a heavy
// queue's samples run on every worker (the pool stays work-conserving).
func TestHeavyAloneTakesEveryWorker(t *testing.T) {
	var v virtualCPU
	e := NewExecutor(2, WithCPUClock(v.clock))
	defer e.Close()
	heavy := e.Queue("heavy")
	heavy.SetCost(500 * time.Millisecond)
	ds, started, gate := heavyGate("heavy", 2)
	release := sync.OnceFunc(func() { close(gate) })
	defer release()
	hd := fillAsync(context.Background(), t, heavy, ds, 2)
	for range 2 {
		select {
		case <-started:
		case <-time.After(hangGuard):
			t.Fatalf("the heavy queue alone did not get both workers within %v", hangGuard)
		}
	}
	release()
	<-hd
}
