package makertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline/batch"
)

// Maker is a coord.Maker bound to one job: its Make, Free, Ready and
// Forget with the job filled in.
type Maker interface {
	Make(ctx context.Context, l *lease.Lease, b *batch.Batch) (lease.Made, error)
	Free() int
	Ready() bool
	Forget()
}

// Subject is one maker under the suite, ready (Maker.Ready), and what the
// suite must know of it.
type Subject struct {
	Maker Maker
	// Batch is the sample indices of batch k, k = 0..3, of the job's
	// epoch 0: all of one size, at least 4 samples, more than the maker
	// starts at once (so that a Make whose context ends while its samples
	// are held has samples it has not started).
	Batch func(k int) []int64
	// SampleBytes is one sample's size.
	SampleBytes int
	// Want is what a whole lease l must make: its samples' pixels in
	// l's order, their labels and indices, by a reference (the executor
	// alone, or the honest maker a test fakes).
	Want func(t *testing.T, l *lease.Lease) *batch.Batch
	// Hold holds every sample the maker starts from now on until release
	// is called (as a read that hangs would): held gets a value as each
	// begins to wait. Release may be called more than once.
	Hold func() (held <-chan struct{}, release func())
	// ReturnsHeld says that a Make whose context ends returns while its
	// samples are held (a peer gives the lease up and leaves its worker
	// to it); otherwise it first waits for the samples it started (the
	// local executor: at most one per worker goroutine), and Dropped
	// reports when such a Make has given up those it had not started: the
	// suite releases the held ones only then (released sooner, every
	// sample may start, and the batch is made whole, as it may be).
	ReturnsHeld bool
	Dropped     func() bool
	// Places says the maker takes a part of a batch (lease.Lease.Place).
	// A batch in parts does not: it is given whole batches.
	Places bool
	// Kept is how many jobs the maker keeps something of (a queue, a
	// registration on a worker); nil when the suite cannot see it.
	Kept func() int
}

// HangGuard is how long the suite waits for what is bound to happen
// before it calls the wait a hang: long enough for a loaded machine under
// the race detector, so that it only ever turns a hang into a failure.
const HangGuard = 2 * time.Minute

// Run runs the suite, each subtest on a Subject newSubject makes for it.
func Run(t *testing.T, newSubject func(t *testing.T) Subject) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, s Subject)
	}{
		{"makes", testMakes},
		{"concurrently", testConcurrently},
		{"at-places", testPlaces},
		{"context-done-before", testDoneBefore},
		{"context-ends-while-held", testEndsWhileHeld},
		{"free-ready", testFreeReady},
		{"forget", testForget},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, newSubject(t)) })
	}
}

// leaseOf is the whole lease of batch k.
func leaseOf(s Subject, k int) *lease.Lease {
	return &lease.Lease{Epoch: 0, Number: k, Indices: s.Batch(k)}
}

// mustMake makes l into b, which must succeed within the guard.
func mustMake(t *testing.T, s Subject, l *lease.Lease, b *batch.Batch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	if _, err := s.Maker.Make(ctx, l, b); err != nil {
		t.Fatalf("batch %d: %v", l.Number, err)
	}
}

// checkWhole fails unless b is what l must make.
func checkWhole(t *testing.T, s Subject, l *lease.Lease, b *batch.Batch) {
	t.Helper()
	want := s.Want(t, l)
	switch {
	case b.N != want.N || !slices.Equal(b.Indices, want.Indices) || !slices.Equal(b.Labels, want.Labels):
		t.Errorf("batch %d: %d samples, indices %v, labels %v; want %d, %v, %v", l.Number, b.N, b.Indices, b.Labels, want.N, want.Indices, want.Labels)
	case len(b.Errors) != 0:
		t.Errorf("batch %d: sample errors %v", l.Number, b.Errors)
	case !bytes.Equal(b.Data, want.Data):
		t.Errorf("batch %d: %d bytes of pixels, not the reference's %d", l.Number, len(b.Data), len(want.Data))
	}
}

// testMakes: a lease is made whole, as the reference makes it; the next,
// into the same batch, reuses its buffer.
func testMakes(t *testing.T, s Subject) {
	var b batch.Batch
	l := leaseOf(s, 0)
	mustMake(t, s, l, &b)
	checkWhole(t, s, l, &b)
	if t.Failed() || len(b.Data) == 0 {
		return
	}
	data := &b.Data[0]
	l = leaseOf(s, 1)
	mustMake(t, s, l, &b)
	checkWhole(t, s, l, &b)
	if len(b.Data) > 0 && &b.Data[0] != data {
		t.Errorf("batch 1 made into a new buffer; want the batch's own, large enough, reused")
	}
}

// testConcurrently: as many Makes as the maker has room for (Free), up
// to 4, run at once (many coordinators share a maker), each into its own
// batch.
func testConcurrently(t *testing.T, s Subject) {
	n := min(4, s.Maker.Free())
	if n < 2 {
		t.Fatalf("Free %d: the subject must take at least 2 leases at once", n)
	}
	bs := make([]batch.Batch, n)
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), HangGuard)
	defer cancel()
	for k := range bs {
		wg.Go(func() { _, errs[k] = s.Maker.Make(ctx, leaseOf(s, k), &bs[k]) })
	}
	wg.Wait()
	for k := range bs {
		if errs[k] != nil {
			t.Errorf("batch %d: %v", k, errs[k])
			continue
		}
		checkWhole(t, s, leaseOf(s, k), &bs[k])
	}
}

// testPlaces: a part of a batch (every other sample of batch 2) goes to
// its places in the whole batch's buffer, whose length is kept and whose
// other bytes are left alone; the batch's other fields are the part's,
// in the lease's order.
func testPlaces(t *testing.T, s Subject) {
	if !s.Places {
		t.Skip("this maker is given whole batches only (a batch in parts): no part to place")
	}
	whole := leaseOf(s, 2)
	want := s.Want(t, whole)
	l := &lease.Lease{Epoch: whole.Epoch, Number: whole.Number}
	for i, idx := range whole.Indices {
		if i%2 == 1 {
			l.Indices, l.Place = append(l.Indices, idx), append(l.Place, i)
		}
	}
	size := s.SampleBytes
	b := batch.Batch{Data: bytes.Repeat([]byte{0xa5}, len(whole.Indices)*size)}
	mustMake(t, s, l, &b)
	if len(b.Data) != len(whole.Indices)*size {
		t.Fatalf("the whole batch's buffer is %d bytes after a part, want %d kept", len(b.Data), len(whole.Indices)*size)
	}
	if b.N != len(l.Indices) || !slices.Equal(b.Indices, l.Indices) {
		t.Errorf("a part of %d samples %v: N %d, indices %v", len(l.Indices), l.Indices, b.N, b.Indices)
	}
	for i := range whole.Indices {
		got := b.Data[i*size : (i+1)*size]
		switch {
		case i%2 == 1 && !bytes.Equal(got, want.Data[i*size:(i+1)*size]):
			t.Errorf("place %d: not sample %d's pixels", i, whole.Indices[i])
		case i%2 == 0 && !bytes.Equal(got, bytes.Repeat([]byte{0xa5}, size)):
			t.Errorf("place %d, not the part's, was written", i)
		case i%2 == 1 && b.Labels[i/2] != want.Labels[i]:
			t.Errorf("the part's label %d is %d, want sample %d's %d", i/2, b.Labels[i/2], whole.Indices[i], want.Labels[i])
		}
	}
}

// testDoneBefore: a Make whose context is already done (cancelled, or
// past its deadline) fails with the context's error, and holds nothing.
func testDoneBefore(t *testing.T, s Subject) {
	free := s.Maker.Free()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	passed, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, ctx := range []context.Context{cancelled, passed} {
		var b batch.Batch
		done := make(chan error, 1)
		go func() { _, err := s.Maker.Make(ctx, leaseOf(s, 0), &b); done <- err }()
		err := within(t, "a Make whose context was done", done)
		if !errors.Is(err, ctx.Err()) {
			t.Errorf("Make with a done context (%v): %v; want its error", ctx.Err(), err)
		}
	}
	eventually(t, "Free back to what it was", func() bool { return s.Maker.Free() == free })
}

// testEndsWhileHeld: a Make whose context ends while its samples are held
// returns with the context's error (once its started samples are done,
// for a maker that waits for them), and from then on the batch is the
// caller's: nothing writes to it, even as the held samples go on, and the
// next Make on the maker (made after them) comes out whole.
func testEndsWhileHeld(t *testing.T, s Subject) {
	free := s.Maker.Free()
	held, release := s.Hold()
	var once sync.Once
	releaseOnce := func() { once.Do(release) }
	defer releaseOnce()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var b batch.Batch
	done := make(chan error, 1)
	go func() { _, err := s.Maker.Make(ctx, leaseOf(s, 3), &b); done <- err }()
	within(t, "a sample held", held)
	if f := s.Maker.Free(); f > free {
		t.Errorf("Free %d with a Make in flight, more than the %d before it", f, free)
	}
	cancel()
	var err error
	if s.ReturnsHeld {
		err = within(t, "the Make's return while its samples are held", done)
		releaseOnce()
	} else {
		if s.Dropped == nil {
			t.Fatal("the subject waits for the samples it started (ReturnsHeld false) but cannot say when it dropped the others (Dropped)")
		}
		eventually(t, "the samples not started dropped", s.Dropped)
		releaseOnce()
		err = within(t, "the Make's return once its started samples are done", done)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Make whose context ended: %v; want context.Canceled", err)
	}
	seen := snapshot(&b)
	var next batch.Batch
	l := leaseOf(s, 0)
	mustMake(t, s, l, &next)
	checkWhole(t, s, l, &next)
	eventually(t, "Free back to what it was", func() bool { return s.Maker.Free() == free })
	if now := snapshot(&b); !now.equal(seen) {
		t.Errorf("the batch changed after its Make returned: %+v, then %+v", seen.short(), now.short())
	}
}

// testFreeReady: a ready maker is ready, has room, and has as much room
// again once its Makes have returned.
func testFreeReady(t *testing.T, s Subject) {
	if !s.Maker.Ready() {
		t.Fatal("the subject is not ready")
	}
	free := s.Maker.Free()
	if free <= 0 {
		t.Fatalf("Free %d at rest", free)
	}
	var b batch.Batch
	mustMake(t, s, leaseOf(s, 1), &b)
	eventually(t, "Free back to what it was", func() bool { return s.Maker.Free() == free })
	if !s.Maker.Ready() {
		t.Error("the maker is not ready after a lease")
	}
}

// testForget: Forget drops what the maker keeps of the job (where that
// can be seen); the job's next lease is made as the first was, the job
// taken anew; Forget again, with nothing kept, is harmless.
func testForget(t *testing.T, s Subject) {
	var b batch.Batch
	mustMake(t, s, leaseOf(s, 0), &b)
	if s.Kept != nil && s.Kept() == 0 {
		t.Error("the maker keeps nothing of a job it made a batch of")
	}
	s.Maker.Forget()
	if s.Kept != nil {
		eventually(t, "the job forgotten", func() bool { return s.Kept() == 0 })
	}
	l := leaseOf(s, 1)
	mustMake(t, s, l, &b)
	checkWhole(t, s, l, &b)
	s.Maker.Forget()
	s.Maker.Forget()
	if s.Kept != nil {
		eventually(t, "the job forgotten again", func() bool { return s.Kept() == 0 })
	}
}

// seenBatch is what a batch held when looked at.
type seenBatch struct {
	n           int
	data        []byte
	labels, idx []int64
	errs        int
}

func snapshot(b *batch.Batch) seenBatch {
	return seenBatch{n: b.N, data: bytes.Clone(b.Data), labels: slices.Clone(b.Labels), idx: slices.Clone(b.Indices), errs: len(b.Errors)}
}

func (s seenBatch) equal(o seenBatch) bool {
	return s.n == o.n && bytes.Equal(s.data, o.data) && slices.Equal(s.labels, o.labels) && slices.Equal(s.idx, o.idx) && s.errs == o.errs
}

func (s seenBatch) short() string {
	return fmt.Sprintf("N %d, %d bytes, %d indices, %d errors", s.n, len(s.data), len(s.idx), s.errs)
}

// within returns what ch gives, failing the test if it gives nothing
// within the guard.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(HangGuard):
		t.Fatalf("no %s within %v", what, HangGuard)
		var none T
		return none
	}
}

// eventually waits until ok, failing the test if it does not come within
// the guard: for what a maker settles asynchronously (a peer's worker
// acknowledging).
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(HangGuard)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, HangGuard)
		}
		time.Sleep(time.Millisecond)
	}
}
