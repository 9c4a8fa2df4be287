package coord

import (
	"context"
	"errors"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline/batch"
)

// The coordinator's errors. It knows nothing of gRPC: its server maps
// them to status codes.
var (
	// ErrNoMaker ends a job every maker refused (an unknown dataset,
	// another fingerprint, a spec it cannot make): asking again gets the
	// same answers, which the error lists.
	ErrNoMaker = errors.New("no maker can make this job")
	// ErrBatchFailed ends a job one of whose batches failed on makers
	// maxAttempts times; it wraps the last maker's error.
	ErrBatchFailed = errors.New("a batch failed on every try")
	// ErrNoMakerReady ends a job no maker could take batches of for
	// noMakerLeaseTimeouts lease timeouts (every peer refusing the
	// connection, none connected, the local executor off): a trainer is
	// told why instead of waiting forever.
	ErrNoMakerReady = errors.New("no maker is ready")
	// ErrMismatch marks a peer's batch that is not what the plan and the
	// dataset say it must be (the Verifier's finding): the peer is
	// quarantined and the batch made again.
	ErrMismatch = errors.New("peer batch does not match")
)

// Config is what a coordinator is configured by.
type Config struct {
	// Window is how many leases a job has in flight; 0: automatic (two
	// per ready maker to start, between 1 and four per ready maker).
	Window int
	// LeaseTimeout is how long a maker may go without progress on a
	// batch (watchdog.go).
	LeaseTimeout time.Duration
	// StallTarget is the starvation the window controller aims under.
	StallTarget float64
	// AdviseWindow is how long a lower recommendation must hold before it
	// is published; MaxRecommended bounds it.
	AdviseWindow   time.Duration
	MaxRecommended int
	// Affinity leases each batch in parts, each sample to its home maker
	// (router.go, parts.go), so that the makers' caches hold disjoint shares of
	// the dataset.
	Affinity bool
	// Workers is the local executor's goroutines (0: none), as a verdict
	// names them ("decode-bound on 3 local cores").
	Workers int
}

// Env is what a server's coordinators share, and all a coordinator knows
// of its server: the settings, the makers, the metrics, the GPU signal and
// the verifier of peers' batches. Each stream brings its own memory and
// ring (Stream). Time is the clock's (time.Now, timers): tests run a
// coordinator inside a testing/synctest bubble, whose clock is fake.
type Env struct {
	Config  Config
	Makers  *Makers
	Metrics *Metrics
	// GPUIdle is the trainer's GPUs' idle share, and whether it is known
	// (NVML); it must not block.
	GPUIdle  func() (idle float64, ok bool)
	Verifier Verifier
}

// Job is what a coordinator knows of its job: the plan of each epoch and
// the size of a batch. The server makes it from a validated JobSpec, and
// its makers know it by this interface's value.
type Job interface {
	// Dataset is the dataset's name, as metrics label it.
	Dataset() string
	Rank() int
	World() int
	BatchSize() int
	// SampleBytes is one sample's size; BatchBytes a whole batch's.
	SampleBytes() int
	BatchBytes() int64
	// Pads reports whether the fail policy pads a batch's failed samples
	// from its good ones (a batch is then whole or empty).
	Pads() bool
	// Shuffle says how its epochs are ordered, as Status shows it.
	Shuffle() string
	// Plan is the plan of epoch, after consumed positions (elastic
	// resume; 0 normally).
	Plan(epoch, consumed uint64) Plan
}

// Plan is one rank's share of one epoch, cut into batches.
type Plan interface {
	Batches() int
	// Samples is the rank's samples in the epoch.
	Samples() int
	// Batch is batch k's sample indices.
	Batch(k int) []int64
}

// CopyPlan is a Plan of repeated augmentation: each sample several times
// an epoch, each copy its own draw.
type CopyPlan interface {
	Plan
	// Copies is which copy of its sample each of batch k's indices is;
	// nil when the plan repeats no sample.
	Copies(k int) []uint32
}

// Verifier checks peers' batches and keeps the quarantine of the peers
// whose batches did not match (their errors wrap ErrMismatch).
type Verifier interface {
	// Pick chooses the slots (places in the batch, 0..n-1, pad copies
	// included) of a lease of n samples (of a batch of batch: a part of
	// one counts as its share) to peer m that its batch will be compared
	// by, byte for byte (lease.Lease.Keep).
	Pick(m Maker, n, batch int) []int
	// Verify checks a peer's batch b for lease l of job j, kept the
	// pixels of l.Keep's slots as the peer answered them (Made.Kept);
	// checked reports whether every sample was compared byte for byte.
	Verify(ctx context.Context, j Job, l *lease.Lease, b *batch.Batch, kept [][]byte) (checked bool, err error)
	// Quarantine takes m out of every job's makers, for reason.
	Quarantine(m Maker, reason error)
	// Why is m's quarantine's reason; nil when it is not quarantined.
	Why(m Maker) error
}

// Memory is what one stream holds of the server's memory budget.
type Memory interface {
	// Try takes n bytes if they fit now.
	Try(n int64) bool
	// Release gives n of them back.
	Release(n int64)
}

// Ring is a stream's shared-memory ring as the coordinator's buffer pool
// sees it: slots its batches are made in, or copied into as they go out,
// and each slot's state (free, taken to be filled, lent to the trainer).
// Safe for concurrent use: the pool takes and gives back slots on the
// coordinator's goroutine and lends them on Out's reader's (Place); the
// stream's receiver releases them (Released).
type Ring interface {
	// Available is how many slots are free.
	Available() int
	// Take takes a free slot, to fill; false when none is free.
	Take() (uint32, bool)
	// Slot is slot i's memory.
	Slot(i uint32) []byte
	// GiveBack frees a slot taken and not sent.
	GiveBack(i uint32)
	// Lend marks slot i, taken, as sent: the trainer holds it until it
	// releases it.
	Lend(i uint32)
	// Release frees the slots the trainer released. One out of range or
	// not sent is the trainer's protocol error; the slots before it are
	// freed.
	Release(ids []uint32) error
}
