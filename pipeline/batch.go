package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/source"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// SampleError reports a sample that could not be made (batch.SampleError).
// Name and Reason are at most MaxSampleErrorText bytes each (cut, and
// marked so): names come from outside input (a store's keys, a manifest's
// strings), and a batch carries up to one per sample.
type SampleError = batch.SampleError

// MaxSampleErrorText bounds a SampleError's Name and its Reason, each.
const MaxSampleErrorText = 1024

// FailPolicy says what takes a failed sample's place in its batch.
type FailPolicy int

const (
	// PadFromBatch fills a failed sample's slot with a copy of one of the
	// batch's good samples (pixels, label and index), so the batch keeps its
	// size. The failure is listed in Batch.Errors either way.
	PadFromBatch FailPolicy = iota
	// Drop leaves failed samples out: the batch is smaller.
	Drop
)

// Batch is samples packed back to back (batch.Batch): Data holds N
// samples of Transform.SampleBytes() each, in the transform's layout; of a
// transform of several views, view after view, each view's N samples back
// to back (Transform.ViewLayout).
type Batch = batch.Batch

// resetBatch sizes b for n samples of size bytes each, reusing its
// buffers; placed (FillAt), its Data is the whole batch's and stays as it
// is.
func resetBatch(b *Batch, n, size int, placed bool) {
	b.N = n
	if !placed {
		if cap(b.Data) < n*size {
			b.Data = make([]byte, n*size)
		}
		b.Data = b.Data[:n*size]
	}
	b.Labels = slices.Grow(b.Labels[:0], n)[:n]
	b.Indices = slices.Grow(b.Indices[:0], n)[:n]
	b.Errors = b.Errors[:0]
	b.Times = batch.StageTimes{}
	if b.Trace {
		b.Traces = slices.Grow(b.Traces[:0], n)[:n]
		for i := range b.Traces {
			b.Traces[i] = b.Traces[i][:0]
		}
	} else {
		b.Traces = b.Traces[:0]
	}
	b.SetFields(b.FieldSet, n)
}

// Executor decodes and transforms samples on a fixed pool of goroutines,
// each with its own Decoder and read buffer. It serves any number of
// concurrent Fill calls, for any datasets, from any number of jobs: each job
// fills its batches through its own Queue (Executor.Queue), and the workers
// take samples from the queues by the Executor's Schedule (see queue.go).
// Executor.Fill fills through the default queue, Queue(""). Close stops it.
type Executor struct {
	mu sync.Mutex
	// work is where idle workers wait for samples (L is &mu).
	work   sync.Cond
	sched  Schedule
	stages StageObserver // nil: none
	// cpu is the per-thread clock samples are charged by (WithCPUClock);
	// nil: one cpuUnit a sample.
	cpu CPUClock
	// closed: no more Fills; the workers leave once the queues are empty.
	closed bool
	// queues are the open queues by name.
	queues map[string]*Queue
	// active are the queues with samples not yet started: the workers
	// choose among these alone, so a scan costs O(jobs with work).
	active []*Queue
	// vnow is the weighted schedule's virtual time, one per class
	// (foreground, background: Queue.SetBackground): the start tag of the
	// class's sample taken last, the smallest of its active queues' tags
	// then. The classes keep apart clocks, so that a background queue run
	// while the foreground ones were empty moves no foreground clock.
	vnow [2]float64
	// seq numbers Fill calls in arrival order (ScheduleFIFO, ties).
	seq uint64
	// sleeping counts the workers waiting on work that no one has
	// signalled yet: a Fill wakes at most that many, and no more than it
	// has samples for.
	sleeping int
	wg       sync.WaitGroup
	workers  int
	// cur is the request each worker is making a sample of (nil: none),
	// under mu: Queue.Close abandons its queue's.
	cur []*fillReq
	// curAt is the position in its request of the sample each worker is
	// making (cur's), under mu: a Fill abandoned names it (abandonedIn).
	curAt []int
	// heavyRunning counts the workers making a heavy queue's sample
	// (heavyLimit), under mu.
	heavyRunning int
	// asleep is each worker's Decoder while it sleeps (nil: awake), under
	// mu; trimGen counts the queues closed, for their scratch (trimIdle).
	asleep  []*Decoder
	trimGen uint64
	// abandoned counts samples told to stop while running; returned,
	// those of them whose worker came back from them (Abandoned).
	abandoned, returned atomic.Int64
	// made counts the samples made, of every queue: a batch's progress
	// while it waits for a worker (batch.Progress.Queued).
	made atomic.Uint64
	// cpuUsed is the CPU time of every sample made, as the CPUClock read
	// it, in ns; idle is the wall time the workers slept with no sample
	// to take, in ns (Capacity).
	cpuUsed, idle atomic.Int64
}

// Capacity is what the workers have given out since the Executor
// started: cpu, the CPU time their samples took (as its CPUClock read it;
// 0 without one), of every queue, closed ones too; and idle, the wall
// time they slept with no sample to take (summed over the workers). Time
// the host gave a worker's thread to other work while it had a sample is
// in neither: cpu + idle is the workers' time as the executor's load
// alone would have left it, so a queue's samples per second of it is its
// rate whatever else the host runs (the thread CPU clock counts only the
// time the thread ran). What the idle part counts is still wall time:
// a worker woken on a loaded host is counted idle until it runs.
func (e *Executor) Capacity() (cpu, idle time.Duration) {
	return time.Duration(e.cpuUsed.Load()), time.Duration(e.idle.Load())
}

// Running is how many samples the workers are making now.
func (e *Executor) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, r := range e.cur {
		if r != nil {
			n++
		}
	}
	return n
}

// Abandoned is how many samples were told to stop while a worker was on
// them (their Fill's ctx ended or their queue closed), and how many of
// those the workers have come back from: equal when no core works on for
// a batch no one waits for.
func (e *Executor) Abandoned() (told, returned int64) {
	return e.abandoned.Load(), e.returned.Load()
}

// ErrClosed is returned by Fill on a closed Executor or Queue, and by a Fill
// whose queue was closed while its samples waited.
var ErrClosed = errors.New("pipeline: executor closed")

// NewExecutor starts workers goroutines, each with a Decoder made with opts;
// WithSchedule sets how they choose among queues (default
// ScheduleWeighted).
//
// There is no fixed-depth sample queue: a Fill queues its whole batch in
// one step (O(1), however large the batch) and sleeps until the batch is
// done, so it is woken once per batch, not per sample (a cross-thread
// wake-up each; with the old 4-deep channel that was 7% of a core on one
// worker). A Fill wakes only as many sleeping workers as it has samples;
// a worker that finishes a sample takes the next without sleeping while
// any queue has one. What is queued is bounded by the callers' Fills in
// flight, whose batches are already allocated.
func NewExecutor(workers int, opts ...Option) *Executor {
	workers = max(workers, 1)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	e := &Executor{workers: workers, sched: o.schedule, queues: map[string]*Queue{}, stages: o.stages, cur: make([]*fillReq, workers), curAt: make([]int, workers), asleep: make([]*Decoder, workers), cpu: o.cpu}
	e.work.L = &e.mu
	for w := range workers {
		e.wg.Add(1)
		go e.run(NewDecoder(opts...), w)
	}
	return e
}

// Workers is the pool's size.
func (e *Executor) Workers() int { return e.workers }

// Schedule is how the workers choose among queues.
func (e *Executor) Schedule() Schedule { return e.sched }

// Close refuses new Fills (ErrClosed) and stops the workers once the samples
// already queued are done; it returns when they have stopped.
func (e *Executor) Close() {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		e.sleeping = 0
		e.work.Broadcast()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// Fill makes the batch of ds's samples at indices for (seed, epoch) into b,
// reusing b's buffers, through the default queue (Queue("")): see
// Queue.Fill.
func (e *Executor) Fill(ctx context.Context, ds dataset.Dataset, t *transform.Transform, seed, epoch uint64, indices []int64, policy FailPolicy, b *Batch) error {
	return e.Queue("").Fill(ctx, ds, t, seed, epoch, indices, policy, b)
}

// finishBatch lists r's failed samples in b.Errors and replaces them by
// policy, each sample's pixels where r put them (fillReq.at). Only a
// sample's own fault is replaced: when any sample failed by its store's
// fault (source.IsStoreFault: the store unreachable, throttling or timing
// out past its retries, credentials refused), the batch fails with that
// error instead, however many of its samples were made (from the byte
// cache, say), and b is not a batch. A batch whose every sample failed has
// N == 0 under either policy: the caller must not hand it on as data (the
// server ends the job, naming the cause).
func finishBatch(r *fillReq, policy FailPolicy, b *Batch) error {
	failed := 0
	for _, err := range r.errs {
		if err != nil {
			failed++
		}
	}
	if failed == 0 {
		return nil
	}
	if err := storeFault(r); err != nil {
		return err
	}
	ds, indices, l := r.ds, r.indices, r.layout
	slots := len(b.Data) / r.size // the buffer's samples: the batch's, or the whole batch's (placed)
	move := func(to, from int) { l.CopySample(b.Data, slots, r.at(to), b.Data, slots, r.at(from)) }
	good := r.good[:0]
	for i, err := range r.errs {
		if err == nil {
			good = append(good, i)
			continue
		}
		b.Errors = append(b.Errors, SampleError{Index: indices[i], Name: errs.Clip(ds.Name(int(indices[i])), MaxSampleErrorText),
			Reason: errs.Clip(err.Error(), MaxSampleErrorText), Err: err})
	}
	r.good = good
	placed := r.place != nil
	if len(good) == 0 {
		b.N, b.Labels, b.Indices = 0, b.Labels[:0], b.Indices[:0]
		if !placed {
			b.Data = b.Data[:0]
		}
		b.Traces = b.Traces[:0]
		b.Fields = b.Fields[:0]
		return nil
	}
	if policy == Drop {
		for n, i := range good {
			if n != i {
				move(n, i)
			}
			b.Labels[n], b.Indices[n] = b.Labels[i], b.Indices[i]
			if b.Trace {
				b.Traces[n], b.Traces[i] = b.Traces[i], b.Traces[n]
			}
			b.SwapFields(n, i)
		}
		n := len(good)
		b.N, b.Labels, b.Indices = n, b.Labels[:n], b.Indices[:n]
		if !placed {
			l.Repack(b.Data, slots, n)
			b.Data = b.Data[:n*r.size]
		}
		if b.Trace {
			b.Traces = b.Traces[:n]
		}
		b.Fields = b.Fields[:n*fieldCount(b)]
		return nil
	}
	k := 0
	for i, err := range r.errs {
		if err == nil {
			continue
		}
		g := good[k%len(good)]
		k++
		move(i, g)
		b.Labels[i], b.Indices[i] = b.Labels[g], b.Indices[g]
		if b.Trace {
			b.Traces[i] = append(b.Traces[i][:0], b.Traces[g]...)
		}
		b.CopyFields(i, g)
	}
	return nil
}

// storeFault is the error of a batch some of whose samples failed by
// their store's fault, wrapping the first one's error (which wraps
// source.ErrUnavailable or source.ErrDenied); nil when none did.
func storeFault(r *fillReq) error {
	first, n := -1, 0
	for i, err := range r.errs {
		if err != nil && source.IsStoreFault(err) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if first < 0 {
		return nil
	}
	idx := r.indices[first]
	return fmt.Errorf("%d of the batch's %d samples could not be read from their store (not a fault of the files: none is padded or dropped), sample %d (%s) first: %w",
		n, len(r.indices), idx, r.ds.Name(int(idx)), r.errs[first])
}

// IsBadInput reports whether err is about the input (a bad file or request)
// rather than the machine.
func IsBadInput(err error) bool {
	return errors.Is(err, errs.Corrupt) || errors.Is(err, errs.TooLarge) || errors.Is(err, errs.Unsupported)
}

// Field is one sample's value of one field (batch.Field).
type Field = batch.Field

// fieldCount is how many fields b asks for.
func fieldCount(b *Batch) int { return batch.FieldCount(b.FieldSet) }
