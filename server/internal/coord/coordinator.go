package coord

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline/batch"
)

// noMakerLeaseTimeouts is how many lease timeouts a job waits for a maker
// to become ready before it fails with errNoMakerReady: long enough for a
// restarted worker to come back (its peer reconnects within 5 s), short
// enough that a trainer learns of a configuration that cannot work.
const noMakerLeaseTimeouts = 3

// TelemetryWindow is how far back the stall ratio and rates look: long
// enough to span a few of a slow trainer's steps, short enough that the
// controller follows a change within a few seconds.
const TelemetryWindow = 3 * time.Second

// controlEvery is how often the window controller decides.
const controlEvery = 500 * time.Millisecond

// Stream is what one stream asks of a job (where it starts, how many
// epochs it runs, how batches are ordered) and what it brings: its share
// of the memory budget and, for a same-host trainer, its ring.
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
	// Memory pays for the batch buffers beyond the reservedBuffers a job
	// starts with (the stream reserved those).
	Memory Memory
	// Ring is the trainer's shared-memory ring, nil when it has none:
	// batches are made in its slots (pool.go).
	Ring Ring
}

// Output is the coordinator's next item for its trainer, in order: an
// epoch's start (the server sends its JobInfo), its batches (in
// batch-number order, or as ready), its end; then the next epoch. A batch goes out where Place puts it (a
// ring slot, or chunks), and its buffer goes back with Recycle once it has
// been sent.
type Output struct {
	Start *EpochStart // an epoch starts
	End   *EpochEnd   // an epoch ends
	Epoch uint64
	K     int
	Batch *batch.Batch // batch K of Epoch
	// Slot is the ring slot Batch's pixels were made in, when InSlot.
	Slot   uint32
	InSlot bool
}

// Coordinator runs one job for one stream: it owns the epoch plans, the
// lease table (batch → maker, deadline), the batches delivered, the reorder
// buffer, the buffer pool and the window. It asks makers for batches and
// hands its output, in order (or as ready) and as credits allow, to
// whoever reads Out: the Feed stream's send loop, which may take its time
// to send without holding up leasing, collecting or the controller. It
// knows nothing of gRPC.
//
// Its loop (Run) waits for an event (a maker's answer, a buffer back from
// Out's reader, credits, room freed on a maker, the makers changing, a
// timer, the controller's tick), steps the lease table with it, and
// carries out what the table decided; then it delivers what it can,
// hedges the leases that are late and issues new ones.
//
// The files: coordinator.go (the type, its loop), table.go (the lease
// table: a pure state machine of leases, hedges, retries, attempts, the
// reorder buffer and the cursor), lease.go (issuing leases: lessees,
// start), choose.go (which maker gets a whole batch), answer.go (a
// lease's answer, the makers blamed), hedge.go (hedged leases),
// router.go (routing by cache affinity), parts.go and partload.go (a
// batch in parts, what is in flight in parts on each maker),
// deliver.go (delivery, credits), pool.go (batch buffers, ring slots,
// their memory), makerstats.go (what the job measured of each maker),
// control.go (the window controller and the job's status), telemetry.go
// (the trainer's reports), advisor.go (how many makers the job needs),
// stages.go and verdict.go (where its time goes).
type Coordinator struct {
	env  *Env
	j    Job
	st   Stream
	log  *slog.Logger
	name string // the job's name in metrics and Status: dataset-rRANK-STREAM

	credit   credit
	out      chan Output
	recycled chan *batch.Batch // buffers back from out's reader
	// wake (size 1) is poked when a maker the job waits for room on frees
	// some (Makers.Freed).
	wake    chan struct{}
	results chan result

	// Owned by run's goroutine (parts also by the leases' goroutines).
	table   *table // made by Run
	hedging hedging
	routing router
	parts   *partLoad
	pool    *pool
	makers  makerBook
	ctl     controller
}

// outputSlack is out's room beyond one item per buffer: the epoch markers
// between them.
const outputSlack = 8

// maxBuffers bounds a job's batch buffers: twice the largest window (its
// leases, and as many made batches), its hedges, and the one a batch
// delivery waits for may take past the pool (lease).
const maxBuffers = 2*MaxWindow + maxHedges + 1

// New makes the coordinator of job j for stream st, named name in metrics
// and Status.
func New(env *Env, j Job, st Stream, name string, log *slog.Logger) *Coordinator {
	c := &Coordinator{
		env: env, j: j, st: st, log: log, name: name,
		credit:   credit{granted: make(chan struct{}, 1)},
		out:      make(chan Output, maxBuffers+outputSlack),
		recycled: make(chan *batch.Batch, maxBuffers+outputSlack),
		wake:     make(chan struct{}, 1),
		hedging:  newHedging(),
		routing:  newRouter(),
		parts:    newPartLoad(),
		pool:     newPool(st.Memory, st.Ring, j.BatchBytes()),
		makers:   makerBook{stats: make(map[Maker]*makerStat), refused: make(map[Maker]error)},
		ctl: controller{
			tel:       newTelemetry(TelemetryWindow, time.Now()),
			stages:    stageLog{window: TelemetryWindow},
			advised:   stabilizer{window: env.Config.AdviseWindow, max: float64(env.Config.MaxRecommended)},
			estimates: medianFilter{window: adviceSmoothing},
		},
	}
	c.credit.n.Store(st.Credits)
	return c
}

// Name is the job's name in metrics and Status.
func (c *Coordinator) Name() string { return c.name }

// Out is the coordinator's output, closed when Run returns.
func (c *Coordinator) Out() <-chan Output { return c.out }

// Status is the job's status as its controller last published it (every
// controlEvery); nil before the first.
func (c *Coordinator) Status() *Status { return c.ctl.status.Load() }

// Report records a trainer's credit report: its wait for the batch, its
// step's time, the batches it covers. Safe from any goroutine.
func (c *Coordinator) Report(now time.Time, wait, step float64, batches uint32) {
	c.ctl.tel.report(now, wait, step, batches)
}

// Delivered records a batch sent to the trainer, whose sending took send
// (its header and chunks, or its copy into a ring slot). Safe from any
// goroutine.
func (c *Coordinator) Delivered(now time.Time, samples, bytes int, send time.Duration) {
	c.ctl.tel.delivered(now, samples, bytes, send)
}

// CreditWaitSince is when a ready batch began waiting for the trainer's
// credit; zero when none waits. Safe from any goroutine.
func (c *Coordinator) CreditWaitSince() time.Time {
	if t := c.credit.waitSince.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// Grant gives the stream n more credits. Safe from any goroutine.
func (c *Coordinator) Grant(n uint32) {
	c.credit.n.Add(int64(n))
	select {
	case c.credit.granted <- struct{}{}:
	default:
	}
}

// Recycle gives back a batch buffer that Out's reader is done with. Safe
// from any goroutine; never blocks (recycled has room for every buffer).
func (c *Coordinator) Recycle(b *batch.Batch) {
	select {
	case c.recycled <- b:
	default:
	}
}

// Run runs the job until its last epoch is handed to Out, or ctx ends (its
// cause is returned). It closes Out when it returns.
func (c *Coordinator) Run(ctx context.Context) error {
	defer close(c.out)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // the makers' calls return promptly once ctx ends
		c.env.Makers.unwait(c.wake)
		ms, _ := c.env.Makers.Snapshot()
		for _, m := range ms {
			m.Forget(c.j) // the local executor drops the job's queued samples at once
		}
	}()
	// Results never block a maker's goroutine: at most one per buffer.
	c.results = make(chan result, maxBuffers)

	c.table = newTable(c.j, c.st)
	if err := c.emit(ctx, Output{Start: &EpochStart{Epoch: c.table.cur.epoch, Plan: c.table.cur.plan}}); err != nil {
		return err
	}
	control := time.NewTicker(controlEvery)
	defer control.Stop()
	defer c.dropMetrics()
	var retryTimer *time.Timer
	for {
		done, err := c.deliver(ctx)
		if err != nil || done {
			return err
		}
		ms, changed := c.env.Makers.Snapshot()
		// Hedges first: a batch late on a slow maker is the one delivery
		// will wait for, and new leases would take the room it needs.
		hedgeAt := c.hedge(ctx, &wg, ms)
		wake, err := c.lease(ctx, &wg, ms)
		if err != nil {
			return err
		}
		if hedgeAt.IsZero() && c.hedging.perLease == 0 && c.env.Config.Affinity {
			// Before the job's first batch, leases in parts are hedged
			// when a maker is stuck (parts.go): when they fall due is
			// known once they are issued.
			hedgeAt = c.hedge(ctx, &wg, ms)
		}
		if !hedgeAt.IsZero() && (wake.IsZero() || hedgeAt.Before(wake)) {
			wake = hedgeAt
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
		case b := <-c.recycled:
			c.pool.takeBack(b)
		case <-c.credit.granted:
		case <-c.wake:
		case <-changed:
			c.dropQuarantined() // a peer may have been quarantined
		case <-retryC:
		case now := <-control.C:
			c.control(now, ms)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// emit hands o to out's reader.
func (c *Coordinator) emit(ctx context.Context, o Output) error {
	select {
	case c.out <- o:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// demandNow is the job's demand as its controller last measured it: its
// input stall, and its trainer's GPU seconds per sample (0: unknown).
func (c *Coordinator) demandNow() lease.Demand {
	if d := c.ctl.demand.Load(); d != nil {
		return *d
	}
	return lease.Demand{}
}
