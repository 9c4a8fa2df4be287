package server

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// The coordinator's errors. It knows nothing of gRPC: errors.go maps them
// to status codes.
var (
	// errNoMaker ends a job every maker refused (an unknown dataset,
	// another fingerprint, a spec it cannot make): asking again gets the
	// same answers, which the error lists.
	errNoMaker = errors.New("no maker can make this job")
	// errBatchFailed ends a job one of whose batches failed on makers
	// maxAttempts times; it wraps the last maker's error.
	errBatchFailed = errors.New("a batch failed on every try")
	// errNoMakerReady ends a job no maker could take batches of for
	// noMakerLeaseTimeouts lease timeouts (every peer refusing the
	// connection, none connected, the local executor off): a trainer is
	// told why instead of waiting forever.
	errNoMakerReady = errors.New("no maker is ready")
)

// noMakerLeaseTimeouts is how many lease timeouts a job waits for a maker
// to become ready before it fails with errNoMakerReady: long enough for a
// restarted worker to come back (its peer reconnects within 5 s), short
// enough that a trainer learns of a configuration that cannot work.
const noMakerLeaseTimeouts = 3

// A whyNot maker can say why it is not ready (a peer: its last connection
// or handshake error).
type whyNot interface {
	Unavailable() error
}

// maxAttempts bounds how often one batch is leased before the job fails
// with the last maker error: enough for several peers dying in a row.
const maxAttempts = 8

// telemetryWindow is how far back the stall ratio and rates look: long
// enough to span a few of a slow trainer's steps, short enough that the
// controller follows a change within a few seconds.
const telemetryWindow = 3 * time.Second

// controlEvery is how often the window controller decides.
const controlEvery = 500 * time.Millisecond

// coordConfig is what a coordinator is configured by (from Config).
type coordConfig struct {
	Window       int // 0: automatic
	LeaseTimeout time.Duration
	StallTarget  float64
	// AdviseWindow is how long a lower recommendation must hold before it
	// is published; MaxRecommended bounds it.
	AdviseWindow   time.Duration
	MaxRecommended int
}

// coordEnv is what a server's coordinators share: the makers, the memory
// budget, the metrics, the GPU signal and the settings. It is all a
// coordinator knows of the server.
type coordEnv struct {
	cfg     coordConfig
	makers  *makers
	budget  *budget
	m       *metrics
	gpuIdle func() (idle float64, ok bool)
	verify  *verifier
}

// streamSpec is what one stream asks of a job: where it starts, how many
// epochs it runs, how batches are ordered.
type streamSpec struct {
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

// output is the coordinator's next item for its trainer, in order: an
// epoch's JobInfo, its batches (in batch-number order, or as ready), its
// EpochEnd; then the next epoch. A batch's buffer goes back with recycle
// once it has been sent.
type output struct {
	info  *stokerv1.JobInfo  // an epoch starts
	end   *stokerv1.EpochEnd // an epoch ends
	epoch uint64
	k     int
	b     *pipeline.Batch // batch k of epoch
	// slot is the ring slot b's pixels were made in, when inSlot.
	slot   uint32
	inSlot bool
}

// coordinator runs one job for one stream: it owns the epoch plans, the
// lease table (batch → maker, deadline), the batches delivered, the reorder
// buffer and the window. It asks makers for batches and hands its output,
// in order (or as ready) and as credits allow, to whoever reads out: the
// Feed stream's send loop, which may take its time to send without holding
// up leasing, collecting or the controller. It knows nothing of gRPC.
//
// The files: coordinator.go (the type, its loop), deliver.go (epochs,
// reorder, delivery), lease.go (leases, choosing makers, results),
// makerstats.go (what the job measured of each maker), control.go (the
// window controller and the advisor's inputs).
type coordinator struct {
	env  *coordEnv
	j    *job
	st   streamSpec
	log  *slog.Logger
	name string // the job's name in metrics and Status: dataset-rRANK-STREAM
	mem  *streamMemory

	credits atomic.Int64
	granted chan struct{} // size 1: "credits changed"
	// starvedSince is when a ready batch began waiting for a credit (Unix
	// ns), 0 when none waits: the idle watchdog reads it. starved adds up
	// the time spent so, for the window controller.
	starvedSince atomic.Int64
	starved      time.Duration
	lastStarved  time.Duration // starved at the controller's last decision

	out      chan output
	recycled chan *pipeline.Batch // buffers back from out's reader

	// Owned by run's goroutine.
	results  chan result
	leases   map[batchID]*leaseRec
	retry    []batchID // failed leases, lowest first
	attempts map[batchID]int
	ready    map[batchID]*pipeline.Batch
	// unchecked: ready batches made by a peer and not compared byte for
	// byte, by maker: made again if it is quarantined before they go out.
	unchecked map[batchID]maker
	free      []*pipeline.Batch
	buffers   int // allocated
	// ring is the stream's shared memory, nil when it has none: batches are
	// made in its slots (inslot.go). bufs is what is kept of buffers in a
	// slot or with memory of their own; counted is how many of those have
	// memory of their own counted, outOfRing how many are out of the free
	// list, not in a slot.
	ring      *ring
	bufs      map[*pipeline.Batch]*bufState
	counted   int
	outOfRing int
	stats     map[maker]*makerStat
	leaseID   uint64
	cur       *epochState // being delivered
	nextE     *epochState // the next epoch, once leasing reached it
	cursor    batchID     // the next batch to lease, after retries
	leasing   bool        // cursor is valid: batches remain to lease
	lastWarn  time.Time
	// noMakerSince is when the job last found no ready maker it could
	// use, zero while it has one.
	noMakerSince time.Time
	// refused: the makers' refusals, for the job's error when all refuse.
	refused map[maker]error

	// The window controller's: the job's window now (0 until the first
	// lease sets it), the trainer's measurements, and the last status.
	win int
	tel *telemetry
	// recommended is the advisor's last count of makers the trainer needs
	// (NaN before it has one): the window is not narrowed below it.
	recommended float64
	estimates   medianFilter // the advisor's figures, smoothed
	advised     stabilizer   // what is published of them
	status      atomic.Pointer[stokerv1.JobStatus]
	demand      atomic.Pointer[pipeline.JobDemand]
}

// outputSlack is out's room beyond one item per buffer: the epoch markers
// between them.
const outputSlack = 8

// newCoordinator makes the coordinator of job j for a stream st named by
// id, its buffers paid from mem.
func newCoordinator(env *coordEnv, j *job, st streamSpec, id string, mem *streamMemory, log *slog.Logger) *coordinator {
	c := &coordinator{
		env: env, j: j, st: st, log: log, mem: mem,
		name:      j.name + "-r" + strconv.Itoa(j.rank) + "-" + id,
		granted:   make(chan struct{}, 1),
		out:       make(chan output, 2*maxWindow+outputSlack),
		recycled:  make(chan *pipeline.Batch, 2*maxWindow+outputSlack),
		leases:    make(map[batchID]*leaseRec),
		attempts:  make(map[batchID]int),
		ready:     make(map[batchID]*pipeline.Batch),
		unchecked: make(map[batchID]maker),
		bufs:      make(map[*pipeline.Batch]*bufState),
		stats:     make(map[maker]*makerStat),
		refused:   make(map[maker]error),
		tel:       newTelemetry(telemetryWindow, time.Now()),
		advised:   stabilizer{window: env.cfg.AdviseWindow, max: float64(env.cfg.MaxRecommended)},
		estimates: medianFilter{window: adviceSmoothing},
	}
	j.id = c.name
	c.credits.Store(st.Credits)
	return c
}

// Grant gives the stream n more credits. Safe from any goroutine.
func (c *coordinator) Grant(n uint32) {
	c.credits.Add(int64(n))
	select {
	case c.granted <- struct{}{}:
	default:
	}
}

// recycle gives back a batch buffer that out's reader is done with. Safe
// from any goroutine; never blocks (recycled has room for every buffer).
func (c *coordinator) recycle(b *pipeline.Batch) {
	select {
	case c.recycled <- b:
	default:
	}
}

// run runs the job until its last epoch is handed to out, or ctx ends (its
// cause is returned). It closes out when it returns.
func (c *coordinator) run(ctx context.Context) error {
	defer close(c.out)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // the makers' calls return promptly once ctx ends
		ms, _ := c.env.makers.snapshot()
		for _, m := range ms {
			m.Forget(c.j) // the local executor drops the job's queued samples at once
		}
	}()
	// Results never block a maker's goroutine: at most one per buffer, and
	// buffers are at most twice the largest window.
	c.results = make(chan result, 2*maxWindow)

	c.cur = c.newEpoch(c.st.Epoch)
	if err := c.emit(ctx, output{info: c.j.info(c.cur.epoch, c.cur.plan)}); err != nil {
		return err
	}
	c.cursor, c.leasing = batchID{c.cur.epoch, c.cur.next}, true
	c.advanceCursor()
	control := time.NewTicker(controlEvery)
	defer control.Stop()
	defer c.dropMetrics()
	var retryTimer *time.Timer
	for {
		done, err := c.deliver(ctx)
		if err != nil || done {
			return err
		}
		ms, changed := c.env.makers.snapshot()
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
		case b := <-c.recycled:
			c.takeBack(b)
		case <-c.granted:
		case <-changed:
			c.dropUnchecked() // a peer may have been quarantined
		case <-retryC:
		case now := <-control.C:
			c.control(now, ms)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// emit hands o to out's reader.
func (c *coordinator) emit(ctx context.Context, o output) error {
	select {
	case c.out <- o:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
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
