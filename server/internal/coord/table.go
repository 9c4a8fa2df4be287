package coord

import (
	"fmt"
	"slices"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

// The lease table: every batch of the epochs a stream runs, from the
// cursor that hands out the next one to lease, through its leases (a
// first lease and at most one hedge), its failures and the attempts they
// count, to the reorder buffer and its delivery. It is a state machine,
// as etcd raft's is: the coordinator steps it with each event (a lease
// issued or hedged, an answer, a quarantine, a delivery) and carries out
// what it decides (a batch ready, a lease to cancel, makers to blame, the
// job's failure). It starts no goroutine, calls no maker and reads no
// clock, so that a test drives it through any order of events
// (FuzzExactlyOnce). What makes it safe: a batch is made ready by one
// answer of one of its current leases only, and delivered once; a
// result for a lease that moved on, or for a batch already delivered, is
// dropped.

type batchID struct {
	epoch uint64
	k     int
}

func cmpBatch(a, b batchID) int {
	if a.epoch != b.epoch {
		return cmpU(a.epoch, b.epoch)
	}
	return a.k - b.k
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// maxAttempts bounds how often one batch's lease may fail, in failures
// that count, before the job fails with the last maker error: enough for
// several peers dying in a row.
const maxAttempts = 8

// planner is what the table knows of a job: its plans.
type planner interface {
	Plan(epoch, consumed uint64) Plan
}

// table is a job's lease table. Owned by the coordinator's goroutine.
type table struct {
	j  planner
	st Stream

	cur  *epochState // being delivered
	next *epochState // the next epoch, once leasing reached it
	// cursor is the next batch to lease, after retries, while leasing.
	cursor  batchID
	leasing bool
	retry   []batchID // failed batches, lowest first: leased before any new one

	leases map[batchID]*leaseRec // each batch's lease in flight
	hedges map[batchID]*leaseRec // and its hedge (hedge.go)
	lastID uint64                // the last lease's id
	// attempts counts each batch's failures that count (the batch's, not
	// a hedge's, not a maker turning it away).
	attempts map[batchID]int
	ready    map[batchID]*batch.Batch
	// unchecked: ready batches made by peers and not compared byte for
	// byte, by maker: made again if one is quarantined before they go out.
	unchecked map[batchID][]Maker
	// whole: batches to lease whole (a share of one, made by cache
	// affinity, had failed samples).
	whole map[batchID]bool
}

// newTable is the lease table of stream st of job j, at the stream's
// first epoch.
func newTable(j planner, st Stream) *table {
	t := &table{
		j: j, st: st,
		leases: make(map[batchID]*leaseRec), hedges: make(map[batchID]*leaseRec),
		attempts: make(map[batchID]int), ready: make(map[batchID]*batch.Batch),
		unchecked: make(map[batchID][]Maker), whole: make(map[batchID]bool),
	}
	t.cur = t.newEpoch(st.Epoch)
	t.cursor, t.leasing = batchID{t.cur.epoch, t.cur.next}, true
	t.advanceCursor()
	return t
}

// epochState is one epoch's delivery: which batches are wanted, which went
// out.
type epochState struct {
	epoch uint64
	plan  Plan
	want  int          // batches to deliver
	sent  int          // delivered
	done  map[int]bool // delivered or skipped, past next
	next  int          // the lowest batch number not yet delivered or skipped
	end   *EpochEnd    // counts what went out; sent when the epoch ends
}

func (e *epochState) markDone(k int) {
	e.done[k] = true
	for e.done[e.next] {
		delete(e.done, e.next)
		e.next++
	}
}

func (e *epochState) isDone(k int) bool { return k < e.next || e.done[k] }

// newEpoch sets up epoch e's delivery; the first epoch takes the stream's
// resume point.
func (t *table) newEpoch(e uint64) *epochState {
	es := &epochState{epoch: e, done: make(map[int]bool), end: &EpochEnd{Epoch: e}}
	if e == t.st.Epoch {
		es.plan = t.j.Plan(e, t.st.Consumed)
		es.next = min(t.st.Start, es.plan.Batches())
		for _, k := range t.st.Skip {
			if k < uint64(es.plan.Batches()) && int(k) >= es.next {
				es.markDone(int(k))
			}
		}
	} else {
		es.plan = t.j.Plan(e, 0)
	}
	es.want = es.plan.Batches() - es.next - len(es.done)
	return es
}

// lastEpoch reports whether e is the stream's last epoch.
func (t *table) lastEpoch(e uint64) bool {
	return t.st.Epochs > 0 && e+1 >= t.st.Epoch+t.st.Epochs
}

func (t *table) epochOf(e uint64) *epochState {
	switch {
	case t.cur.epoch == e:
		return t.cur
	case t.next != nil && t.next.epoch == e:
		return t.next
	}
	return nil
}

// batch is batch id's sample indices.
func (t *table) batch(id batchID) []int64 { return t.epochOf(id.epoch).plan.Batch(id.k) }

// copies is batch id's samples' copies (repeated augmentation), nil
// without.
func (t *table) copies(id batchID) []uint32 {
	if p, ok := t.epochOf(id.epoch).plan.(CopyPlan); ok {
		return p.Copies(id.k)
	}
	return nil
}

// awaited is the batch delivery waits for.
func (t *table) awaited() batchID { return batchID{t.cur.epoch, t.cur.next} }

// inFlight is how many batches are leased (their hedges apart).
func (t *table) inFlight() int { return len(t.leases) }

// advanceCursor moves the lease cursor past batches that need no lease
// (skipped on resume), into the next epoch at the end of one, and stops it
// after the stream's last epoch or more than one epoch ahead of delivery.
func (t *table) advanceCursor() {
	for t.leasing {
		e := t.epochOf(t.cursor.epoch)
		if e == nil {
			if t.cursor.epoch != t.cur.epoch+1 || t.lastEpoch(t.cur.epoch) {
				t.leasing = false // resumed by delivery moving on
				return
			}
			t.next = t.newEpoch(t.cursor.epoch)
			e = t.next
			t.cursor.k = e.next
		}
		if t.cursor.k >= e.plan.Batches() {
			t.cursor = batchID{t.cursor.epoch + 1, 0}
			continue
		}
		if e.isDone(t.cursor.k) {
			t.cursor.k++
			continue
		}
		return
	}
}

// toLease returns the batch to lease next: a failed one first, else the
// cursor's.
func (t *table) toLease() (batchID, bool) {
	if len(t.retry) > 0 {
		return t.retry[0], true
	}
	if !t.leasing {
		// The cursor stopped one epoch ahead; delivery may have moved on.
		if t.cursor.epoch <= t.cur.epoch+1 && !t.lastEpoch(t.cur.epoch) || t.epochOf(t.cursor.epoch) != nil {
			t.leasing = true
			t.advanceCursor()
		}
		if !t.leasing {
			return batchID{}, false
		}
	}
	return t.cursor, true
}

// issue records rec as the lease of batch id, toLease's batch, and takes
// the batch off the queue.
func (t *table) issue(id batchID, rec *leaseRec) {
	if len(t.retry) > 0 {
		t.retry = t.retry[1:]
	} else {
		t.cursor.k++
		t.advanceCursor()
	}
	t.lastID++
	rec.id, rec.hedge = t.lastID, false
	t.leases[id] = rec
}

// hedge records rec as the hedge of batch id, leased already.
func (t *table) hedge(id batchID, rec *leaseRec) {
	t.lastID++
	rec.id, rec.hedge = t.lastID, true
	t.hedges[id] = rec
}

// requeue puts a failed batch back, to be leased before any new one.
func (t *table) requeue(id batchID) {
	i, _ := slices.BinarySearchFunc(t.retry, id, cmpBatch)
	t.retry = slices.Insert(t.retry, i, id)
}

// answer is a lease's answer as the table takes it.
type answer struct {
	id    batchID
	lease uint64
	b     *batch.Batch
	// err is why it failed (nil: made); blames when makers other than
	// lead are to blame.
	err  error
	lead Maker
	// unchecked are the makers of samples of b not compared byte for
	// byte.
	unchecked []Maker
}

// outcome is what the table made of an answer.
type outcome struct {
	// rec is the lease answered, other the batch's other lease in flight
	// (first or hedge), when it had one.
	rec, other *leaseRec
	// dropped: the answer is not one of a current lease's (it moved on,
	// or its batch was delivered): its buffer is free again.
	dropped bool
	// made: the batch is ready; other, if any, was outrun (cancel it).
	made bool
	// blames are who failed it, worst first (not made); err ends the job:
	// the batch failed maxAttempts times, or a maker said the job cannot
	// go on (lease.ErrJobFailed: err is its error).
	blames blames
	err    error
}

// answer takes answer a. A batch made is ready, and its other lease
// outrun; a batch made with samples of a maker quarantined meanwhile
// (quarantined says which) and not compared byte for byte fails as that
// maker's mismatch. A failure of its hedge leaves the batch to its first
// lease; of its first lease, to its hedge if it has one, else the batch
// is leased again, before any new batch. A failure counts as an attempt
// when one of its blames does (kindOf); a share of the batch with failed
// samples has it leased whole from then on.
func (t *table) answer(a answer, quarantined func(Maker) bool) outcome {
	first, hedge := t.leases[a.id], t.hedges[a.id]
	var o outcome
	switch {
	case first != nil && first.id == a.lease:
		o.rec, o.other = first, hedge
	case hedge != nil && hedge.id == a.lease:
		o.rec, o.other = hedge, first
	}
	if e := t.epochOf(a.id.epoch); o.rec == nil || e == nil || e.isDone(a.id.k) {
		return outcome{dropped: true}
	}
	t.forget(a.id, o.rec)
	err := a.err
	for _, m := range a.unchecked {
		if err == nil && quarantined(m) {
			// Made by a peer quarantined since (by this job or another):
			// not to be trusted unless checked byte for byte.
			err = blames{{m, fmt.Errorf("%w: made by a quarantined peer", ErrMismatch)}}
		}
	}
	if err == nil {
		if o.other != nil {
			t.forget(a.id, o.other)
		}
		t.ready[a.id] = a.b
		if len(a.unchecked) > 0 {
			t.unchecked[a.id] = a.unchecked
		}
		o.made = true
		return o
	}
	switch {
	case o.rec.hedge:
	case o.other != nil:
		// The hedge goes on, as the batch's lease now.
		t.promote(a.id)
	default:
		t.requeue(a.id)
	}
	o.blames = blamesOf(err, a.lead)
	counts := false
	for _, f := range o.blames {
		k := kindOf(f.err)
		counts = counts || k.counts()
		if k == failSamples {
			t.whole[a.id] = true // one maker makes it again, whole
		}
		if k == failJob && o.err == nil {
			o.err = f.err // the job ends with it, as the maker said it
		}
	}
	if o.err != nil {
		return o
	}
	if counts && !o.rec.hedge { // a hedge's failure is its maker's, not an attempt of the batch's
		t.attempts[a.id]++
	}
	if o.other == nil && !o.rec.hedge && t.attempts[a.id] >= maxAttempts {
		o.err = fmt.Errorf("%w: batch %d of epoch %d failed %d times; last, on %s: %w", ErrBatchFailed, a.id.k, a.id.epoch, maxAttempts, o.blames[0].m.Name(), err)
	}
	return o
}

// forget ends lease rec of batch id.
func (t *table) forget(id batchID, rec *leaseRec) {
	if rec.hedge {
		delete(t.hedges, id)
	} else {
		delete(t.leases, id)
	}
}

// promote makes batch id's hedge its lease.
func (t *table) promote(id batchID) {
	h := t.hedges[id]
	delete(t.hedges, id)
	h.hedge = false
	t.leases[id] = h
}

// quarantined makes again every batch of a maker quarantined (says
// quarantined) that was not checked byte for byte: those made and not yet
// delivered, and those still in flight (their answers will be dropped)
// unless their other lease is on a maker not quarantined. It returns the
// buffers of the batches made that it dropped.
func (t *table) quarantined(quarantined func(Maker) bool) (drop []*batch.Batch) {
	for id, ms := range t.unchecked {
		if !slices.ContainsFunc(ms, quarantined) {
			continue
		}
		delete(t.unchecked, id)
		if b, ok := t.ready[id]; ok {
			delete(t.ready, id)
			drop = append(drop, b)
			t.requeue(id)
		}
	}
	for id, h := range t.hedges {
		if quarantined(h.maker) {
			delete(t.hedges, id) // its answer, when it comes, is dropped
		}
	}
	for id, rec := range t.leases {
		if !quarantined(rec.maker) {
			continue
		}
		delete(t.leases, id) // its answer, when it comes, is dropped
		if t.hedges[id] != nil {
			t.promote(id)
			continue
		}
		t.requeue(id)
	}
	return drop
}

// toDeliver is the current epoch's batch to deliver next, when it is
// ready: the next in order, or when as-ready the lowest-numbered ready
// one.
func (t *table) toDeliver() (batchID, bool) {
	e := t.cur
	if !t.st.AsReady {
		id := batchID{e.epoch, e.next}
		_, ok := t.ready[id]
		return id, ok
	}
	k, ok := -1, false
	for id := range t.ready {
		if id.epoch == e.epoch && (!ok || id.k < k) {
			k, ok = id.k, true
		}
	}
	return batchID{e.epoch, k}, ok
}

// delivered records ready batch id as handed to the trainer.
func (t *table) delivered(id batchID) {
	b := t.ready[id]
	delete(t.ready, id)
	delete(t.unchecked, id)
	delete(t.attempts, id)
	delete(t.whole, id)
	e := t.cur
	e.markDone(id.k)
	e.sent++
	e.end.Batches++
	e.end.Samples += uint64(b.N)
	e.end.SampleErrors += uint64(len(b.Errors))
}

// epochDelivered reports whether every batch of the current epoch went
// out.
func (t *table) epochDelivered() bool { return t.cur.sent == t.cur.want }

// nextEpoch moves delivery on to the next epoch.
func (t *table) nextEpoch() {
	if t.next == nil {
		t.next = t.newEpoch(t.cur.epoch + 1)
	}
	t.cur, t.next = t.next, nil
}
