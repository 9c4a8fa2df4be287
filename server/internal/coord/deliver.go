package coord

import (
	"context"
	"sync/atomic"
	"time"
)

// Delivery: the reorder buffer's batches handed to the trainer, in order
// (or as ready) and as its credits allow. A ready batch the trainer has
// no credit for waits: that is the credit wait, which the window
// controller reads as "the buffer is full" and the idle watchdog as a
// trainer that stopped asking.

// credit is the trainer's credits and the wait of made batches for them.
type credit struct {
	n       atomic.Int64
	granted chan struct{} // size 1: "credits changed"
	// waitSince is when a ready batch began waiting for the trainer's
	// credit (Unix ns), 0 when none waits: the idle watchdog reads it.
	// waited adds up the time spent so, for the window controller;
	// lastWaited is waited at the controller's last decision.
	waitSince          atomic.Int64
	waited, lastWaited time.Duration
}

// deliver hands ready batches to out while credits last, closing epochs as
// they complete. done: the stream's last epoch is delivered.
func (c *Coordinator) deliver(ctx context.Context) (done bool, err error) {
	t := c.table
	for {
		if t.epochDelivered() {
			if err := c.emit(ctx, Output{End: t.cur.end}); err != nil {
				return false, err
			}
			if t.lastEpoch(t.cur.epoch) {
				return true, nil
			}
			t.nextEpoch()
			if err := c.emit(ctx, Output{Start: &EpochStart{Epoch: t.cur.epoch, Plan: t.cur.plan}}); err != nil {
				return false, err
			}
			continue
		}
		id, ok := t.toDeliver()
		if !ok {
			c.endCreditWait()
			return false, nil
		}
		if c.credit.n.Load() <= 0 {
			if c.credit.waitSince.Load() == 0 {
				c.credit.waitSince.Store(time.Now().UnixNano())
			}
			return false, nil
		}
		c.endCreditWait()
		b := t.ready[id]
		slot, inSlot := c.pool.handOut(b)
		if err := c.emit(ctx, Output{Epoch: id.epoch, K: id.k, Batch: b, Slot: slot, InSlot: inSlot}); err != nil {
			return false, err
		}
		t.delivered(id)
		c.credit.n.Add(-1)
	}
}

// endCreditWait ends a wait of a ready batch for the trainer's credit,
// adding it up.
func (c *Coordinator) endCreditWait() {
	if t := c.credit.waitSince.Swap(0); t != 0 {
		c.credit.waited += time.Since(time.Unix(0, t))
	}
}

// creditWaitFor is the time ready batches waited for the trainer's credit
// since the last call.
func (c *Coordinator) creditWaitFor(now time.Time) time.Duration {
	total := c.credit.waited
	if t := c.credit.waitSince.Load(); t != 0 {
		total += now.Sub(time.Unix(0, t))
	}
	d := total - c.credit.lastWaited
	c.credit.lastWaited = total
	return d
}
