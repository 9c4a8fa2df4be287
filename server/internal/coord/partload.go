package coord

import (
	"sync"
	"time"

	"github.com/stoker-dev/stoker/pipeline/batch"
)

// partLoad is what a job has in flight in parts on each maker: what says
// which makers take parts now (one on trial, a part at a time) and which
// are stuck. The parts' goroutines write it as their makers answer.
type partLoad struct {
	mu sync.Mutex
	on map[Maker]*partsOn
	// spare are parts' batches kept for the next batches in parts: their
	// labels, indices and errors (a part's pixels are its batch's, and a
	// spare one holds none).
	spare []*batch.Batch
}

// partsOn is a job's parts on one maker.
type partsOn struct {
	// leased counts its parts leased whose lease was not collected yet;
	// open those whose Make has not returned; answered is when one last
	// returned, or the first of those open was leased.
	leased, open int
	answered     time.Time
}

func newPartLoad() *partLoad { return &partLoad{on: make(map[Maker]*partsOn)} }

// leased records a part leased to m at now.
func (pl *partLoad) leased(m Maker, now time.Time) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	o := pl.on[m]
	if o == nil {
		o = &partsOn{}
		pl.on[m] = o
	}
	o.leased++
	if o.open++; o.open == 1 {
		o.answered = now // stuck counts from here
	}
}

// answer records m's answer to a part at now.
func (pl *partLoad) answer(m Maker, now time.Time) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	o := pl.on[m]
	o.open--
	o.answered = now
	pl.drop(m, o)
}

// collected records a part's lease on m collected.
func (pl *partLoad) collected(m Maker) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	o := pl.on[m]
	o.leased--
	pl.drop(m, o)
}

// drop forgets m when nothing of it is in flight (a stuck maker is one
// with parts open: its time since an answer counts from its next part).
func (pl *partLoad) drop(m Maker, o *partsOn) {
	if o.leased == 0 && o.open == 0 {
		delete(pl.on, m)
	}
}

// batches are n part batches, spare ones first.
func (pl *partLoad) batches(n int) []*batch.Batch {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	bs := make([]*batch.Batch, n)
	for i := range bs {
		if k := len(pl.spare); k > 0 {
			bs[i], pl.spare = pl.spare[k-1], pl.spare[:k-1]
		} else {
			bs[i] = new(batch.Batch)
		}
	}
	return bs
}

// spareAgain keeps the batches of parts of, done with, for the next.
func (pl *partLoad) spareAgain(of []ofPart) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for i := range of {
		b := of[i].b
		b.Data = nil // its batch's: not kept
		pl.spare = append(pl.spare, b)
		of[i].b = nil
	}
}

// inFlight is how many parts leased to m are not collected yet.
func (pl *partLoad) inFlight(m Maker) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if o := pl.on[m]; o != nil {
		return o.leased
	}
	return 0
}

// silent is how long m, with parts open, has not answered one; 0 when it
// has none open.
func (pl *partLoad) silent(m Maker, now time.Time) (open int, d time.Duration) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if o := pl.on[m]; o != nil && o.open > 0 {
		return o.open, now.Sub(o.answered)
	}
	return 0, 0
}
