package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
}

// reset sizes b for n samples of size bytes each, reusing its buffers.
func (b *Batch) reset(n, size int) {
	b.N = n
	if cap(b.Data) < n*size {
		b.Data = make([]byte, n*size)
	}
	b.Data = b.Data[:n*size]
	b.Labels = slices.Grow(b.Labels[:0], n)[:n]
	b.Indices = slices.Grow(b.Indices[:0], n)[:n]
	b.Errors = b.Errors[:0]
}

// Executor decodes and transforms samples on a fixed pool of goroutines,
// each with its own Decoder and read buffer. It serves any number of
// concurrent Fill calls, for any datasets; Close stops it.
type Executor struct {
	tasks   chan task
	wg      sync.WaitGroup
	workers int
	// mu guards closed: Fill holds it shared while it queues tasks, so Close
	// never closes the channel under a sender.
	mu     sync.RWMutex
	closed bool
}

// ErrClosed is returned by Fill on a closed Executor.
var ErrClosed = errors.New("pipeline: executor closed")

type task struct {
	ds  Dataset
	t   *Transform
	key Key
	out []byte
	err *error
	wg  *sync.WaitGroup
}

// taskQueue is the sample queue's depth beyond 4 per worker: deep enough that
// a Fill queues a whole batch and sleeps until it is done, instead of being
// woken for every sample (a cross-thread wake-up each: measured 7% of a core
// with a 4-deep queue on one worker).
const taskQueue = 256

// NewExecutor starts workers goroutines, each with a Decoder made with opts.
func NewExecutor(workers int, opts ...Option) *Executor {
	workers = max(workers, 1)
	e := &Executor{tasks: make(chan task, taskQueue+4*workers), workers: workers}
	for range workers {
		e.wg.Add(1)
		go e.work(NewDecoder(opts...))
	}
	return e
}

// Workers is the pool's size.
func (e *Executor) Workers() int { return e.workers }

// Close stops the workers after the queued samples are done.
func (e *Executor) Close() {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.tasks)
	}
	e.mu.Unlock()
	e.wg.Wait()
}

func (e *Executor) work(d *Decoder) {
	defer e.wg.Done()
	defer d.Close()
	var buf []byte
	for tk := range e.tasks {
		data, err := tk.ds.Read(int(tk.key.Index), buf)
		if err == nil {
			buf = data
			err = d.Decode(data, tk.t, tk.key, tk.out)
		}
		*tk.err = err
		tk.wg.Done()
	}
}

// Fill makes the batch of ds's samples at indices for (seed, epoch) into b,
// reusing b's buffers. Samples that fail are listed in b.Errors and replaced
// by policy; Fill itself fails only when ctx ends, an index is out of range
// or the Executor is closed. A batch whose every sample failed has N == 0 under either policy.
func (e *Executor) Fill(ctx context.Context, ds Dataset, t *Transform, seed, epoch uint64, indices []int64, policy FailPolicy, b *Batch) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return ErrClosed
	}
	size := t.SampleBytes()
	b.reset(len(indices), size)
	errs := make([]error, len(indices))
	var wg sync.WaitGroup
	for i, idx := range indices {
		if idx < 0 || idx >= int64(ds.Len()) {
			wg.Wait()
			return fmt.Errorf("%w: sample index %d out of range [0, %d)", ErrUnsupported, idx, ds.Len())
		}
		b.Indices[i], b.Labels[i] = idx, ds.Label(int(idx))
		wg.Add(1)
		select {
		case e.tasks <- task{ds: ds, t: t, key: Key{seed, epoch, uint64(idx)}, out: b.Data[i*size : (i+1)*size], err: &errs[i], wg: &wg}:
		case <-ctx.Done():
			wg.Done()
			wg.Wait()
			return ctx.Err()
		}
	}
	wg.Wait()
	var good []int
	for i, err := range errs {
		if err == nil {
			good = append(good, i)
			continue
		}
		b.Errors = append(b.Errors, SampleError{Index: indices[i], Name: ds.Name(int(indices[i])), Reason: err.Error(), Err: err})
	}
	if len(b.Errors) == 0 {
		return nil
	}
	if len(good) == 0 {
		b.N, b.Data, b.Labels, b.Indices = 0, b.Data[:0], b.Labels[:0], b.Indices[:0]
		return nil
	}
	if policy == Drop {
		for n, i := range good {
			copy(b.Data[n*size:(n+1)*size], b.Data[i*size:(i+1)*size])
			b.Labels[n], b.Indices[n] = b.Labels[i], b.Indices[i]
		}
		n := len(good)
		b.N, b.Data, b.Labels, b.Indices = n, b.Data[:n*size], b.Labels[:n], b.Indices[:n]
		return nil
	}
	k := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		g := good[k%len(good)]
		k++
		copy(b.Data[i*size:(i+1)*size], b.Data[g*size:(g+1)*size])
		b.Labels[i], b.Indices[i] = b.Labels[g], b.Indices[g]
	}
	return nil
}

// IsBadInput reports whether err is about the input (a bad file or request)
// rather than the machine.
func IsBadInput(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge) || errors.Is(err, ErrUnsupported)
}
