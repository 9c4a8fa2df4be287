package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// A Fill: its batch's samples queued as one request, taken in index
// order by the workers, and the Fill's wait for them (the workers'
// reservations in the memory budget under that wait: scratch.go).

// fillReq is one Fill's batch: its samples are taken in index order, and
// the Fill sleeps on done until every one taken is made.
type fillReq struct {
	q          *Queue
	prev, next *fillReq // in q's list, while it has samples not started
	seq        uint64

	ds          dataset.Dataset
	t           *transform.Transform
	seed, epoch uint64
	indices     []int64
	data        []byte
	size        int                  // a sample's bytes: data holds len(data)/size samples
	layout      transform.ViewLayout // where each sample's views lie in data
	copies      []uint32             // Batch.Copies: each sample's copy; nil: all 0
	fset        *dataset.FieldSet    // the fields the batch asks for (Batch.FieldSet), else nil
	fields      []Field              // Batch.Fields: sample i's are fields[i*fset.Len():]
	place       []int                // FillAt's: where each sample goes in data, in samples; nil: in order
	errs        []error              // per sample, written by the worker that made it
	traces      [][]byte             // per sample when the batch asks for traces (Batch.Traces), else nil
	good        []int                // finishBatch's scratch
	taken       int                  // samples given to workers (or dropped): the next is indices[taken]
	running     int                  // of those, the ones being made now
	dropped     error                // why samples were dropped: ctx.Err() or ErrClosed
	done        chan struct{}
	queued      time.Time        // when Fill queued it, with a StageObserver
	times       batch.StageTimes // its samples' stage times, summed (under e.mu)

	// stop is set (atomically) when the samples running are abandoned:
	// the kernels they run poll it (opScratch.Stop) and return.
	stop *int32
	// progress is told of its work (batch.ProgressOf the Fill's ctx;
	// nil: no one asks).
	progress *batch.Progress
	// ctx is the Fill's; wait, the context a sample waits under for its
	// scratch (reserveScratch): ctx's, ended too when r is abandoned.
	ctx  context.Context
	wait waitCtx
}

// waitCtx is the context a sample of a fillReq waits under for the
// memory budget (reserveScratch): its Fill's context (the job's or the
// stream's), ended too when the request is abandoned (its queue closed,
// Executor.abandon), so a closed job stops waiting at once. Its own
// context is made only when a wait asks for Done (the budget had not the
// bytes at once): a Fill allocates nothing for it otherwise.
type waitCtx struct {
	r      *fillReq
	ctx    context.Context // under r.q.e.mu: made by Done, ended by abandon or release
	cancel context.CancelFunc
}

func (c *waitCtx) Deadline() (time.Time, bool) { return c.r.ctx.Deadline() }
func (c *waitCtx) Value(key any) any           { return c.r.ctx.Value(key) }

// Done is the Fill's context's Done, or a child's ended by abandon too.
func (c *waitCtx) Done() <-chan struct{} {
	e := c.r.q.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithCancel(c.r.ctx)
		if atomic.LoadInt32(c.r.stop) != 0 {
			c.cancel()
		}
	}
	return c.ctx.Done()
}

// Err is the Fill's context's error, or context.Canceled once r is
// abandoned.
func (c *waitCtx) Err() error {
	if atomic.LoadInt32(c.r.stop) != 0 {
		return context.Canceled
	}
	return c.r.ctx.Err()
}

// end ends the wait context made, if any. e.mu is held.
func (c *waitCtx) end() {
	if c.cancel != nil {
		c.cancel()
	}
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
func (q *Queue) Fill(ctx context.Context, ds dataset.Dataset, t *transform.Transform, seed, epoch uint64, indices []int64, policy FailPolicy, b *Batch) error {
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
func (q *Queue) FillAt(ctx context.Context, ds dataset.Dataset, t *transform.Transform, seed, epoch uint64, indices []int64, place []int, policy FailPolicy, b *Batch) error {
	if len(place) != len(indices) {
		return fmt.Errorf("%w: %d places for %d samples", errs.Unsupported, len(place), len(indices))
	}
	size := t.SampleBytes()
	if len(b.Data)%size != 0 {
		return fmt.Errorf("%w: a batch buffer of %d bytes for samples of %d", errs.Unsupported, len(b.Data), size)
	}
	for _, at := range place {
		if at < 0 || (at+1)*size > len(b.Data) {
			return fmt.Errorf("%w: place %d is past the batch's %d bytes", errs.Unsupported, at, len(b.Data))
		}
	}
	return q.fill(ctx, ds, t, seed, epoch, indices, place, policy, b)
}

func (q *Queue) fill(ctx context.Context, ds dataset.Dataset, t *transform.Transform, seed, epoch uint64, indices []int64, place []int, policy FailPolicy, b *Batch) error {
	if b.Copies != nil && len(b.Copies) != len(indices) {
		return fmt.Errorf("%w: %d copies for %d samples", errs.Unsupported, len(b.Copies), len(indices))
	}
	for _, idx := range indices {
		if idx < 0 || idx >= int64(ds.Len()) {
			return fmt.Errorf("%w: sample index %d out of range [0, %d)", errs.Unsupported, idx, ds.Len())
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Before the samples are queued: their bytes are on their way while
	// the batches queued ahead of this one are made.
	fs, _ := b.FieldSet.(*dataset.FieldSet)
	if fp, ok := ds.(dataset.FieldPrefetcher); ok && fs.Len() > 0 {
		fp.PrefetchFields(indices, fs)
	} else if p, ok := ds.(dataset.Prefetcher); ok {
		p.Prefetch(indices)
	}
	if p, ok := ds.(dataset.Prefetcher); ok { // a multi-image op's partners, after the samples (decode_multi.go)
		if hint := partnerHints(t, seed, epoch, indices, b.Copies, ds.Len()); len(hint) > 0 {
			p.Prefetch(hint)
		}
	}
	size := t.SampleBytes()
	n := len(indices)
	resetBatch(b, n, size, place != nil)
	for i, idx := range indices {
		b.Indices[i], b.Labels[i] = idx, ds.Label(int(idx))
	}
	r := fillReqs.Get().(*fillReq)
	r.q, r.ds, r.t, r.seed, r.epoch, r.indices, r.data, r.size, r.place = q, ds, t, seed, epoch, indices, b.Data, size, place
	r.ctx, r.wait.r = ctx, r
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
		running := e.abandonedIn(r)
		e.drop(r, ctx.Err())
		e.mu.Unlock()
		<-r.done
		if r.dropped == ctx.Err() && running != "" {
			// The lease ran out (or was cancelled) while these samples
			// were being made: its error names them, so that a batch
			// that fails every lease says which sample holds it.
			r.dropped = fmt.Errorf("%w (abandoned while making %s)", r.dropped, running)
		}
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
	r.wait.end()
	*r = fillReq{errs: r.errs[:0], good: r.good[:0], done: r.done, stop: r.stop}
	fillReqs.Put(r)
}

// abandonedIn names the samples of r the workers are making now (at
// most 4, then how many more), as its dataset names them, with their
// indices: "" when none has started or all are made. e.mu is held.
func (e *Executor) abandonedIn(r *fillReq) string {
	var names []string
	n := 0
	for w, c := range e.cur {
		if c != r {
			continue
		}
		n++
		if len(names) < 4 {
			idx := r.indices[e.curAt[w]]
			names = append(names, fmt.Sprintf("sample %d (%q)", idx, r.ds.Name(int(idx))))
		}
	}
	if n > len(names) {
		names = append(names, fmt.Sprintf("%d more", n-len(names)))
	}
	return strings.Join(names, ", ")
}
