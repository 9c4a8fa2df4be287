// Package making is how a stoker server's executor makes batches for
// benchmarks only (stoker serve --bench-replay, --bench-rate): a worker
// whose capacity is a number the benchmark sets, whatever the machine it
// runs on, so that an autoscaler's loop can be measured with eight
// workers on two cores, each making what it claims. The server knows none
// of it: stoker serve wraps its executor's making with Making.Wrap
// (server.Config.Making).
package making

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
)

// MakeFunc makes one job's batch of the samples indices of epoch into b,
// reusing b's buffers: the executor's way, or a wrapper's. Given place (a
// part of a batch, leased by cache affinity), sample i goes to place[i]
// in b.Data, the whole batch's.
type MakeFunc func(ctx context.Context, epoch uint64, indices []int64, place []int, b *pipeline.Batch) error

// Making is how the executor makes batches under the benchmark flags.
type Making struct {
	// replay: each job makes its first whole batch, then gives every
	// later batch that batch's pixels (a copy), with its own indices and
	// labels.
	replay bool
	// pace, when set, makes the executor a server of fixed rate: see
	// pacer. One for every job: it is the executor's.
	pace *pacer
}

// MaxRate bounds --bench-rate.
const MaxRate = 1e6

// New is the making of --bench-replay (replay) and --bench-rate (rate
// batches per second; 0: no limit); nil when neither is asked for.
func New(replay bool, rate float64) (*Making, error) {
	if !(rate >= 0 && rate <= MaxRate) {
		return nil, fmt.Errorf("bench rate %v: want 0..1e6 batches per second (0: no limit)", rate)
	}
	if !replay && rate == 0 {
		return nil, nil
	}
	m := &Making{replay: replay}
	if rate > 0 {
		m.pace = &pacer{every: time.Duration(float64(time.Second) / rate)}
	}
	return m, nil
}

// pacer makes batches one after another at a fixed rate, as a single
// server with a fixed service time: a batch asked for while the executor is
// idle is done every later; one asked for while others are queued is done
// every after the last of them. So the executor is never faster than its
// rate, and exactly as fast while it has work: its batches per busy second,
// what the advisor measures of a maker, are the rate (were it a token
// bucket instead, a batch asked for when idle would be done at once, and
// the busy rate would be unbounded).
type pacer struct {
	every time.Duration

	mu   sync.Mutex
	next time.Time // when the last batch queued is done
}

// wait returns when a batch asked for now is made, or with ctx's error:
// a share of a batch (a part of one, leased by cache affinity, or an
// epoch's short last batch) takes that share of the time.
// A batch cancelled while it was the last in line gives back the time it
// had not yet used; one cancelled with others behind it leaves its slot
// unused (those behind are not moved up).
func (p *pacer) wait(ctx context.Context, share float64) error {
	p.mu.Lock()
	now := time.Now()
	start := later(p.next, now)
	done := start.Add(time.Duration(float64(p.every) * share))
	p.next = done
	p.mu.Unlock()
	t := time.NewTimer(done.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		if p.next.Equal(done) {
			p.next = later(start, time.Now())
		}
		p.mu.Unlock()
		return ctx.Err()
	}
}

// Wrap is how one job of dataset ds, of batches of batchSize, is made:
// make (the executor's way) under the benchmark flags. Every job the
// server opens, its own trainers' and remote coordinators' (Work
// streams), is wrapped.
func (m *Making) Wrap(ds dataset.Dataset, batchSize int, make MakeFunc) MakeFunc {
	var replayed atomic.Pointer[pipeline.Batch] // the job's largest batch made yet, up to a whole one
	return func(ctx context.Context, epoch uint64, indices []int64, place []int, b *pipeline.Batch) error {
		if m.pace != nil {
			if err := m.pace.wait(ctx, float64(len(indices))/float64(max(batchSize, 1))); err != nil {
				return err
			}
		}
		if m.replay {
			if r := replayed.Load(); r != nil && r.N >= len(indices) {
				replayInto(b, r, ds, indices, place)
				return nil
			}
		}
		if err := make(ctx, epoch, indices, place, b); err != nil {
			return err
		}
		// A part made at its places is not kept: its samples' size is not
		// known here (a whole batch's is its bytes over its samples).
		if m.replay && len(b.Errors) == 0 && place == nil {
			// Parts of batches (cache affinity) are smaller than a batch:
			// the largest made yet is kept, until a whole one is.
			for r := replayed.Load(); (r == nil || r.N < b.N) && b.N <= batchSize; r = replayed.Load() {
				if replayed.CompareAndSwap(r, &pipeline.Batch{N: b.N, Data: slices.Clone(b.Data)}) {
					break
				}
			}
		}
		return nil
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// replayInto makes b a batch of the samples idx carrying r's pixels
// (--bench-replay): a copy, where a real batch is a decode; given place,
// each at its place in b.Data. Its indices and labels are the samples'
// own, so that a coordinator's checks of a peer's batches (indices and
// labels against its plan and dataset) pass; only a byte-for-byte check
// of its pixels would not (--verify-fraction).
func replayInto(b, r *pipeline.Batch, ds dataset.Dataset, idx []int64, place []int) {
	n, per := len(idx), len(r.Data)/r.N
	b.N = n
	if place != nil {
		for i, at := range place {
			copy(b.Data[at*per:(at+1)*per], r.Data[i*per:(i+1)*per])
		}
	} else {
		b.Data = append(b.Data[:0], r.Data[:n*per]...)
	}
	b.Labels = b.Labels[:0]
	for _, i := range idx {
		b.Labels = append(b.Labels, ds.Label(int(i)))
	}
	b.Indices = append(b.Indices[:0], idx...)
	b.Errors = b.Errors[:0]
}
