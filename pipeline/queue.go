package pipeline

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// Schedule says how an Executor's workers choose the next sample among the
// queues that have one. Either way the pool is work-conserving, whatever
// the queues' weights: a worker never waits while any queue has a sample
// not yet started, but for one (with ScheduleWeighted and two workers or
// more): heavy queues' samples leave a worker to the light queues that
// had work in the last second (heavyLimit).
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
	return 0, fmt.Errorf("%w: schedule %q (want stall or fifo)", errs.Unsupported, s)
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
	// lastWork is when the queue last had samples waiting (set as it
	// becomes active and as it empties): a light queue that had work
	// within reserveWindow keeps a worker from the heavy ones.
	lastWork time.Time
}

// A heavy queue is one whose samples are estimated at heavyCost or more
// (cpuUnits: ms of CPU with a CPUClock). A worker keeps a sample it took
// until it is made, so the schedule's share holds only between samples:
// heavy samples on every worker would make a light job wait a whole heavy
// sample for each of its own (a blur of 0.5 s beside a trainer's 5 ms
// samples took it to 2% of its rate). So while some light queue had work
// within reserveWindow, the heavy queues together hold at most workers -
// min(workers-1, those light queues) workers (heavyLimit); the light
// queues' samples are short, so what they leave comes back at once. With
// no light queue about the heavy ones use every worker (work-conserving).
const (
	heavyCost     = 20.0
	reserveWindow = time.Second
)

func (q *Queue) heavy() bool { return q.est >= heavyCost }

// heavyLimit is how many workers heavy samples may hold now. e.mu is held.
func (e *Executor) heavyLimit() int {
	if e.workers < 2 || e.sched != ScheduleWeighted {
		return e.workers
	}
	now, light := time.Now(), 0
	for _, q := range e.queues {
		if !q.heavy() && (q.slot >= 0 || now.Sub(q.lastWork) < reserveWindow) {
			light++
		}
	}
	return e.workers - min(light, e.workers-1)
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
		e.trimIdle()
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

// trimIdle has the workers let their counted scratch go (scratch.go) as
// a job's queue closes: the sleeping ones now, the others when they next
// find nothing to do. e.mu is held; a sleeping worker touches its Decoder
// only once it holds e.mu again.
func (e *Executor) trimIdle() {
	e.trimGen++
	for _, d := range e.asleep {
		if d != nil {
			d.trimScratch(e.trimGen)
		}
	}
}
