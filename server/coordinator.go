package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/peer"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// ErrRefused marks a maker's refusal of a job (unknown dataset, another
// fingerprint, a spec it cannot make): the coordinator stops asking that
// maker for the job's batches, and fails the job only when every maker
// refuses it. It is peer.ErrRefused, which peers return.
var ErrRefused = peer.ErrRefused

// maxAttempts bounds how often one batch is leased before the job fails
// with the last maker error: enough for several peers dying in a row.
const maxAttempts = 8

// A Sink receives a job's output in order: EpochStart, the epoch's batches,
// EpochEnd, then the next epoch. The coordinator calls it from one
// goroutine; a batch is valid only during the call. An error ends the job.
type Sink interface {
	EpochStart(info *stokerv1.JobInfo) error
	Batch(epoch uint64, k int, b *pipeline.Batch) error
	EpochEnd(end *stokerv1.EpochEnd) error
}

// Stream is what one stream asks of a job: where it starts, how many
// epochs it runs, how batches are ordered.
type Stream struct {
	Epoch  uint64 // the first epoch
	Epochs uint64 // 0: until the stream ends
	// Start, Skip and Consumed resume the first epoch: batches before
	// Start and those in Skip are not sent; Consumed cuts the plan
	// (elastic resume, see Plan).
	Start    int
	Skip     []uint64
	Consumed uint64
	AsReady  bool
	Credits  int64 // granted up front
}

// coordinator runs one job for one stream: it owns the epoch plans, the
// lease table (batch → maker, deadline), the batches delivered, the reorder
// buffer and the window. It asks makers for batches and hands them to a
// Sink in order (or as ready), as credits allow. It knows nothing of gRPC.
type coordinator struct {
	s   *Server
	j   *job
	st  Stream
	log *slog.Logger
	id  string

	credits atomic.Int64
	granted chan struct{} // size 1: "credits changed"
	// starvedSince is when a ready batch began waiting for a credit (Unix
	// ns), 0 when none waits: the idle watchdog reads it. starved adds up
	// the time spent so, for the window controller.
	starvedSince atomic.Int64
	starved      time.Duration
	lastStarved  time.Duration // starved at the controller's last decision
	// reserved is the memory budget the job holds; batchBytes one batch's
	// most. The coordinator adds to reserved as it allocates buffers; the
	// Feed handler releases it at the end.
	reserved, batchBytes int64

	// Owned by run's goroutine.
	results  chan result
	leases   map[batchID]*leaseRec
	retry    []batchID // failed leases, lowest first
	attempts map[batchID]int
	ready    map[batchID]*pipeline.Batch
	free     []*pipeline.Batch
	buffers  int // allocated
	stats    map[Maker]*makerStat
	leaseID  uint64
	cur      *epochState // being delivered
	nextE    *epochState // the next epoch, once leasing reached it
	cursor   batchID     // the next batch to lease, after retries
	leasing  bool        // cursor is valid: batches remain to lease
	lastWarn time.Time
	// refused: the makers' refusals, for the job's error when all refuse.
	refused map[Maker]error

	// The window controller's: the job's window now (0 until the first
	// lease sets it), the trainer's measurements, and the last status.
	win int
	tel *telemetry
	// recommended is the advisor's last count of makers the trainer needs
	// (NaN before it has one): the window is not narrowed below it.
	recommended float64
	status      atomic.Pointer[stokerv1.JobStatus]
	name        string // the job label in metrics
	demand      atomic.Pointer[pipeline.JobDemand]
}

type batchID struct {
	epoch uint64
	k     int
}

type leaseRec struct {
	id     uint64
	maker  Maker
	issued time.Time
	n      int // leases in flight on the maker when issued, this one included
}

type result struct {
	id    batchID
	lease uint64
	maker Maker
	b     *pipeline.Batch
	err   error
}

// makerStat is what one job measured of one maker.
type makerStat struct {
	inflight int
	rate     float64 // batches per second, EWMA; 0 until measured
	fails    int     // in a row
	retryAt  time.Time
	// first is the job's first lease on the maker, done its completions
	// in the last telemetryWindow: what it delivered, for the advisor (the
	// EWMA, leases in flight over latency, only ranks makers).
	first time.Time
	done  []time.Time
}

// throughput is the batches per second the maker delivered to the job
// over the last telemetryWindow (or since its first lease).
func (st *makerStat) throughput(now time.Time) float64 {
	i := 0
	for i < len(st.done) && now.Sub(st.done[i]) > telemetryWindow {
		i++
	}
	st.done = append(st.done[:0], st.done[i:]...)
	span := min(now.Sub(st.first), telemetryWindow).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(len(st.done)) / span
}

// epochState is one epoch's delivery: which batches are wanted, which went
// out.
type epochState struct {
	epoch uint64
	plan  Plan
	want  int          // batches to deliver
	sent  int          // delivered
	done  map[int]bool // delivered or skipped, past next
	next  int          // the lowest batch number not yet delivered or skipped
	end   stokerv1.EpochEnd
}

func (e *epochState) markDone(k int) {
	e.done[k] = true
	for e.done[e.next] {
		delete(e.done, e.next)
		e.next++
	}
}

func (e *epochState) isDone(k int) bool { return k < e.next || e.done[k] }

func newCoordinator(s *Server, j *job, st Stream, id string, log *slog.Logger) *coordinator {
	c := &coordinator{
		s: s, j: j, st: st, id: id, log: log,
		granted:  make(chan struct{}, 1),
		leases:   make(map[batchID]*leaseRec),
		attempts: make(map[batchID]int),
		ready:    make(map[batchID]*pipeline.Batch),
		stats:    make(map[Maker]*makerStat),
		refused:  make(map[Maker]error),
		tel:      newTelemetry(telemetryWindow, time.Now()),
		name:     j.name + "-r" + strconv.Itoa(j.rank) + "-" + id,
	}
	j.id = c.name
	c.credits.Store(st.Credits)
	return c
}

// telemetryWindow is how far back the stall ratio and rates look: long
// enough to span a few of a slow trainer's steps, short enough that the
// controller follows a change within a few seconds.
const telemetryWindow = 3 * time.Second

// controlEvery is how often the window controller decides.
const controlEvery = 500 * time.Millisecond

// Grant gives the stream n more credits. Safe from any goroutine.
func (c *coordinator) Grant(n uint32) {
	c.credits.Add(int64(n))
	select {
	case c.granted <- struct{}{}:
	default:
	}
}

// newEpoch sets up epoch e's delivery; the first epoch takes the stream's
// resume point.
func (c *coordinator) newEpoch(e uint64) *epochState {
	es := &epochState{epoch: e, done: make(map[int]bool), end: stokerv1.EpochEnd{Epoch: e}}
	if e == c.st.Epoch {
		es.plan = c.j.plan(e, c.st.Consumed)
		es.next = min(c.st.Start, es.plan.Batches())
		for _, k := range c.st.Skip {
			if k < uint64(es.plan.Batches()) && int(k) >= es.next {
				es.markDone(int(k))
			}
		}
	} else {
		es.plan = c.j.plan(e, 0)
	}
	es.want = es.plan.Batches() - es.next - len(es.done)
	return es
}

// lastEpoch reports whether e is the stream's last epoch.
func (c *coordinator) lastEpoch(e uint64) bool {
	return c.st.Epochs > 0 && e+1 >= c.st.Epoch+c.st.Epochs
}

// window is how many leases the job may have in flight: what the
// controller set, within its bounds. It starts at two per ready maker (at
// least DefaultWindow).
func (c *coordinator) window(ms []Maker) int {
	lo, hi := c.bounds(ms)
	if c.win == 0 {
		c.win = max(DefaultWindow, 2*readyMakers(ms))
	}
	return min(max(c.win, lo), hi)
}

// bounds are the window's floor and ceiling: 1, and the configured window
// or four per ready maker (at least DefaultWindow).
func (c *coordinator) bounds(ms []Maker) (lo, hi int) {
	if w := c.s.cfg.Window; w > 0 {
		return 1, w
	}
	return 1, min(max(DefaultWindow, 4*readyMakers(ms)), maxWindow)
}

func readyMakers(ms []Maker) int {
	n := 0
	for _, m := range ms {
		if m.Ready() {
			n++
		}
	}
	return n
}

// run runs the job until its last epoch is delivered, the sink fails or
// ctx ends (its cause is returned).
func (c *coordinator) run(ctx context.Context, sink Sink) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // the makers' calls return promptly once ctx ends
		ms, _ := c.s.makers.snapshot()
		for _, m := range ms {
			m.Forget(c.j) // the local executor drops the job's queued samples at once
		}
	}()
	// Results never block a maker's goroutine: at most one per buffer, and
	// buffers are at most twice the largest window.
	c.results = make(chan result, 2*maxWindow)

	c.cur = c.newEpoch(c.st.Epoch)
	if err := sink.EpochStart(c.j.info(c.cur.epoch, c.cur.plan)); err != nil {
		return err
	}
	c.cursor, c.leasing = batchID{c.cur.epoch, c.cur.next}, true
	c.advanceCursor()
	control := time.NewTicker(controlEvery)
	defer control.Stop()
	defer c.dropMetrics()
	var retryTimer *time.Timer
	for {
		done, err := c.deliver(sink)
		if err != nil || done {
			return err
		}
		ms, changed := c.s.makers.snapshot()
		wake, err := c.lease(ctx, &wg, ms)
		if err != nil {
			return err
		}
		var retryC <-chan time.Time
		if !wake.IsZero() {
			if retryTimer == nil {
				retryTimer = time.NewTimer(time.Until(wake))
				defer retryTimer.Stop()
			} else {
				retryTimer.Reset(time.Until(wake))
			}
			retryC = retryTimer.C
		}
		select {
		case r := <-c.results:
			if err := c.collect(ctx, r); err != nil {
				return err
			}
		case <-c.granted:
		case <-changed:
		case <-retryC:
		case now := <-control.C:
			c.control(now, ms)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// deliver hands ready batches to the sink while credits last, closing
// epochs as they complete. done: the stream's last epoch is delivered.
func (c *coordinator) deliver(sink Sink) (done bool, err error) {
	for {
		e := c.cur
		if e.sent == e.want {
			if err := sink.EpochEnd(&e.end); err != nil {
				return false, err
			}
			if c.lastEpoch(e.epoch) {
				return true, nil
			}
			if c.nextE == nil {
				c.nextE = c.newEpoch(e.epoch + 1)
			}
			c.cur, c.nextE = c.nextE, nil
			if err := sink.EpochStart(c.j.info(c.cur.epoch, c.cur.plan)); err != nil {
				return false, err
			}
			continue
		}
		k, ok := c.pick()
		if !ok {
			c.unstarve()
			return false, nil
		}
		if c.credits.Load() <= 0 {
			if c.starvedSince.Load() == 0 {
				c.starvedSince.Store(time.Now().UnixNano())
			}
			return false, nil
		}
		c.unstarve()
		id := batchID{e.epoch, k}
		b := c.ready[id]
		delete(c.ready, id)
		delete(c.attempts, id)
		if err := sink.Batch(e.epoch, k, b); err != nil {
			return false, err
		}
		c.free = append(c.free, b)
		c.credits.Add(-1)
		e.markDone(k)
		e.sent++
		e.end.Batches++
		e.end.Samples += uint64(b.N)
		e.end.SampleErrors += uint64(len(b.Errors))
	}
}

// demandNow is the job's demand as its controller last measured it: its
// input stall, and its trainer's GPU seconds per sample (0: unknown).
func (c *coordinator) demandNow() pipeline.JobDemand {
	if d := c.demand.Load(); d != nil {
		return *d
	}
	return pipeline.JobDemand{}
}

// unstarve ends a wait of a ready batch for credit, adding it up.
func (c *coordinator) unstarve() {
	if t := c.starvedSince.Swap(0); t != 0 {
		c.starved += time.Since(time.Unix(0, t))
	}
}

// starvedFor is the time ready batches waited for credit since the last
// call.
func (c *coordinator) starvedFor(now time.Time) time.Duration {
	total := c.starved
	if t := c.starvedSince.Load(); t != 0 {
		total += now.Sub(time.Unix(0, t))
	}
	d := total - c.lastStarved
	c.lastStarved = total
	return d
}

// pick returns the current epoch's batch to deliver next: the next in
// order, or when as-ready the lowest-numbered ready one.
func (c *coordinator) pick() (int, bool) {
	e := c.cur
	if !c.st.AsReady {
		_, ok := c.ready[batchID{e.epoch, e.next}]
		return e.next, ok
	}
	k, ok := -1, false
	for id := range c.ready {
		if id.epoch == e.epoch && (!ok || id.k < k) {
			k, ok = id.k, true
		}
	}
	return k, ok
}

// advanceCursor moves the lease cursor past batches that need no lease
// (skipped on resume), into the next epoch at the end of one, and stops it
// after the stream's last epoch or more than one epoch ahead of delivery.
func (c *coordinator) advanceCursor() {
	for c.leasing {
		e := c.epochOf(c.cursor.epoch)
		if e == nil {
			if c.cursor.epoch != c.cur.epoch+1 || c.lastEpoch(c.cur.epoch) {
				c.leasing = false // resumed by deliver moving on
				return
			}
			c.nextE = c.newEpoch(c.cursor.epoch)
			e = c.nextE
			c.cursor.k = e.next
		}
		if c.cursor.k >= e.plan.Batches() {
			c.cursor = batchID{c.cursor.epoch + 1, 0}
			continue
		}
		if e.isDone(c.cursor.k) {
			c.cursor.k++
			continue
		}
		return
	}
}

func (c *coordinator) epochOf(e uint64) *epochState {
	switch {
	case c.cur.epoch == e:
		return c.cur
	case c.nextE != nil && c.nextE.epoch == e:
		return c.nextE
	}
	return nil
}

// nextToLease returns the batch to lease next: a failed one first, else the
// cursor's.
func (c *coordinator) nextToLease() (batchID, bool) {
	if len(c.retry) > 0 {
		return c.retry[0], true
	}
	if !c.leasing {
		// The cursor stopped one epoch ahead; delivery may have moved on.
		if c.cursor.epoch <= c.cur.epoch+1 && !c.lastEpoch(c.cur.epoch) || c.epochOf(c.cursor.epoch) != nil {
			c.leasing = true
			c.advanceCursor()
		}
		if !c.leasing {
			return batchID{}, false
		}
	}
	return c.cursor, true
}

// lease issues leases while the window, the buffers and the makers allow.
// It returns when to try again if only a maker's back-off holds it up.
func (c *coordinator) lease(ctx context.Context, wg *sync.WaitGroup, ms []Maker) (wake time.Time, err error) {
	window := c.window(ms)
	pool := window + int(min(c.st.Credits, int64(window)))
	for len(c.leases) < window {
		id, ok := c.nextToLease()
		if !ok {
			return wake, nil
		}
		b := c.buffer(pool)
		if b == nil {
			return wake, nil
		}
		m, retryAt, err := c.choose(ms)
		if err != nil || m == nil {
			c.free = append(c.free, b)
		}
		if err != nil {
			return wake, err
		}
		if m == nil {
			if len(ms) == 0 && time.Since(c.lastWarn) > 10*time.Second {
				c.lastWarn = time.Now()
				c.log.Warn("no makers: this server makes no batches (--workers 0) and no peer is connected; waiting")
			}
			return retryAt, nil
		}
		// Only now, with a buffer and a maker, is the batch taken off the
		// queue: nothing is skipped when either is missing.
		if len(c.retry) > 0 {
			c.retry = c.retry[1:]
		} else {
			c.cursor.k++
			c.advanceCursor()
		}
		c.start(ctx, wg, id, m, b)
	}
	return wake, nil
}

// buffer returns a free batch buffer, or a new one while the job has fewer
// than pool and, past the two reserved at its start, the server's memory
// budget has room; nil when there is none.
func (c *coordinator) buffer(pool int) *pipeline.Batch {
	if n := len(c.free); n > 0 {
		b := c.free[n-1]
		c.free = c.free[:n-1]
		return b
	}
	if c.buffers >= pool {
		return nil
	}
	if c.buffers >= 2 && c.batchBytes > 0 {
		if !c.s.budget.try(c.batchBytes) {
			return nil
		}
		c.reserved += c.batchBytes
	}
	c.buffers++
	return new(pipeline.Batch)
}

// choose picks the ready maker that would finish a new lease soonest:
// (leases in flight + 1) / measured rate. A maker not measured yet is
// taken to be as fast as the fastest, so a new peer is tried at once. nil
// when none can take a lease now, with when one's back-off ends; an error
// when every maker refused the job.
func (c *coordinator) choose(ms []Maker) (Maker, time.Time, error) {
	now := time.Now()
	fastest := 0.0
	for _, m := range ms {
		if st := c.stats[m]; st != nil {
			fastest = math.Max(fastest, st.rate)
		}
	}
	if fastest == 0 {
		fastest = 1
	}
	var (
		best    Maker
		bestT   = math.Inf(1)
		wake    time.Time
		refused int
	)
	for _, m := range ms {
		if c.refused[m] != nil {
			refused++
			continue
		}
		if !m.Ready() {
			continue
		}
		st := c.stat(m)
		if now.Before(st.retryAt) {
			if wake.IsZero() || st.retryAt.Before(wake) {
				wake = st.retryAt
			}
			continue
		}
		if m.Free() <= 0 {
			continue
		}
		rate := st.rate
		if rate == 0 {
			rate = fastest
		}
		if t := float64(st.inflight+1) / rate; t < bestT {
			best, bestT = m, t
		}
	}
	if best == nil && refused > 0 && refused == len(ms) {
		var errs []error
		for _, m := range ms {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name(), c.refused[m]))
		}
		return nil, wake, status.Errorf(codes.FailedPrecondition, "no maker can make this job: %v", errors.Join(errs...))
	}
	return best, wake, nil
}

func (c *coordinator) stat(m Maker) *makerStat {
	st := c.stats[m]
	if st == nil {
		st = &makerStat{}
		c.stats[m] = st
	}
	return st
}

// start leases batch id to m: the maker works under the lease's deadline
// and reports to results.
func (c *coordinator) start(ctx context.Context, wg *sync.WaitGroup, id batchID, m Maker, b *pipeline.Batch) {
	c.leaseID++
	st := c.stat(m)
	st.inflight++
	rec := &leaseRec{id: c.leaseID, maker: m, issued: time.Now(), n: st.inflight}
	if st.first.IsZero() {
		st.first = rec.issued
	}
	c.leases[id] = rec
	c.attempts[id]++
	e := c.epochOf(id.epoch)
	l := &Lease{job: c.j, Epoch: id.epoch, Number: id.k, Indices: e.plan.Batch(id.k), Demand: c.demandNow()}
	c.s.m.leases.WithLabelValues(m.Name()).Inc()
	wg.Add(1)
	go func() {
		defer wg.Done()
		lctx, cancel := context.WithTimeout(ctx, c.s.cfg.LeaseTimeout)
		err := m.Make(lctx, l, b)
		if err == nil {
			err = c.check(l, b)
		} else if errors.Is(lctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			// The lease ran out of time, whatever the maker said as it
			// gave up (a peer that times a lease out drops its stream, and
			// its error may say so first).
			err = fmt.Errorf("%w: %v", context.DeadlineExceeded, err)
		}
		cancel()
		c.results <- result{id: id, lease: rec.id, maker: m, b: b, err: err}
	}()
}

// check verifies that a maker's batch has the shape its lease asks for, so
// that a confused peer cannot hand the trainer a malformed batch.
func (c *coordinator) check(l *Lease, b *pipeline.Batch) error {
	size := c.j.t.SampleBytes()
	switch {
	case b.N < 0 || b.N > len(l.Indices):
		return fmt.Errorf("batch %d: %d samples for a lease of %d", l.Number, b.N, len(l.Indices))
	case len(b.Data) != b.N*size || len(b.Labels) != b.N || len(b.Indices) != b.N:
		return fmt.Errorf("batch %d: %d bytes, %d labels, %d indices for %d samples of %d bytes", l.Number, len(b.Data), len(b.Labels), len(b.Indices), b.N, size)
	case c.j.policy == pipeline.PadFromBatch && b.N != 0 && b.N != len(l.Indices):
		return fmt.Errorf("batch %d: %d samples, the pad policy keeps %d", l.Number, b.N, len(l.Indices))
	}
	return nil
}

// collect takes a maker's result: a batch for the reorder buffer, or a
// failure whose batch goes back to be leased again. A result whose lease
// is not the batch's current one, or for a batch already delivered, is
// dropped and its buffer reused: a batch is never delivered twice.
func (c *coordinator) collect(ctx context.Context, r result) error {
	st := c.stat(r.maker)
	st.inflight--
	rec, ok := c.leases[r.id]
	e := c.epochOf(r.id.epoch)
	if !ok || rec.id != r.lease || e == nil || e.isDone(r.id.k) {
		c.s.m.resultsDropped.Inc()
		c.free = append(c.free, r.b)
		return nil
	}
	delete(c.leases, r.id)
	if r.err == nil {
		took := time.Since(rec.issued)
		c.s.m.batchSeconds.WithLabelValues(c.j.name).Observe(took.Seconds())
		sample := float64(rec.n) / max(took.Seconds(), 1e-6)
		if st.rate == 0 {
			st.rate = sample
		} else {
			st.rate = 0.7*st.rate + 0.3*sample
		}
		st.fails = 0
		st.done = append(st.done, time.Now())
		c.ready[r.id] = r.b
		return nil
	}
	c.free = append(c.free, r.b)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	c.requeue(r.id)
	if errors.Is(r.err, peer.ErrBusy) {
		// Taken by other jobs: no failure, no back-off; the maker's Free
		// says when to try it again.
		c.attempts[r.id]--
		c.s.m.leaseFailures.WithLabelValues(r.maker.Name(), "busy").Inc()
		st.retryAt = time.Now().Add(20 * time.Millisecond) // a worker's own limit: do not ask again at once
		return nil
	}
	if errors.Is(r.err, peer.ErrDraining) {
		// The worker is shutting down: it finished what it had and turns
		// new leases away. No failure of the job or the maker; the peer is
		// not Ready until it comes back, so the batch goes elsewhere.
		c.attempts[r.id]--
		c.s.m.leaseFailures.WithLabelValues(r.maker.Name(), "draining").Inc()
		return nil
	}
	reason := "error"
	switch {
	case errors.Is(r.err, ErrRefused):
		reason = "refused"
		if c.refused[r.maker] == nil {
			c.log.Warn("maker refused the job", "maker", r.maker.Name(), "err", r.err)
		}
		c.refused[r.maker] = r.err
	case errors.Is(r.err, context.DeadlineExceeded):
		reason = "timeout"
	}
	c.s.m.leaseFailures.WithLabelValues(r.maker.Name(), reason).Inc()
	if reason != "refused" {
		st.fails++
		st.rate /= 2
		st.retryAt = time.Now().Add(min(100*time.Millisecond<<min(st.fails, 6), 5*time.Second))
		c.log.Warn("lease failed, leasing the batch again", "maker", r.maker.Name(), "epoch", r.id.epoch,
			"batch", r.id.k, "reason", reason, "err", r.err)
	}
	if c.attempts[r.id] >= maxAttempts {
		return status.Errorf(codeOf(r.err), "batch %d of epoch %d failed %d times; last, on %s: %v", r.id.k, r.id.epoch, maxAttempts, r.maker.Name(), r.err)
	}
	return nil
}

// requeue puts a failed batch back, to be leased before any new one.
func (c *coordinator) requeue(id batchID) {
	i, _ := slices.BinarySearchFunc(c.retry, id, func(a, b batchID) int {
		if a.epoch != b.epoch {
			return cmpU(a.epoch, b.epoch)
		}
		return a.k - b.k
	})
	c.retry = slices.Insert(c.retry, i, id)
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
