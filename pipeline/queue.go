package pipeline

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

// Schedule says how an Executor's workers choose the next sample among the
// queues that have one. Either way the pool is work-conserving: a worker
// never waits while any queue has a sample not yet started, whatever the
// queues' weights.
type Schedule int

const (
	// ScheduleWeighted (the default) shares the workers among the queues
	// that have samples waiting in proportion to their weights (SetWeight):
	// start-time fair queuing, as stride scheduling does it. Each queue has
	// a virtual time that advances by c/weight for each sample it is given,
	// c being what the sample costs: with a CPUClock (WithCPUClock) the CPU
	// time it took, in cpuUnits, so that the queues share the cores' time,
	// not samples (a job whose samples cost 100 times more gets a hundredth
	// of the samples at the same weight); without one, 1. A sample's cost
	// is known only once it is made: the queue is charged its estimate
	// (the moving mean of its samples' costs, at first the hint SetCost
	// gave) when a worker takes it, and the difference when it is done. A
	// worker takes the next sample of the queue with the smallest (ties:
	// the earliest queued Fill). A queue that was empty starts again at
	// max(its virtual time, the executor's less one sample of the costliest
	// queue active), the executor's being the start time of the sample
	// taken last, so a job that was idle does not bank credit and then
	// take the pool for a burst beyond that one sample's worth, which a
	// job whose batches are smaller than another's samples would otherwise
	// lose every time it empties while such a sample runs (lagBound). Over any stretch where two
	// queues both have work, their samples taken differ from the weights'
	// ratio by at most about one sample each. Within a queue, Fills are
	// served in arrival order. Queues are of two classes (SetBackground):
	// a background queue's sample is taken only when no foreground queue
	// has one waiting, and each class keeps its own virtual time.
	ScheduleWeighted Schedule = iota
	// ScheduleFIFO serves Fills in arrival order across all queues, the
	// whole of one Fill's batch before the next's, and ignores weights:
	// one shared FIFO, what the executor did before it had queues (kept to
	// compare against).
	ScheduleFIFO
)

// String is the schedule's name as ParseSchedule reads it.
func (s Schedule) String() string {
	switch s {
	case ScheduleWeighted:
		return "weighted"
	case ScheduleFIFO:
		return "fifo"
	}
	return fmt.Sprintf("Schedule(%d)", int(s))
}

// ParseSchedule reads a --schedule value: "stall" or "weighted" (weighted
// queues; "stall" is the server's policy of setting the weights from
// StallShares) or "fifo".
func ParseSchedule(s string) (Schedule, error) {
	switch s {
	case "stall", "weighted":
		return ScheduleWeighted, nil
	case "fifo":
		return ScheduleFIFO, nil
	}
	return 0, fmt.Errorf("%w: schedule %q (want stall or fifo)", ErrUnsupported, s)
}

// A StageObserver is told, for every sample an Executor makes, how long it
// waited in its queue (from its Fill until a worker took it), how long
// reading its file took and how long decoding and transforming it took. It
// is called from the workers, concurrently.
type StageObserver func(queued, read, decode time.Duration)

// WithStageObserver has an Executor report every sample's stage times to
// f. Default: none (and no clock reads).
func WithStageObserver(f StageObserver) Option { return func(o *options) { o.stages = f } }

// WithSchedule sets how an Executor's workers choose among its queues.
// Default ScheduleWeighted. Decoders ignore it.
func WithSchedule(s Schedule) Option { return func(o *options) { o.schedule = s } }

// The bounds SetWeight clamps a weight to: a weight of 0 or less would stop
// the virtual clock or run it backwards, and 1/w must stay well above the
// float64 resolution of virtual times up to rebaseAt. A queue of weight
// 1e-6 next to one of 1 gets one sample in a million while both have work:
// it runs, in effect, only when no one else wants the workers.
const (
	minWeight = 1e-6
	maxWeight = 1e6
)

// rebaseAt is the virtual time at which every queue's is shifted back by the
// executor's (rebase): below 2^20 a float64 resolves 2^-32, so the smallest
// step, 1/maxWeight, keeps 4000 ulps and the ratio of any two weights holds
// to better than 1e-3, however long the executor runs.
const rebaseAt = 1 << 20

// A Queue is one job's handle on an Executor: its Fills are queued apart
// from other jobs' and the Executor's Schedule shares the workers among the
// queues. Its methods are safe for concurrent use.
type Queue struct {
	e    *Executor
	name string
	made atomic.Uint64 // samples made, for the server's shares
	// cpu is the CPU time its samples took, in ns (with a CPUClock);
	// charged is what the schedule charged it, in cpuUnits.
	cpu     atomic.Int64
	charged atomic.Uint64 // math.Float64bits
	// contested counts the samples the queue was given while a queue of
	// the other class had one waiting.
	contested atomic.Uint64

	// The rest is guarded by e.mu.
	weight float64
	// vtime is the virtual start time of the queue's next sample.
	vtime float64
	// est is what a sample of the queue is charged when taken, in
	// cpuUnits: 1 without a CPUClock; with one, the hint (SetCost) until
	// samples are measured, then their moving mean. measured counts
	// those samples.
	est      float64
	measured uint64
	// head and tail are its Fills with samples not yet started, oldest
	// first.
	head, tail *fillReq
	// pending counts those samples.
	pending int
	// slot is the queue's index in e.active, -1 while it is not there.
	slot int
	// running counts its samples being made now.
	running int
	// background: the queue is given a sample only when no foreground
	// queue has one waiting (SetBackground); class indexes e.vnow.
	background bool
	// waited is how long the queue had samples waiting to be taken, until
	// waitSince, when it last became active (zero while it is not).
	waited    time.Duration
	waitSince time.Time
	closed    bool
	// drained is closed when a closed queue's last running sample is done
	// (made by Close, while it waits for one).
	drained chan struct{}
}

// Queue returns the job's queue named name: the open queue of that name if
// there is one (the same *Queue for every caller until it is closed),
// otherwise a new one of weight 1. The default queue, which Executor.Fill
// uses, is Queue(""). A queue lives until Close: a job must close its
// queue when it ends. On a closed Executor it returns a closed queue.
func (e *Executor) Queue(name string) *Queue {
	e.mu.Lock()
	defer e.mu.Unlock()
	if q := e.queues[name]; q != nil {
		return q
	}
	q := &Queue{e: e, name: name, weight: 1, est: 1, slot: -1}
	if e.closed {
		q.closed = true
		return q
	}
	e.queues[name] = q
	return q
}

// Queues are the Executor's open queues, in no order.
func (e *Executor) Queues() []*Queue {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*Queue, 0, len(e.queues))
	for _, q := range e.queues {
		out = append(out, q)
	}
	return out
}

// Made is how many samples the workers have made for the queue.
func (q *Queue) Made() uint64 { return q.made.Load() }

// Contested is how many samples the queue was given while a queue of the
// other class (SetBackground) had samples waiting: the class's choices
// made, counted. A background queue's is always 0 under
// ScheduleWeighted.
func (q *Queue) Contested() uint64 { return q.contested.Load() }

// CPU is the CPU time the queue's samples took, as the Executor's
// CPUClock read it (0 without one).
func (q *Queue) CPU() time.Duration { return time.Duration(q.cpu.Load()) }

// Charged is what the schedule has charged the queue for its samples
// made, in cpuUnits (ms of CPU with a CPUClock; samples without one): the
// quantity the weights share.
func (q *Queue) Charged() float64 { return math.Float64frombits(q.charged.Load()) }

// SetCost gives the schedule the CPU time a sample of the queue is
// expected to take (the cost model's prediction), charged for its samples
// until some are measured; without a CPUClock it is ignored. d <= 0 is
// ignored.
func (q *Queue) SetCost(d time.Duration) {
	if d <= 0 || q.e.cpu == nil {
		return
	}
	q.e.mu.Lock()
	if q.measured == 0 {
		q.est = float64(d) / float64(cpuUnit)
	}
	q.e.mu.Unlock()
}

// Name is the name the queue was made with.
func (q *Queue) Name() string { return q.name }

// SetWeight sets the queue's share weight for ScheduleWeighted: while
// several queues have work, each gets workers in proportion to its weight.
// w must be > 0 (it is clamped to [1e-6, 1e6]; NaN is ignored); the default
// is 1. It applies from the next sample the queue is given.
func (q *Queue) SetWeight(w float64) {
	if math.IsNaN(w) {
		return
	}
	w = min(max(w, minWeight), maxWeight)
	q.e.mu.Lock()
	q.weight = w
	q.e.mu.Unlock()
}

// SetBackground puts the queue in the background class (true) or the
// foreground one (false, the default): under ScheduleWeighted a worker
// takes a background queue's sample only when no foreground queue has one
// waiting, and weights share the workers within a class. A queue moved to
// the other class starts at that class's virtual time, with no credit
// from the one it left. ScheduleFIFO ignores classes, as it does weights.
func (q *Queue) SetBackground(bg bool) {
	e := q.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if q.background == bg {
		return
	}
	q.background = bg
	q.vtime = e.vnow[q.class()]
}

// Background says whether the queue is in the background class.
func (q *Queue) Background() bool {
	q.e.mu.Lock()
	defer q.e.mu.Unlock()
	return q.background
}

// class is the queue's index in e.vnow. e.mu is held.
func (q *Queue) class() int {
	if q.background {
		return 1
	}
	return 0
}

// Waited is how long, in all, the queue has had samples waiting for a
// worker (queued and not yet started): what its job waited for the
// executor, measured here rather than said by anyone.
func (q *Queue) Waited() time.Duration {
	q.e.mu.Lock()
	defer q.e.mu.Unlock()
	if q.waitSince.IsZero() {
		return q.waited
	}
	return q.waited + time.Since(q.waitSince)
}

// Weight is the queue's share weight.
func (q *Queue) Weight() float64 {
	q.e.mu.Lock()
	defer q.e.mu.Unlock()
	return q.weight
}

// Pending is the number of the queue's samples queued and not yet started.
func (q *Queue) Pending() int {
	q.e.mu.Lock()
	defer q.e.mu.Unlock()
	return q.pending
}

// Close ends the job: its samples queued and not yet started are dropped at
// once (their Fills return ErrClosed, as does any later Fill), and Close
// returns when the samples that had started, at most one per worker, are
// done, so nothing of the queue runs after it. A later Queue(name) makes a
// new queue. Closing twice is fine.
func (q *Queue) Close() {
	e := q.e
	e.mu.Lock()
	if !q.closed {
		q.closed = true
		if e.queues[q.name] == q {
			delete(e.queues, q.name)
		}
		for q.head != nil {
			e.drop(q.head, ErrClosed)
		}
		// Its samples running stop too: nothing of the job is wanted.
		for _, r := range e.cur {
			if r != nil && r.q == q {
				e.abandon(r, ErrClosed)
			}
		}
	}
	var drained chan struct{}
	if q.running > 0 {
		if q.drained == nil {
			q.drained = make(chan struct{})
		}
		drained = q.drained
	}
	e.mu.Unlock()
	if drained != nil {
		<-drained
	}
}

// fillReq is one Fill's batch: its samples are taken in index order, and
// the Fill sleeps on done until every one taken is made.
type fillReq struct {
	q          *Queue
	prev, next *fillReq // in q's list, while it has samples not started
	seq        uint64

	ds          Dataset
	t           *Transform
	seed, epoch uint64
	indices     []int64
	data        []byte
	size        int        // a sample's bytes: data holds len(data)/size samples
	layout      ViewLayout // where each sample's views lie in data
	copies      []uint32   // Batch.Copies: each sample's copy; nil: all 0
	fset        *FieldSet  // the fields the batch asks for (Batch.FieldSet), else nil
	fields      []Field    // Batch.Fields: sample i's are fields[i*fset.Len():]
	place       []int      // FillAt's: where each sample goes in data, in samples; nil: in order
	errs        []error    // per sample, written by the worker that made it
	traces      [][]byte   // per sample when the batch asks for traces (Batch.Traces), else nil
	good        []int      // finishBatch's scratch
	taken       int        // samples given to workers (or dropped): the next is indices[taken]
	running     int        // of those, the ones being made now
	dropped     error      // why samples were dropped: ctx.Err() or ErrClosed
	done        chan struct{}
	queued      time.Time  // when Fill queued it, with a StageObserver
	times       StageTimes // its samples' stage times, summed (under e.mu)

	// stop is set (atomically) when the samples running are abandoned:
	// the kernels they run poll it (opScratch.stop) and return.
	stop *int32
	// progress is told of its work (batch.ProgressOf the Fill's ctx;
	// nil: no one asks).
	progress *batch.Progress
}

// fillReqs recycles fillReqs with their errs and done channel, so a Fill
// allocates nothing of its own once warm.
var fillReqs = sync.Pool{New: func() any { return &fillReq{done: make(chan struct{}, 1), stop: new(int32)} }}

// Fill makes the batch of ds's samples at indices for (seed, epoch) into b,
// reusing b's buffers. Samples that fail by their own fault are listed in
// b.Errors and replaced by policy; Fill itself fails when an index is out
// of range (nothing is queued then), when a sample failed by its store's
// fault (source.IsStoreFault: the error wraps the store's; no sample is
// padded or dropped for it), when the Executor or the queue is closed (ErrClosed: a queue
// closed while the batch waits drops it at once), or ctx ends before the
// batch is made: then its samples not yet started are dropped at once,
// those already started (at most one per worker) are abandoned (their
// kernels poll a flag once a row or a step and return), and Fill returns
// ctx.Err() as soon as they have returned, so b is the caller's again and
// no core works on for a batch no one waits for. A batch whose every sample
// failed has N == 0 under either policy: not data to hand on. A ds that is a Prefetcher is told
// the indices before they are queued.
func (q *Queue) Fill(ctx context.Context, ds Dataset, t *Transform, seed, epoch uint64, indices []int64, policy FailPolicy, b *Batch) error {
	return q.fill(ctx, ds, t, seed, epoch, indices, nil, policy, b)
}

// FillAt is Fill for a part of a batch made straight into the whole
// batch's buffer: sample i goes to place[i] (in samples) in b.Data, whose
// length is kept and which must hold every place; the places are
// distinct, and the other bytes of b.Data are not touched. b's other
// fields (N, Labels, Indices, Errors, Times) are the part's own, as Fill
// makes them. A failed sample is replaced by policy within the part, as
// if the part were made alone and then placed: a copy of one of the
// part's good samples at its place (PadFromBatch), or the good samples
// moved to the part's first places (Drop: its places past N hold no
// sample then, and what is in them is unspecified).
func (q *Queue) FillAt(ctx context.Context, ds Dataset, t *Transform, seed, epoch uint64, indices []int64, place []int, policy FailPolicy, b *Batch) error {
	if len(place) != len(indices) {
		return fmt.Errorf("%w: %d places for %d samples", ErrUnsupported, len(place), len(indices))
	}
	size := t.SampleBytes()
	if len(b.Data)%size != 0 {
		return fmt.Errorf("%w: a batch buffer of %d bytes for samples of %d", ErrUnsupported, len(b.Data), size)
	}
	for _, at := range place {
		if at < 0 || (at+1)*size > len(b.Data) {
			return fmt.Errorf("%w: place %d is past the batch's %d bytes", ErrUnsupported, at, len(b.Data))
		}
	}
	return q.fill(ctx, ds, t, seed, epoch, indices, place, policy, b)
}

func (q *Queue) fill(ctx context.Context, ds Dataset, t *Transform, seed, epoch uint64, indices []int64, place []int, policy FailPolicy, b *Batch) error {
	if b.Copies != nil && len(b.Copies) != len(indices) {
		return fmt.Errorf("%w: %d copies for %d samples", ErrUnsupported, len(b.Copies), len(indices))
	}
	for _, idx := range indices {
		if idx < 0 || idx >= int64(ds.Len()) {
			return fmt.Errorf("%w: sample index %d out of range [0, %d)", ErrUnsupported, idx, ds.Len())
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Before the samples are queued: their bytes are on their way while
	// the batches queued ahead of this one are made.
	fs, _ := b.FieldSet.(*FieldSet)
	if fp, ok := ds.(FieldPrefetcher); ok && fs.Len() > 0 {
		fp.PrefetchFields(indices, fs)
	} else if p, ok := ds.(Prefetcher); ok {
		p.Prefetch(indices)
	}
	size := t.SampleBytes()
	n := len(indices)
	resetBatch(b, n, size, place != nil)
	for i, idx := range indices {
		b.Indices[i], b.Labels[i] = idx, ds.Label(int(idx))
	}
	r := fillReqs.Get().(*fillReq)
	r.q, r.ds, r.t, r.seed, r.epoch, r.indices, r.data, r.size, r.place = q, ds, t, seed, epoch, indices, b.Data, size, place
	r.layout = t.ViewLayout()
	r.copies = b.Copies
	r.errs = slices.Grow(r.errs[:0], n)[:n]
	r.traces = nil
	if b.Trace {
		r.traces = b.Traces
	}
	r.fset, r.fields = nil, nil
	if fs.Len() > 0 {
		r.fset, r.fields = fs, b.Fields
	}
	e := q.e
	if r.progress = batch.ProgressOf(ctx); r.progress != nil {
		r.progress.Queued(&e.made) // until a sample of it starts
	}
	e.mu.Lock()
	if e.closed || q.closed {
		e.mu.Unlock()
		r.release()
		return ErrClosed
	}
	if n == 0 {
		e.mu.Unlock()
		r.release()
		return nil
	}
	if e.stages != nil {
		r.queued = time.Now()
	}
	e.enqueue(r)
	e.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
		e.mu.Lock()
		e.drop(r, ctx.Err())
		e.mu.Unlock()
		<-r.done
	}
	// done was sent under e.mu after the last sample's errs entry was
	// written: every write of the batch is visible here.
	if err := r.dropped; err != nil {
		r.release()
		return err
	}
	if err := finishBatch(r, policy, b); err != nil {
		r.release()
		return err
	}
	if e.stages != nil {
		b.Times = r.times
		b.Times.Wall = time.Since(r.queued)
	}
	r.release()
	return nil
}

// at is where sample i of r goes in its data, in samples.
func (r *fillReq) at(i int) int {
	if r.place != nil {
		return r.place[i]
	}
	return i
}

// release clears r's references and returns it to the pool. Only the Fill
// that owns r calls it, after done: no worker holds r then.
func (r *fillReq) release() {
	clear(r.errs)
	*r.stop = 0 // no worker holds r: done was received
	*r = fillReq{errs: r.errs[:0], good: r.good[:0], done: r.done, stop: r.stop}
	fillReqs.Put(r)
}

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
		q.waited += time.Since(q.waitSince)
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
	}
}

// pick returns the active queue whose sample goes next, or nil when none
// has one, counting the sample contested when both classes have one
// waiting. e.mu is held.
func (e *Executor) pick() *Queue {
	var best *Queue
	var classes [2]bool // the classes of the active queues
	for _, q := range e.active {
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
type charge struct{ est, w float64 }

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
	ch := charge{est: q.est, w: q.weight}
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
func (e *Executor) finished(r *fillReq, st *StageTimes, ch charge, cost float64) {
	q := r.q
	e.settle(q, ch, cost)
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

// run is a worker: it takes samples by the schedule until the Executor is
// closed and no queue has any left.
func (e *Executor) run(d *Decoder, w int) {
	defer e.wg.Done()
	defer d.Close()
	e.lockThread()
	var buf []byte
	e.mu.Lock()
	for {
		q := e.pick()
		if q == nil {
			if e.closed {
				break
			}
			e.sleeping++
			slept := time.Now()
			e.work.Wait()
			e.idle.Add(int64(time.Since(slept)))
			continue
		}
		r, i, ch := e.take(q)
		e.cur[w] = r
		d.ops.stop, d.ops.progress = r.stop, r.progress
		e.mu.Unlock()
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
		var st StageTimes
		if e.stages != nil {
			t0 = time.Now()
		}
		var data []byte
		var err error
		if r.fset != nil {
			// A field over its bound fails the sample before anything
			// of it is read (a 100 MB .json is never read).
			err = r.fset.check(r.ds, int(idx))
		}
		if err == nil {
			data, err = r.ds.Read(int(idx), buf)
		}
		if err == nil && r.fset != nil {
			n := r.fset.Len()
			err = r.fset.read(r.ds, int(idx), r.fields[i*n:(i+1)*n])
		}
		if e.stages != nil {
			t1 = time.Now()
		}
		d.post = 0
		if err == nil {
			buf = data
			// The sample's views, at its place in a buffer of
			// len(r.data)/r.size samples.
			at, slots := r.at(i), len(r.data)/r.size
			d.offs = d.offs[:0]
			for v := range r.layout.Views() {
				d.offs = append(d.offs, r.layout.Offset(slots, v, at))
			}
			k := Key{Seed: r.seed, Epoch: r.epoch, Index: uint64(idx)}
			if r.copies != nil {
				k.Copy = uint64(r.copies[i])
			}
			d.admitNow = r.copies != nil
			err = d.decodeAt(data, r.t, k, r.data, d.offs)
			if err == nil && r.fset != nil {
				n := r.fset.Len()
				err = r.fset.targetsInto(d, r.t, r.ds, int(idx), r.fields[i*n:(i+1)*n])
			}
		}
		if e.stages != nil {
			made := time.Since(t1)
			st = StageTimes{Queue: t0.Sub(r.queued), Read: t1.Sub(t0), Decode: max(made-d.post, 0), Transform: min(d.post, made)}
			e.stages(st.Queue, st.Read, made)
		}
		r.errs[i] = err
		if err == nil && r.traces != nil {
			r.traces[i] = d.AppendTrace(r.traces[i][:0], r.t)
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
		d.ops.stop, d.ops.progress = nil, nil
		if r.progress != nil {
			r.progress.Add()
		}
		e.finished(r, &st, ch, cost)
	}
	e.mu.Unlock()
}
