package coord

import (
	"context"
	"time"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Epochs, the reorder buffer and delivery: which batches an epoch wants,
// which went out, and the order they go out in. A ready batch the trainer
// has no credit for waits: that is the credit wait, which the window
// controller reads as "the buffer is full" and the idle watchdog as a
// trainer that stopped asking.

type batchID struct {
	epoch uint64
	k     int
}

// epochState is one epoch's delivery: which batches are wanted, which went
// out.
type epochState struct {
	epoch uint64
	plan  Plan
	want  int                // batches to deliver
	sent  int                // delivered
	done  map[int]bool       // delivered or skipped, past next
	next  int                // the lowest batch number not yet delivered or skipped
	end   *stokerv1.EpochEnd // counts what went out; sent when the epoch ends
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
func (c *Coordinator) newEpoch(e uint64) *epochState {
	es := &epochState{epoch: e, done: make(map[int]bool), end: &stokerv1.EpochEnd{Epoch: e}}
	if e == c.st.Epoch {
		es.plan = c.j.Plan(e, c.st.Consumed)
		es.next = min(c.st.Start, es.plan.Batches())
		for _, k := range c.st.Skip {
			if k < uint64(es.plan.Batches()) && int(k) >= es.next {
				es.markDone(int(k))
			}
		}
	} else {
		es.plan = c.j.Plan(e, 0)
	}
	es.want = es.plan.Batches() - es.next - len(es.done)
	return es
}

// lastEpoch reports whether e is the stream's last epoch.
func (c *Coordinator) lastEpoch(e uint64) bool {
	return c.st.Epochs > 0 && e+1 >= c.st.Epoch+c.st.Epochs
}

func (c *Coordinator) epochOf(e uint64) *epochState {
	switch {
	case c.cur.epoch == e:
		return c.cur
	case c.nextE != nil && c.nextE.epoch == e:
		return c.nextE
	}
	return nil
}

// deliver hands ready batches to out while credits last, closing epochs as
// they complete. done: the stream's last epoch is delivered.
func (c *Coordinator) deliver(ctx context.Context) (done bool, err error) {
	for {
		e := c.cur
		if e.sent == e.want {
			if err := c.emit(ctx, Output{End: e.end}); err != nil {
				return false, err
			}
			if c.lastEpoch(e.epoch) {
				return true, nil
			}
			if c.nextE == nil {
				c.nextE = c.newEpoch(e.epoch + 1)
			}
			c.cur, c.nextE = c.nextE, nil
			if err := c.emit(ctx, Output{Info: c.j.Info(c.cur.epoch, c.cur.plan)}); err != nil {
				return false, err
			}
			continue
		}
		k, ok := c.pick()
		if !ok {
			c.endCreditWait()
			return false, nil
		}
		if c.credits.Load() <= 0 {
			if c.creditWaitSince.Load() == 0 {
				c.creditWaitSince.Store(time.Now().UnixNano())
			}
			return false, nil
		}
		c.endCreditWait()
		id := batchID{e.epoch, k}
		b := c.ready[id]
		slot, inSlot := c.pool.handOut(b)
		if err := c.emit(ctx, Output{Epoch: e.epoch, K: k, Batch: b, Slot: slot, InSlot: inSlot}); err != nil {
			return false, err
		}
		delete(c.ready, id)
		delete(c.unchecked, id)
		delete(c.attempts, id)
		delete(c.whole, id)
		c.credits.Add(-1)
		e.markDone(k)
		e.sent++
		e.end.Batches++
		e.end.Samples += uint64(b.N)
		e.end.SampleErrors += uint64(len(b.Errors))
	}
}

// endCreditWait ends a wait of a ready batch for the trainer's credit,
// adding it up.
func (c *Coordinator) endCreditWait() {
	if t := c.creditWaitSince.Swap(0); t != 0 {
		c.creditWait += time.Since(time.Unix(0, t))
	}
}

// creditWaitFor is the time ready batches waited for the trainer's credit
// since the last call.
func (c *Coordinator) creditWaitFor(now time.Time) time.Duration {
	total := c.creditWait
	if t := c.creditWaitSince.Load(); t != 0 {
		total += now.Sub(time.Unix(0, t))
	}
	d := total - c.lastCreditWait
	c.lastCreditWait = total
	return d
}

// pick returns the current epoch's batch to deliver next: the next in
// order, or when as-ready the lowest-numbered ready one.
func (c *Coordinator) pick() (int, bool) {
	e := c.cur
	if !c.st.AsReady {
		_, ok := c.ready[batchID{e.epoch, e.next}]
		return e.next, ok
	}
	k, ok := -1, false
	for id := range c.ready {
		if id.epoch == e.epoch && (!ok || id.k < k) {
			k, ok = id.k, true
		}
	}
	return k, ok
}

// advanceCursor moves the lease cursor past batches that need no lease
// (skipped on resume), into the next epoch at the end of one, and stops it
// after the stream's last epoch or more than one epoch ahead of delivery.
func (c *Coordinator) advanceCursor() {
	for c.leasing {
		e := c.epochOf(c.cursor.epoch)
		if e == nil {
			if c.cursor.epoch != c.cur.epoch+1 || c.lastEpoch(c.cur.epoch) {
				c.leasing = false // resumed by deliver moving on
				return
			}
			c.nextE = c.newEpoch(c.cursor.epoch)
			e = c.nextE
			c.cursor.k = e.next
		}
		if c.cursor.k >= e.plan.Batches() {
			c.cursor = batchID{c.cursor.epoch + 1, 0}
			continue
		}
		if e.isDone(c.cursor.k) {
			c.cursor.k++
			continue
		}
		return
	}
}

// nextToLease returns the batch to lease next: a failed one first, else the
// cursor's.
func (c *Coordinator) nextToLease() (batchID, bool) {
	if len(c.retry) > 0 {
		return c.retry[0], true
	}
	if !c.leasing {
		// The cursor stopped one epoch ahead; delivery may have moved on.
		if c.cursor.epoch <= c.cur.epoch+1 && !c.lastEpoch(c.cur.epoch) || c.epochOf(c.cursor.epoch) != nil {
			c.leasing = true
			c.advanceCursor()
		}
		if !c.leasing {
			return batchID{}, false
		}
	}
	return c.cursor, true
}
