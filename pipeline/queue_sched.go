package pipeline

// The executor's scheduler (weighted fair queueing on the CPU each queue's
// samples cost, by class) and its workers' loop.

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/internal/cpuclock"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// enqueue appends r to its queue, which becomes active (at the executor's
// virtual time, if it was behind) if it was empty, and wakes as many
// sleeping workers as r has samples. e.mu is held.
func (e *Executor) enqueue(r *fillReq) {
	q := r.q
	e.seq++
	r.seq = e.seq
	if q.head == nil {
		q.head, q.tail = r, r
		q.vtime = max(q.vtime, e.vnow[q.class()]-e.lagBound(q.class()))
		q.waitSince = time.Now()
		q.lastWork = q.waitSince
		q.slot = len(e.active)
		e.active = append(e.active, q)
	} else {
		r.prev, q.tail.next, q.tail = q.tail, r, r
	}
	n := len(r.indices)
	q.pending += n
	k := min(n, e.sleeping)
	e.sleeping -= k
	for range k {
		e.work.Signal()
	}
}

// lagBound is how far behind its class's virtual time a queue that was
// empty may start again: one sample of the costliest queue active in the
// class (its estimate over its weight). A worker keeps a sample it took
// until it is made, so a queue whose work comes in bursts smaller than
// another's samples (a cheap recipe's batch beside a blur of 100 ms a
// sample) empties while that one runs, and would lose, every time, the
// share the sample took; it keeps that much, and no more: what it may
// take in one burst on its return is one such sample's worth. e.mu is
// held.
func (e *Executor) lagBound(class int) float64 {
	b := 0.0
	for _, q := range e.active {
		if q.class() == class {
			b = max(b, q.est/q.weight)
		}
	}
	return b
}

// unlink takes r, which has no samples left to start, off its queue's list;
// the queue leaves e.active when that empties it. e.mu is held.
func (e *Executor) unlink(r *fillReq) {
	q := r.q
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		q.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		q.tail = r.prev
	}
	r.prev, r.next = nil, nil
	if q.head == nil {
		last := e.active[len(e.active)-1]
		e.active[q.slot], last.slot = last, q.slot
		e.active[len(e.active)-1] = nil
		e.active = e.active[:len(e.active)-1]
		q.slot = -1
		q.lastWork = time.Now()
		q.waited += q.lastWork.Sub(q.waitSince)
		q.waitSince = time.Time{}
	}
}

// drop drops r's samples not yet started and abandons those running, for
// err, and signals its Fill if none is running. It does nothing once the
// batch is made (every sample started and none running). e.mu is held.
func (e *Executor) drop(r *fillReq, err error) {
	n := len(r.indices)
	if r.taken == n {
		if r.running > 0 {
			e.abandon(r, err)
		}
		return
	}
	r.q.pending -= n - r.taken
	r.taken = n
	r.dropped = err
	e.unlink(r)
	if r.running == 0 {
		r.done <- struct{}{}
	} else {
		e.abandon(r, err)
	}
}

// abandon tells r's running samples to stop, for err: their kernels see
// the flag within a row or a step, and r's Fill returns err (its buffer's
// bytes are no batch). The Fill is signalled by the last of them to
// finish, as ever. e.mu is held.
func (e *Executor) abandon(r *fillReq, err error) {
	if r.dropped == nil {
		r.dropped = err
	}
	if atomic.LoadInt32(r.stop) == 0 {
		atomic.StoreInt32(r.stop, 1)
		e.abandoned.Add(int64(r.running))
		r.wait.end() // a sample waiting for its scratch stops waiting
	}
}

// pick returns the active queue whose sample goes next, or nil when none
// has one (or only heavy queues have, at their heavyLimit), counting the
// sample contested when both classes have one waiting. e.mu is held.
func (e *Executor) pick() *Queue {
	var best *Queue
	var classes [2]bool // the classes of the active queues
	capped := -1        // heavyLimit, once needed
	for _, q := range e.active {
		if q.heavy() && e.sched == ScheduleWeighted {
			if capped < 0 {
				capped = e.heavyLimit()
			}
			if e.heavyRunning >= capped {
				continue
			}
		}
		classes[q.class()] = true
		switch {
		case best == nil:
			best = q
		case e.sched == ScheduleFIFO:
			if q.head.seq < best.head.seq {
				best = q
			}
		case q.background != best.background:
			if !q.background {
				best = q
			}
		case q.vtime < best.vtime || q.vtime == best.vtime && q.head.seq < best.head.seq:
			best = q
		}
	}
	if classes[0] && classes[1] {
		best.contested.Add(1)
	}
	return best
}

// charge is what a taken sample was charged: its estimated cost est (in
// cpuUnits) over the queue's weight w then.
type charge struct {
	est, w float64
	heavy  bool // it counts in heavyRunning
}

// take gives the next sample of q (active) to the calling worker: r, the
// sample's position in it and what q was charged for it. e.mu is held.
func (e *Executor) take(q *Queue) (*fillReq, int, charge) {
	r := q.head
	i := r.taken
	r.taken++
	r.running++
	q.running++
	q.pending--
	c := q.class()
	// Never back: a queue that came back with lag (lagBound) starts its
	// sample behind the clock, and a clock it pulled back would give the
	// next queue to come back that much more.
	e.vnow[c] = max(e.vnow[c], q.vtime)
	ch := charge{est: q.est, w: q.weight, heavy: q.heavy()}
	if ch.heavy {
		e.heavyRunning++
	}
	q.vtime += ch.est / ch.w
	if e.vnow[c] >= rebaseAt {
		e.rebase(c)
	}
	if r.taken == len(r.indices) {
		e.unlink(r)
	}
	return r, i, ch
}

// maxCharge bounds what one sample is charged, in cpuUnits (a minute of
// CPU): a clock that jumps cannot push a queue out of the schedule for
// good.
const maxCharge = float64(time.Minute / cpuUnit)

// settle charges q the sample's measured cost: the difference from the
// estimate it was charged at take, and the estimate moves toward it (the
// first measurement replaces the hint; then a mean over about 8
// samples). cost < 0: not measured (no CPUClock), the sample stays at its
// estimate. e.mu is held.
func (e *Executor) settle(q *Queue, ch charge, cost float64) {
	if cost < 0 {
		q.addCharged(ch.est)
		return
	}
	cost = min(cost, maxCharge)
	q.vtime += (cost - ch.est) / ch.w
	q.addCharged(cost)
	if q.measured == 0 {
		q.est = cost
	} else {
		q.est += float64((cost - q.est) / 8)
	}
	q.est = max(q.est, 1e-6) // a queue is never free
	q.measured++
}

// addCharged adds x to q's Charged. e.mu is held (no other writer).
func (q *Queue) addCharged(x float64) {
	q.charged.Store(math.Float64bits(q.Charged() + x))
}

// rebase shifts the virtual time of every queue of class c and the
// class's clock back by the clock: only differences and the max(vtime,
// vnow) of a queue that becomes active matter, and both stay as they were.
// Every queue that can be active is in e.queues (a queue leaves it when
// closed, and a closed queue has no samples left). e.mu is held.
func (e *Executor) rebase(c int) {
	shift := e.vnow[c]
	for _, q := range e.queues {
		if q.class() == c {
			q.vtime -= shift
		}
	}
	e.vnow[c] = 0
}

// finished records that the worker made r's sample, which took st (zero
// without a StageObserver) and cost cost cpuUnits (< 0: not measured): r's Fill is signalled when it was the last,
// and a closed queue's Close when it was its last running. e.mu is held.
func (e *Executor) finished(r *fillReq, st *batch.StageTimes, ch charge, cost float64) {
	q := r.q
	e.settle(q, ch, cost)
	if ch.heavy {
		e.heavyRunning--
		if e.sleeping > 0 && len(e.active) > 0 { // one held back may go now
			e.sleeping--
			e.work.Signal()
		}
	}
	r.times.Add(*st)
	r.running--
	q.running--
	q.made.Add(1)
	e.made.Add(1)
	if r.running == 0 && r.taken == len(r.indices) {
		r.done <- struct{}{}
	}
	if q.running == 0 && q.drained != nil {
		close(q.drained)
		q.drained = nil
	}
}

// workerYield is how often a busy worker gives up its P between samples
// (runtime.Gosched). A worker that always has work never blocks, so to the
// runtime it is one goroutine running without a break, and sysmon preempts
// any goroutine that runs 10 ms on one schedule tick. A worker is almost
// always inside a cgo call when that happens, where a preemption cannot
// land: sysmon takes the P away from the call instead (handoffp), wakes a
// thread for it, sets the goroutine to be preempted once it is back in Go
// (a locked worker, as the server's with a CPUClock, then hands its P to
// another thread and sleeps until one hands it back), and, having taken a
// P, polls every 20 us again for the next millisecond or more. A yield at
// least every few milliseconds starts a new schedule tick first, so none
// of that happens: a first epoch on small photos 3% (an unlocked worker,
// as stoker bench pipeline's) to 13% (a locked one) fewer CPU-seconds an
// image (BENCHMARKS.md). Under 10 ms with a sample's time to spare.
const workerYield = 5 * time.Millisecond

// run is a worker: it takes samples by the schedule until the Executor is
// closed and no queue has any left.
func (e *Executor) run(d *Decoder, w int) {
	defer e.wg.Done()
	defer d.Close()
	defer e.lockThread()()
	var pidx []int // a sample's partners (AppendPartners); the buffers its file and theirs are read into are the Decoder's (d.scratch.file, pfiles)
	yielded := time.Now()
	e.mu.Lock()
	for {
		q := e.pick()
		if q == nil {
			if e.closed {
				break
			}
			if d.scratch.trimmed != e.trimGen { // a queue closed since its last trim
				d.trimScratch(e.trimGen)
			}
			e.asleep[w] = d
			e.sleeping++
			slept := time.Now()
			e.work.Wait()
			e.asleep[w] = nil
			yielded = time.Now() // it blocked: a new schedule tick
			e.idle.Add(int64(yielded.Sub(slept)))
			continue
		}
		r, i, ch := e.take(q)
		e.cur[w], e.curAt[w] = r, i
		d.ops.Stop, d.ops.Progress = r.stop, r.progress
		e.mu.Unlock()
		if now := time.Now(); now.Sub(yielded) >= workerYield {
			yielded = now
			runtime.Gosched()
		}
		if r.progress != nil {
			r.progress.Start()
		}
		cost := -1.0
		var c0 time.Duration
		if e.cpu != nil {
			c0 = e.cpu()
		}
		idx := r.indices[i]
		var t0, t1 time.Time
		var st batch.StageTimes
		if e.stages != nil {
			t0 = time.Now()
		}
		var data []byte
		var err error
		var pdata [][]byte
		if r.fset != nil {
			// A field over its bound fails the sample before anything
			// of it is read (a 100 MB .json is never read).
			err = r.fset.Check(r.ds, int(idx))
		}
		k := det.Key{Seed: r.seed, Epoch: r.epoch, Index: uint64(idx)}
		if r.copies != nil {
			k.Copy = uint64(r.copies[i])
		}
		// A multi-image op's partners, read in the sample's lease
		// (decode_multi.go): none for most transforms.
		pidx = r.t.AppendPartners(pidx, k, r.ds.Len())
		if err == nil {
			// The buffers its files are read into, reserved before the
			// read where the dataset knows their sizes (scratch.go).
			err = d.reserveFiles(&r.wait, r.ds, int(idx), pidx)
		}
		if err == nil {
			data, err = r.ds.Read(int(idx), d.scratch.file)
			if err == nil {
				d.scratch.file = data
			}
		}
		if err == nil {
			pdata, err = readPartners(r.ds, pidx, &d.scratch.pfiles)
			if err != nil {
				pidx = nil
			}
		}
		if err == nil {
			// The scratch the memory budget counts, reserved from the
			// headers before any of it is made (scratch.go).
			err = d.reserveScratch(&r.wait, data, r.t, k, pdata, r.fset)
		}
		if err == nil && r.fset != nil {
			n := r.fset.Len()
			err = r.fset.Read(r.ds, int(idx), r.fields[i*n:(i+1)*n])
		}
		if e.stages != nil {
			t1 = time.Now()
		}
		d.post = 0
		if err == nil {
			// The sample's views, at its place in a buffer of
			// len(r.data)/r.size samples.
			at, slots := r.at(i), len(r.data)/r.size
			d.offs = d.offs[:0]
			for v := range r.layout.Views() {
				d.offs = append(d.offs, r.layout.Offset(slots, v, at))
			}
			s := Sample{Data: data, Index: int(idx), Fields: r.fset, Partners: pidx, PartnerFiles: pdata,
				skip: recordSkip(r.t, r.ds, int(idx)), admitNow: r.copies != nil}
			if r.fset.HasTargets() { // none: the job asks for no targets
				s.Targets, _ = r.ds.(transform.Targeted) // read once, for the draw (a RandomIoUCrop's) and the targets
			}
			err = d.decodeAt(s, r.t, k, r.data, d.offs)
			if err == nil && r.fset.HasTargets() {
				n := r.fset.Len()
				err = r.fset.TargetsInto(r.fields[i*n:(i+1)*n], func(b []byte) ([]byte, error) {
					return d.appendTargets(b, r.t, r.fset)
				})
			}
		}
		err = d.settleScratch(err)
		if e.stages != nil {
			made := time.Since(t1)
			st = batch.StageTimes{Queue: t0.Sub(r.queued), Read: t1.Sub(t0), Decode: max(made-d.post, 0), Transform: min(d.post, made)}
			e.stages(st.Queue, st.Read, made)
		}
		r.errs[i] = err
		if err == nil && r.traces != nil {
			r.traces[i] = d.AppendTrace(r.traces[i][:0])
		}
		if e.cpu != nil {
			used := e.cpu() - c0
			q.cpu.Add(int64(used))
			e.cpuUsed.Add(int64(used))
			cost = max(float64(used), 0) / float64(cpuUnit)
		}
		e.mu.Lock()
		if atomic.LoadInt32(r.stop) != 0 {
			e.returned.Add(1) // an abandoned sample's worker is back
		}
		e.cur[w] = nil
		d.ops.Stop, d.ops.Progress = nil, nil
		if r.progress != nil {
			r.progress.Add()
		}
		e.finished(r, &st, ch, cost)
	}
	e.mu.Unlock()
}

// A CPUClock reads the CPU time the calling OS thread has used. An
// Executor given one (WithCPUClock) locks each worker to its own thread
// and reads it before and after every sample, so what a sample is
// charged is the CPU its read, decode and transform took on that thread
// (the C kernels run on the calling thread), whatever else the host runs.
type CPUClock func() time.Duration

// ThreadCPUClock is the OS's per-thread CPU clock
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID) on Linux and the other unixes;
// a monotonic wall clock elsewhere, which still charges a sample the time
// its worker spent on it): pipeline/internal/cpuclock's.
func ThreadCPUClock() time.Duration { return cpuclock.Thread() }

// WithCPUClock has an Executor's weighted schedule share the workers by
// the CPU time each queue's samples took, read with c on the worker's
// thread, rather than by samples: a queue's virtual time advances by the
// CPU its samples used over its weight (see ScheduleWeighted). Default
// nil: every sample counts alike (one cpuUnit), as it did before. The
// server gives ThreadCPUClock; tests give a virtual clock.
func WithCPUClock(c CPUClock) Option { return func(o *options) { o.cpu = c } }

// cpuUnit is the CPU time a queue's virtual time counts as 1 (a sample's
// worth without a CPUClock): a millisecond, about what a 224 px training
// sample costs, so that virtual times stay in the range the rebase and the
// weight bounds were chosen for.
const cpuUnit = time.Millisecond

// lockThread pins the calling worker to its OS thread when the Executor
// reads a per-thread clock: otherwise the goroutine could move between
// threads within a sample and the clock would read another thread's time.
// The worker unpins with the func returned as it exits: a goroutine that
// exits pinned takes its thread down with it, and with the thread any
// child process started from it with a parent-death signal (the tests'
// object stores were killed that way when a server closed).
func (e *Executor) lockThread() (unlock func()) {
	if e.cpu == nil {
		return func() {}
	}
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// recordSkip is the views of t sample i of ds does not get: of a view
// group for the images of records of one image or of several alone
// (transform.RecordImages), the others' (every sample of a dataset that
// is not Grouped is a record of one image); nil where it gets them all.
func recordSkip(t *transform.Transform, ds dataset.Dataset, i int) []bool {
	one := t.SkipViews(false)
	if one == nil && t.SkipViews(true) == nil {
		return nil
	}
	if g, ok := ds.(dataset.Grouped); ok {
		if _, n := g.Record(g.RecordOf(i)); n > 1 {
			return t.SkipViews(true)
		}
	}
	return one
}
