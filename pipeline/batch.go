package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/stoker-dev/stoker/pipeline/source"
)

// SampleError reports a sample that could not be made.
type SampleError struct {
	Index  int64  // dataset index of the sample
	Name   string // its file, relative to the dataset root
	Reason string
	Err    error // wraps ErrCorrupt, ErrTooLarge or ErrUnsupported (or an I/O error)
}

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

// Batch is samples packed back to back: Data holds N samples of
// Transform.SampleBytes() each, in the transform's layout.
type Batch struct {
	N       int
	Data    []byte
	Labels  []int64
	Indices []int64
	Errors  []SampleError
	// Times is where making the batch took its time, by stage, on an
	// Executor that times its stages; a peer's batch carries what its
	// worker reported. Zero when not timed.
	Times StageTimes
	// Trace asks Fill for each sample's trace (what its ops drew, as JSON:
	// Decoder.AppendTrace) in Traces, in batch order; a failed sample's is
	// empty, and a sample padded in its place carries the trace of the
	// sample it copies. Traces' buffers are reused.
	Trace  bool
	Traces [][]byte
	// FieldSet asks Fill for each sample's fields (FieldSet.Names) in
	// Fields, sample by sample in batch order: sample i's field f is
	// Fields[i*FieldSet.Len()+f]. A failed sample's are empty, and a
	// sample padded in its place carries the fields of the sample it
	// copies. Fields' buffers are reused.
	FieldSet *FieldSet
	Fields   []Field
}

// SampleFields is sample i's fields, in FieldSet's order.
func (b *Batch) SampleFields(i int) []Field {
	n := b.FieldSet.Len()
	return b.Fields[i*n : (i+1)*n]
}

// FieldBytes is what the batch's fields hold, in all.
func (b *Batch) FieldBytes() int64 {
	var n int64
	for i := range b.Fields {
		n += int64(len(b.Fields[i].Data))
	}
	return n
}

// SetFields sizes b.Fields for n samples of fs's fields, each none, their
// buffers kept: how a batch made in parts or on a peer is filled in.
func (b *Batch) SetFields(fs *FieldSet, n int) {
	b.FieldSet = fs
	k := n * fs.Len()
	b.Fields = slices.Grow(b.Fields[:0], k)[:k]
	for i := range b.Fields {
		b.Fields[i].Data, b.Fields[i].Has = b.Fields[i].Data[:0], false
	}
}

// swapFields swaps samples a's and c's fields (buffers and all).
func (b *Batch) swapFields(a, c int) {
	n := b.FieldSet.Len()
	for f := range n {
		b.Fields[a*n+f], b.Fields[c*n+f] = b.Fields[c*n+f], b.Fields[a*n+f]
	}
}

// copyFields copies sample src's fields into sample dst's buffers.
func (b *Batch) copyFields(dst, src int) {
	n := b.FieldSet.Len()
	for f := range n {
		d, s := &b.Fields[dst*n+f], &b.Fields[src*n+f]
		d.Data, d.Has = append(d.Data[:0], s.Data...), s.Has
	}
}

// reset sizes b for n samples of size bytes each, reusing its buffers;
// placed (FillAt), its Data is the whole batch's and stays as it is.
func (b *Batch) reset(n, size int, placed bool) {
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
	b.Times = StageTimes{}
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
	e := &Executor{workers: workers, sched: o.schedule, queues: map[string]*Queue{}, stages: o.stages}
	e.work.L = &e.mu
	for range workers {
		e.wg.Add(1)
		go e.run(NewDecoder(opts...))
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
func (e *Executor) Fill(ctx context.Context, ds Dataset, t *Transform, seed, epoch uint64, indices []int64, policy FailPolicy, b *Batch) error {
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
	ds, indices, size := r.ds, r.indices, r.size
	pix := func(i int) []byte { at := r.at(i); return b.Data[at*size : (at+1)*size] }
	good := r.good[:0]
	for i, err := range r.errs {
		if err == nil {
			good = append(good, i)
			continue
		}
		b.Errors = append(b.Errors, SampleError{Index: indices[i], Name: ds.Name(int(indices[i])), Reason: err.Error(), Err: err})
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
			copy(pix(n), pix(i))
			b.Labels[n], b.Indices[n] = b.Labels[i], b.Indices[i]
			if b.Trace {
				b.Traces[n], b.Traces[i] = b.Traces[i], b.Traces[n]
			}
			b.swapFields(n, i)
		}
		n := len(good)
		b.N, b.Labels, b.Indices = n, b.Labels[:n], b.Indices[:n]
		if !placed {
			b.Data = b.Data[:n*size]
		}
		if b.Trace {
			b.Traces = b.Traces[:n]
		}
		b.Fields = b.Fields[:n*b.FieldSet.Len()]
		return nil
	}
	k := 0
	for i, err := range r.errs {
		if err == nil {
			continue
		}
		g := good[k%len(good)]
		k++
		copy(pix(i), pix(g))
		b.Labels[i], b.Indices[i] = b.Labels[g], b.Indices[g]
		if b.Trace {
			b.Traces[i] = append(b.Traces[i][:0], b.Traces[g]...)
		}
		b.copyFields(i, g)
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
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrUnsupported)
}
