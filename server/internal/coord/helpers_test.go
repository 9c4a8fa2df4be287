package coord

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
)

// A coordinator read alone: a fake job with a trivial plan, makers whose
// every answer a test scripts, a verifier that compares every byte it is
// asked to, and the coordinator's output read as a trainer would. No
// dataset, no executor, no network.

const sampleBytes = 3

// fakeJob is a job of n samples a rank, in batches of size: batch k of an
// epoch is samples k*size.. in order, their indices offset by 1000 per
// epoch so that epochs differ.
type fakeJob struct {
	n, size int
	pads    bool
}

func (j *fakeJob) Dataset() string   { return "tiny" }
func (j *fakeJob) Rank() int         { return 0 }
func (j *fakeJob) World() int        { return 1 }
func (j *fakeJob) BatchSize() int    { return j.size }
func (j *fakeJob) SampleBytes() int  { return sampleBytes }
func (j *fakeJob) BatchBytes() int64 { return int64(j.size * sampleBytes) }
func (j *fakeJob) Pads() bool        { return j.pads }
func (j *fakeJob) Shuffle() string   { return "sequential" }

func (j *fakeJob) Plan(epoch, consumed uint64) Plan {
	return fakePlan{epoch: epoch, n: j.n - int(consumed), size: j.size}
}

type fakePlan struct {
	epoch   uint64
	n, size int
}

func (p fakePlan) Batches() int { return (p.n + p.size - 1) / p.size }
func (p fakePlan) Samples() int { return p.n }

func (p fakePlan) Batch(k int) []int64 {
	var idx []int64
	for i := k * p.size; i < min((k+1)*p.size, p.n); i++ {
		idx = append(idx, int64(p.epoch)*1000+int64(i))
	}
	return idx
}

// pixels is sample idx's pixels, as every honest maker makes them.
func pixels(idx int64) []byte {
	return []byte{byte(idx), byte(idx >> 8), byte(idx*7 + 1)}
}

// fill makes lease l's batch into b, as an honest maker does.
func fill(l *lease.Lease, b *pipeline.Batch) {
	b.N = len(l.Indices)
	b.Labels, b.Indices, b.Errors = b.Labels[:0], b.Indices[:0], b.Errors[:0]
	if l.Place == nil {
		b.Data = b.Data[:0]
	}
	for i, idx := range l.Indices {
		if l.Place != nil {
			// A part of a batch: each sample at its place in the whole
			// batch's buffer, as a Peer puts it.
			copy(b.Data[l.Place[i]*sampleBytes:], pixels(idx))
		} else {
			b.Data = append(b.Data, pixels(idx)...)
		}
		b.Labels = append(b.Labels, idx%10)
		b.Indices = append(b.Indices, idx)
	}
}

// call is one Make on a scriptedMaker, waiting for the script's answer.
type call struct {
	ctx    context.Context
	l      *lease.Lease
	b      *pipeline.Batch
	answer chan error
}

// made fills the batch honestly and answers the call with success.
func (c *call) made() {
	fill(c.l, c.b)
	c.answer <- nil
}

// scriptedMaker is a maker each of whose Makes is handed to the test (on
// calls) and returns what the test answers, or the lease's context error
// when the test says nothing before it ends (auto answers at once). Like
// a peer, it takes at most capacity leases at once and answers ErrBusy
// past them. It records every lease it was given (got).
type scriptedMaker struct {
	name     string
	local    bool
	capacity atomic.Int64
	ready    atomic.Bool
	calls    chan *call
	// auto, when set, answers every call itself, at once; but those hold
	// says to hold, which go to calls as without auto.
	auto func(c *call)
	hold func(l *lease.Lease) bool

	mu      sync.Mutex
	forgot  int
	pending int // Makes not returned
	got     []gotLease
}

// gotLease is a lease a scriptedMaker was given: when its Make began
// (with how many of the maker's Makes running, itself included) and
// returned, and what it returned. Not turned away as busy.
type gotLease struct {
	epoch      uint64
	number     int
	indices    []int64
	start, end time.Time
	running    int
	err        error
}

// leases is what the maker was given so far.
func (m *scriptedMaker) leases() []gotLease {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

func newMaker(name string, free int) *scriptedMaker {
	m := &scriptedMaker{name: name, calls: make(chan *call, 64)}
	m.capacity.Store(int64(free))
	m.ready.Store(true)
	return m
}

func (m *scriptedMaker) Make(ctx context.Context, _ Job, l *lease.Lease, b *pipeline.Batch) (_ lease.Made, err error) {
	m.mu.Lock()
	if int64(m.pending) >= m.capacity.Load() {
		m.mu.Unlock()
		return lease.Made{}, fmt.Errorf("%w: %s is full", lease.ErrBusy, m.name)
	}
	m.pending++
	i := len(m.got)
	m.got = append(m.got, gotLease{epoch: l.Epoch, number: l.Number, indices: slices.Clone(l.Indices), start: time.Now(), running: m.pending})
	m.mu.Unlock()
	l.Count() // as a Peer: Free counts it from here
	defer func() {
		m.mu.Lock()
		m.pending--
		m.got[i].end, m.got[i].err = time.Now(), err
		m.mu.Unlock()
	}()
	c := &call{ctx: ctx, l: l, b: b, answer: make(chan error, 1)}
	if m.auto != nil && (m.hold == nil || !m.hold(l)) {
		m.auto(c)
		return lease.Made{}, <-c.answer
	}
	m.calls <- c
	select {
	case err := <-c.answer:
		return lease.Made{}, err
	case <-ctx.Done():
		return lease.Made{}, ctx.Err()
	}
}

func (m *scriptedMaker) Name() string  { return m.name }
func (m *scriptedMaker) Trusted() bool { return m.local }
func (m *scriptedMaker) Remote() bool  { return !m.local }
func (m *scriptedMaker) Free() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(int(m.capacity.Load())-m.pending, 0)
}
func (m *scriptedMaker) Ready() bool { return m.ready.Load() }

func (m *scriptedMaker) Forget(Job) {
	m.mu.Lock()
	m.forgot++
	m.mu.Unlock()
}

// next is the maker's next call, which must come before the fake clock
// reaches the deadline.
func (m *scriptedMaker) next(t *testing.T) *call {
	t.Helper()
	select {
	case c := <-m.calls:
		return c
	case <-time.After(time.Minute):
		t.Fatalf("maker %s: no lease within a minute", m.name)
		return nil
	}
}

// fakeVerifier checks peers' batches: every index and byte against what an
// honest maker makes, when check says so for the lease (the batch is then
// checked); otherwise nothing, as a verifier that picked no sample.
type fakeVerifier struct {
	check func(l *lease.Lease) bool

	mu          sync.Mutex
	quarantined map[Maker]error
	verified    int
}

func (v *fakeVerifier) Pick(Maker, int, int) []int { return nil }

func (v *fakeVerifier) Verify(_ context.Context, _ Job, l *lease.Lease, b *pipeline.Batch, _ [][]byte) (bool, error) {
	v.mu.Lock()
	v.verified++
	v.mu.Unlock()
	if v.check == nil || !v.check(l) {
		return false, nil
	}
	var want pipeline.Batch
	fill(&lease.Lease{Indices: l.Indices}, &want)
	got := b.Data
	if l.Place != nil { // a part: its samples at their places
		got = nil
		for _, at := range l.Place {
			got = append(got, b.Data[at*sampleBytes:(at+1)*sampleBytes]...)
		}
	}
	if !bytes.Equal(want.Data, got) {
		return false, fmt.Errorf("%w: batch %d of epoch %d: pixels differ", ErrMismatch, l.Number, l.Epoch)
	}
	return true, nil
}

func (v *fakeVerifier) Quarantine(m Maker, reason error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.quarantined == nil {
		v.quarantined = make(map[Maker]error)
	}
	if v.quarantined[m] == nil {
		v.quarantined[m] = reason
	}
}

func (v *fakeVerifier) Why(m Maker) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.quarantined[m]
}

// memory is a stream's memory with room for everything.
type memory struct{ held atomic.Int64 }

func (m *memory) Try(n int64) bool { m.held.Add(n); return true }
func (m *memory) Release(n int64)  { m.held.Add(-n) }

// testEnv is a coordinator's environment over makers ms, with an automatic
// window.
func testEnv(v Verifier, ms ...Maker) *Env { return testEnvWindow(0, v, ms...) }

// testEnvWindow is testEnv with a window of w leases (0: automatic); a
// window of one makes which maker gets which batch the test's choice.
func testEnvWindow(w int, v Verifier, ms ...Maker) *Env {
	return &Env{
		Config:   Config{Window: w, LeaseTimeout: time.Second, StallTarget: DefaultStallTarget, AdviseWindow: time.Minute, MaxRecommended: 64},
		Makers:   NewMakers(ms...),
		Metrics:  NewMetrics(),
		GPUIdle:  func() (float64, bool) { return 0, false },
		Verifier: v,
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// trainer reads a coordinator's output as a Feed stream's send loop does:
// it records what came, gives every buffer back, and grants a credit per
// batch when asked to.
type trainer struct {
	c       *Coordinator
	starts  []*EpochStart
	ends    []*EpochEnd
	batches []delivered
}

type delivered struct {
	epoch uint64
	k     int
	data  []byte
	idx   []int64
	errs  []pipeline.SampleError
}

// run starts the coordinator and reads its output until it ends; the
// returned function waits for that and returns Run's error.
func (tr *trainer) run(ctx context.Context) func() error {
	done := make(chan error, 1)
	go func() { done <- tr.c.Run(ctx) }()
	read := make(chan struct{})
	go func() {
		defer close(read)
		for o := range tr.c.Out() {
			switch {
			case o.Start != nil:
				tr.starts = append(tr.starts, o.Start)
			case o.End != nil:
				tr.ends = append(tr.ends, o.End)
			default:
				tr.batches = append(tr.batches, delivered{o.Epoch, o.K, bytes.Clone(o.Batch.Data), slices.Clone(o.Batch.Indices), slices.Clone(o.Batch.Errors)})
				tr.c.Recycle(o.Batch)
			}
		}
	}()
	return func() error {
		err := <-done
		<-read
		return err
	}
}

// exactlyOnce checks that the trainer got every batch of the epochs asked
// for once, in order, with an honest maker's bytes, and each epoch's
// counts.
func (tr *trainer) exactlyOnce(t *testing.T, j *fakeJob, epochs int) {
	t.Helper()
	plan := j.Plan(0, 0)
	if len(tr.starts) != epochs || len(tr.ends) != epochs || len(tr.batches) != epochs*plan.Batches() {
		t.Fatalf("%d EpochStarts, %d EpochEnds, %d batches; want %d, %d, %d", len(tr.starts), len(tr.ends), len(tr.batches), epochs, epochs, epochs*plan.Batches())
	}
	for i, d := range tr.batches {
		e, k := uint64(i/plan.Batches()), i%plan.Batches()
		l := &lease.Lease{Epoch: e, Number: k, Indices: j.Plan(e, 0).Batch(k)}
		var want pipeline.Batch
		fill(l, &want)
		if d.epoch != e || d.k != k || !bytes.Equal(d.data, want.Data) {
			t.Errorf("batch %d out: epoch %d batch %d (%d bytes), want epoch %d batch %d with an honest maker's bytes", i, d.epoch, d.k, len(d.data), e, k)
		}
	}
	for e, end := range tr.ends {
		if end.Epoch != uint64(e) || end.Batches != uint64(plan.Batches()) || end.Samples != uint64(plan.Samples()) {
			t.Errorf("EpochEnd %v, want epoch %d: %d batches, %d samples", end, e, plan.Batches(), plan.Samples())
		}
	}
}

// paced answers calls as a maker of one batch every `every` would, one
// after another (as a worker under --bench-rate): a call waits for those
// before it, then every; a call cancelled meanwhile returns at once.
func paced(every time.Duration) func(*call) {
	var mu sync.Mutex
	var next time.Time
	return func(c *call) {
		mu.Lock()
		next = later(next, time.Now()).Add(every)
		done := next
		mu.Unlock()
		t := time.NewTimer(time.Until(done))
		defer t.Stop()
		select {
		case <-t.C:
			c.made()
		case <-c.ctx.Done():
			c.answer <- c.ctx.Err()
		}
	}
}
