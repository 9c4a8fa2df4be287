package coord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
)

// The lease table alone (table.go), stepped through random orders of its
// events (issue, hedge, answer, quarantine, delivery) by a fuzzer, against
// a model of the same rules kept by the test: every batch of the stream is
// delivered once, in order, made by an answer of one of its current
// leases and never by a quarantined peer unchecked; a stale answer is
// dropped; a failure counts once, when it counts; the job fails when, and
// only when, a batch's lease fails alone (no hedge in flight) with its
// failures that count at maxAttempts or more, which only failures a hedge
// covered take past maxAttempts.

// tableMakers are the makers a fuzzed table leases to: m0 the local
// executor (never quarantined, its batches checked), the others peers.
var tableMakers = func() []Maker {
	ms := make([]Maker, 4)
	for i := range ms {
		ms[i] = &fakeMaker{name: fmt.Sprintf("m%d", i), local: i == 0}
	}
	return ms
}()

// failures are the answers a fuzzed lease fails with, by kind.
var tableFailures = []error{
	errors.New("the disk said no"),
	fmt.Errorf("%w: full", lease.ErrBusy),
	fmt.Errorf("%w: shutting down", lease.ErrDraining),
	fmt.Errorf("%w: lied", ErrMismatch),
	fmt.Errorf("%w: no such dataset", lease.ErrRefused),
	errSamplesFailed,
	fmt.Errorf("%w: late", context.DeadlineExceeded),
}

// tableLease is a lease the model knows of, answered or not.
type tableLease struct {
	id    batchID
	rec   *leaseRec
	maker Maker
}

// tableSim is a table and the test's model of it.
type tableSim struct {
	t   *testing.T
	j   *fakeJob
	st  Stream
	tab *table

	// The model.
	out         []*tableLease // leases not answered yet, in issue order
	answered    []*tableLease // leases answered (a second answer is stale)
	first       map[batchID]uint64
	hedge       map[batchID]uint64
	counted     map[batchID]int // failures that count, of first leases
	covered     map[batchID]int // of those, failed while the batch had a hedge in flight
	made        map[*pipeline.Batch]batchID
	unchecked   map[batchID][]Maker
	quarantined map[Maker]bool
	delivered   map[batchID]int
	order       []batchID // delivered, in order
	failed      error     // the job's end
	done        bool      // the stream's last epoch delivered
	seen        tableSeen
}

// tableSeen counts what a run went through, for the seed corpus's cover.
type tableSeen struct {
	failedJob, dropped, hedgeWon, promoted, requeued, quarantineDropped, mismatch int
}

func newTableSim(t *testing.T, cfg []byte) *tableSim {
	at := func(i int) int {
		if i < len(cfg) {
			return int(cfg[i])
		}
		return 0
	}
	j := &fakeJob{n: 3 + at(0)%10, size: 1 + at(1)%3}
	st := Stream{Epoch: uint64(at(2) % 3), Epochs: 1 + uint64(at(3)%3), AsReady: at(4)%2 == 1}
	plan := j.Plan(st.Epoch, 0)
	st.Start = at(5) % (plan.Batches() + 1)
	if k := at(6) % (plan.Batches() + 1); k > st.Start && k < plan.Batches() {
		st.Skip = []uint64{uint64(k)}
	}
	s := &tableSim{
		t: t, j: j, st: st, tab: newTable(j, st),
		first: map[batchID]uint64{}, hedge: map[batchID]uint64{}, counted: map[batchID]int{}, covered: map[batchID]int{},
		made: map[*pipeline.Batch]batchID{}, unchecked: map[batchID][]Maker{},
		quarantined: map[Maker]bool{}, delivered: map[batchID]int{},
	}
	return s
}

func (s *tableSim) isQuarantined(m Maker) bool { return s.quarantined[m] }

// maker is the maker arg picks among those the job may lease to, not
// not; nil when none is left.
func (s *tableSim) maker(arg byte, not Maker) Maker {
	for i := range tableMakers {
		m := tableMakers[(int(arg)+i)%len(tableMakers)]
		if m != not && !s.quarantined[m] {
			return m
		}
	}
	return nil
}

// issue leases the table's next batch, if the window allows.
func (s *tableSim) issue(arg byte) {
	if s.tab.inFlight() >= 4 {
		return
	}
	id, ok := s.tab.toLease()
	if !ok {
		return
	}
	if s.first[id] != 0 || s.isReady(id) || s.delivered[id] > 0 {
		s.t.Fatalf("batch %v to lease again, but it is leased, made or delivered", id)
	}
	m := s.maker(arg, nil)
	rec := &leaseRec{maker: m}
	s.tab.issue(id, rec)
	s.first[id] = rec.id
	s.out = append(s.out, &tableLease{id, rec, m})
}

// hedgeOne hedges the arg'th batch leased and not hedged.
func (s *tableSim) hedgeOne(arg byte) {
	var ids []batchID
	for id := range s.first {
		if s.hedge[id] == 0 {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.SortFunc(ids, cmpBatch)
	id := ids[int(arg)%len(ids)]
	m := s.maker(arg/4, s.tab.leases[id].maker)
	if m == nil {
		return
	}
	rec := &leaseRec{maker: m}
	s.tab.hedge(id, rec)
	s.hedge[id] = rec.id
	s.out = append(s.out, &tableLease{id, rec, m})
}

func (s *tableSim) isReady(id batchID) bool {
	for _, mid := range s.made {
		if mid == id {
			return true
		}
	}
	return false
}

// answer answers the arg'th lease not answered yet (made, or failed as
// fail says); stale answers a lease answered already, again.
func (s *tableSim) answer(arg, fail byte, stale bool) {
	list := &s.out
	if stale {
		list = &s.answered
	}
	if len(*list) == 0 {
		return
	}
	i := int(arg) % len(*list)
	l := (*list)[i]
	if !stale {
		*list = slices.Delete(*list, i, i+1)
		s.answered = append(s.answered, l)
	}
	a := answer{id: l.id, lease: l.rec.id, lead: l.maker, b: &pipeline.Batch{N: 1}}
	if fail%3 != 0 {
		err := tableFailures[int(fail/3)%len(tableFailures)]
		a.err = err
		if other := s.maker(fail, l.maker); fail%5 == 0 && other != nil { // two makers to blame, as a batch in parts
			a.err = blames{{l.maker, err}, {other, tableFailures[0]}}
		}
	} else if !l.maker.Trusted() && fail%2 == 0 {
		a.unchecked = []Maker{l.maker}
	}
	wasFirst, wasHedge := s.first[l.id] == l.rec.id, s.hedge[l.id] == l.rec.id
	current := (wasFirst || wasHedge) && s.delivered[l.id] == 0
	o := s.tab.answer(a, s.isQuarantined)
	if o.dropped == current {
		s.t.Fatalf("answer to lease %d of batch %v (first %v, hedge %v, delivered %d times): dropped %v", l.rec.id, l.id, wasFirst, wasHedge, s.delivered[l.id], o.dropped)
	}
	if o.dropped {
		s.seen.dropped++
		return
	}
	err := a.err
	if err == nil && slices.ContainsFunc(a.unchecked, s.isQuarantined) {
		err = fmt.Errorf("%w: made by a quarantined peer", ErrMismatch)
	}
	if o.made != (err == nil) {
		s.t.Fatalf("answer %v to batch %v: made %v", err, l.id, o.made)
	}
	if o.made {
		if s.isReady(l.id) {
			s.t.Fatalf("batch %v made twice", l.id)
		}
		if wasHedge && s.first[l.id] != 0 {
			s.seen.hedgeWon++
		}
		delete(s.first, l.id)
		delete(s.hedge, l.id)
		s.made[a.b] = l.id
		if len(a.unchecked) > 0 {
			s.unchecked[l.id] = a.unchecked
		}
		return
	}
	counts := false
	for _, f := range blamesOf(err, l.maker) {
		counts = counts || kindOf(f.err).counts()
	}
	if wasHedge {
		delete(s.hedge, l.id)
	} else {
		delete(s.first, l.id)
		if counts {
			s.counted[l.id]++
			if s.hedge[l.id] != 0 {
				s.covered[l.id]++
			}
		}
		if s.hedge[l.id] != 0 {
			s.first[l.id] = s.hedge[l.id]
			delete(s.hedge, l.id)
			s.seen.promoted++
		} else {
			s.seen.requeued++
		}
	}
	// The job ends at the first failure of a batch's lease alone (no
	// hedge in flight) once its failures that count reach maxAttempts:
	// only a failure a hedge covered takes it past.
	if c := s.counted[l.id]; c > maxAttempts+s.covered[l.id] || (o.err != nil) != (wasFirst && s.first[l.id] == 0 && c >= maxAttempts) {
		s.t.Fatalf("batch %v: %d failures that count (%d with a hedge in flight), its lease first %v, hedged %v: the job's end %v",
			l.id, c, s.covered[l.id], wasFirst, s.first[l.id] != 0, o.err)
	}
	if o.err != nil {
		if !errors.Is(o.err, ErrBatchFailed) {
			s.t.Fatalf("the job ends with %v, want ErrBatchFailed", o.err)
		}
		s.failed = o.err
		s.seen.failedJob++
		return
	}
	for _, f := range o.blames {
		if kindOf(f.err) == failMismatch && !f.m.Trusted() {
			s.seen.mismatch++
			s.quarantine(f.m) // as the coordinator does
		}
	}
}

// quarantine quarantines m and steps the table with it.
func (s *tableSim) quarantine(m Maker) {
	if m.Trusted() {
		return
	}
	s.quarantined[m] = true
	dropped := s.tab.quarantined(s.isQuarantined)
	for _, b := range dropped {
		id, ok := s.made[b]
		if !ok || !slices.ContainsFunc(s.unchecked[id], s.isQuarantined) {
			s.t.Fatalf("quarantine dropped a batch that was not made unchecked by a quarantined maker (%v)", id)
		}
		delete(s.made, b)
		delete(s.unchecked, id)
		s.seen.quarantineDropped++
	}
	for id, ms := range s.unchecked {
		if slices.ContainsFunc(ms, s.isQuarantined) && s.isReady(id) {
			s.t.Fatalf("batch %v, made unchecked by a quarantined maker, is still ready", id)
		}
	}
	for id, h := range s.hedge {
		if l := s.leaseOf(h); s.quarantined[l.maker] {
			delete(s.hedge, id)
		}
	}
	for id, f := range s.first {
		if l := s.leaseOf(f); s.quarantined[l.maker] {
			delete(s.first, id)
			if h := s.hedge[id]; h != 0 {
				s.first[id] = h
				delete(s.hedge, id)
			}
		}
	}
}

func (s *tableSim) leaseOf(id uint64) *tableLease {
	for _, l := range append(slices.Clone(s.out), s.answered...) {
		if l.rec.id == id {
			return l
		}
	}
	s.t.Fatalf("no lease %d", id)
	return nil
}

// deliver hands out what is ready, up to credits batches (as the
// coordinator's deliver does), moving on from each epoch delivered.
func (s *tableSim) deliver(credits int) {
	t := s.tab
	for !s.done {
		if t.epochDelivered() {
			if t.lastEpoch(t.cur.epoch) {
				s.done = true
				return
			}
			t.nextEpoch()
			continue
		}
		id, ok := t.toDeliver()
		if !ok || credits == 0 {
			return
		}
		credits--
		b := t.ready[id]
		if made, ok := s.made[b]; !ok || made != id {
			s.t.Fatalf("batch %v delivered with a buffer no answer of its made (%v)", id, made)
		}
		if slices.ContainsFunc(s.unchecked[id], s.isQuarantined) {
			s.t.Fatalf("batch %v delivered, made unchecked by a quarantined maker", id)
		}
		if !s.st.AsReady && id.k != t.cur.next {
			s.t.Fatalf("batch %v delivered before batch %d", id, t.cur.next)
		}
		t.delivered(id)
		delete(s.made, b)
		delete(s.unchecked, id)
		s.delivered[id]++
		s.order = append(s.order, id)
	}
}

// check checks the table against the model.
func (s *tableSim) check() {
	if got := s.tab.inFlight(); got != len(s.first) {
		s.t.Fatalf("%d batches leased, the model has %d", got, len(s.first))
	}
	if got := len(s.tab.hedges); got != len(s.hedge) {
		s.t.Fatalf("%d hedges, the model has %d", got, len(s.hedge))
	}
	for id, n := range s.delivered {
		if n != 1 {
			s.t.Fatalf("batch %v delivered %d times", id, n)
		}
	}
	for id, n := range s.tab.attempts {
		if n != s.counted[id] || s.delivered[id] > 0 {
			s.t.Fatalf("batch %v: %d attempts counted, the model has %d failures that count (delivered %d times)", id, n, s.counted[id], s.delivered[id])
		}
	}
	for id, n := range s.counted {
		if s.delivered[id] == 0 && s.tab.attempts[id] != n {
			s.t.Fatalf("batch %v: %d attempts counted, the model has %d failures that count", id, s.tab.attempts[id], n)
		}
	}
}

// finish answers every lease made until the stream is delivered.
func (s *tableSim) finish() {
	for step := 0; !s.done; step++ {
		if step > 10_000 {
			s.t.Fatalf("the stream does not end: %d batches delivered", len(s.order))
		}
		s.deliver(-1)
		for range 4 {
			s.issue(0)
		}
		for len(s.out) > 0 {
			s.answer(0, 0, false)
		}
		s.check()
	}
	// Every batch of every epoch, once, but those the resume skipped.
	var want []batchID
	for e := s.st.Epoch; e < s.st.Epoch+s.st.Epochs; e++ {
		for k := range s.j.Plan(e, 0).Batches() {
			if e == s.st.Epoch && (k < s.st.Start || slices.Contains(s.st.Skip, uint64(k))) {
				continue
			}
			want = append(want, batchID{e, k})
		}
	}
	got := slices.Clone(s.order)
	if s.st.AsReady {
		slices.SortStableFunc(got, func(a, b batchID) int { return cmpU(a.epoch, b.epoch) })
		for i := 0; i < len(got); {
			j := i
			for j < len(got) && got[j].epoch == got[i].epoch {
				j++
			}
			slices.SortFunc(got[i:j], cmpBatch)
			i = j
		}
	}
	if !slices.Equal(got, want) {
		s.t.Fatalf("delivered %v, want %v", s.order, want)
	}
}

// run plays ops (pairs of an event and its argument) on the table, then
// finishes the stream.
func (s *tableSim) run(ops []byte) {
	for i := 0; i+1 < len(ops) && s.failed == nil; i += 2 {
		op, arg := ops[i], ops[i+1]
		switch op % 8 {
		case 0, 1:
			s.issue(arg)
		case 2:
			s.hedgeOne(arg)
		case 3, 4:
			s.answer(arg, op/8, false)
		case 5:
			s.answer(arg, op/8, true)
		case 6:
			s.quarantine(tableMakers[int(arg)%len(tableMakers)])
		case 7:
			s.deliver(int(arg) % 4)
		}
		s.check()
	}
	if s.failed == nil {
		s.finish()
	}
}

// exactlyOnceSeeds are FuzzExactlyOnce's seed corpus: a stream
// configuration and events each.
func exactlyOnceSeeds() [][2][]byte {
	seeds := [][2][]byte{
		{{0, 0, 0, 0, 0, 0, 0}, {0, 0, 3, 0, 7, 1}},
		{{5, 1, 0, 1, 0, 0, 0}, {0, 0, 0, 1, 2, 0, 3, 0, 4, 1, 7, 3, 5, 0, 6, 2}},
		// Hedges failing and winning, peers lying, batches made unchecked.
		{{9, 1, 1, 2, 1, 2, 3}, {0, 1, 0, 2, 2, 0, 2, 1, 3, 0, 11, 1, 6, 2, 7, 3, 4, 0, 12, 1, 5, 1, 7, 3}},
	}
	// A batch failing on every try: the job fails after maxAttempts.
	fails := []byte{0, 0}
	for range maxAttempts {
		fails = append(fails, 3+8*1, 0, 0, 0)
	}
	seeds = append(seeds, [2][]byte{{2, 0, 0, 0, 0, 0, 0}, fails})
	r := rand.New(rand.NewPCG(36, 1))
	for range 32 {
		cfg, ops := make([]byte, 7), make([]byte, 2*(8+r.IntN(160)))
		for i := range cfg {
			cfg[i] = byte(r.Uint32())
		}
		for i := range ops {
			ops[i] = byte(r.Uint32())
		}
		seeds = append(seeds, [2][]byte{cfg, ops})
	}
	return seeds
}

// FuzzExactlyOnce: whatever the order of issues, hedges, answers (made,
// failed in every way, stale), quarantines and deliveries, every batch of
// the stream is delivered once and in order, or the job fails when a
// batch's failures that count reach maxAttempts, and only then.
func FuzzExactlyOnce(f *testing.F) {
	for _, s := range exactlyOnceSeeds() {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, cfg, ops []byte) {
		newTableSim(t, cfg).run(ops)
	})
}

// TestSeedsExactlyOnce: FuzzExactlyOnce's seed corpus, which go test
// runs, goes through each way a batch's leases can end: a job failed, a
// stale answer dropped, a hedge winning, a hedge taking over its failed
// lease, a batch leased again, a peer's lie, made batches dropped by a
// quarantine.
func TestSeedsExactlyOnce(t *testing.T) {
	var seen tableSeen
	for _, sd := range exactlyOnceSeeds() {
		s := newTableSim(t, sd[0])
		s.run(sd[1])
		seen.failedJob += s.seen.failedJob
		seen.dropped += s.seen.dropped
		seen.hedgeWon += s.seen.hedgeWon
		seen.promoted += s.seen.promoted
		seen.requeued += s.seen.requeued
		seen.mismatch += s.seen.mismatch
		seen.quarantineDropped += s.seen.quarantineDropped
	}
	t.Logf("over the seeds: %+v", seen)
	if seen.failedJob == 0 || seen.dropped == 0 || seen.hedgeWon == 0 || seen.promoted == 0 || seen.requeued == 0 || seen.mismatch == 0 || seen.quarantineDropped == 0 {
		t.Errorf("the seed corpus misses a way a lease ends: %+v", seen)
	}
}
