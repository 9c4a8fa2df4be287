package server

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/stoker-dev/stoker/pipeline"
)

// Making batches for benchmarks only (Config.BenchReplay, BenchRate): a
// worker whose capacity is a number the benchmark sets, whatever the
// machine it runs on, so that an autoscaler's loop can be measured with
// eight workers on two cores, each making what it claims.

// benchMaking is how this server's executor makes batches under the
// benchmark flags; nil without them. Every job the server opens, its own
// trainers' (the local maker) and remote coordinators' (Work streams),
// carries it to its execJob.
type benchMaking struct {
	// replay: each job's queue makes its first whole batch, then gives
	// every later batch that batch's pixels (a copy), with its own indices
	// and labels.
	replay bool
	// pace, when set, makes the executor a server of fixed rate: see pacer.
	pace *pacer
}

func newBenchMaking(cfg Config) *benchMaking {
	if !cfg.BenchReplay && cfg.BenchRate <= 0 {
		return nil
	}
	bm := &benchMaking{replay: cfg.BenchReplay}
	if cfg.BenchRate > 0 {
		bm.pace = &pacer{every: time.Duration(float64(time.Second) / cfg.BenchRate)}
	}
	return bm
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

// wait returns when a batch asked for now is made, or with ctx's error.
// A batch cancelled while it was the last in line gives back the time it
// had not yet used; one cancelled with others behind it leaves its slot
// unused (those behind are not moved up).
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	start := later(p.next, now)
	done := start.Add(p.every)
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

// fill makes batch epoch/indices of j into b on the queue e, under the
// benchmark flags.
func (bm *benchMaking) fill(ctx context.Context, e *execJob, j *job, epoch uint64, indices []int64, b *pipeline.Batch) error {
	if bm.pace != nil {
		if err := bm.pace.wait(ctx); err != nil {
			return err
		}
	}
	if bm.replay {
		if r := e.replayed.Load(); r != nil && r.N >= len(indices) {
			replayInto(b, r, j.ds, indices)
			return nil
		}
	}
	if err := e.q.Fill(ctx, j.ds, j.t, j.spec.GetSeed(), epoch, indices, j.policy, b); err != nil {
		return err
	}
	if bm.replay && len(b.Errors) == 0 && b.N == int(j.spec.GetBatchSize()) { // a whole batch, not an epoch's short last one
		e.replayed.CompareAndSwap(nil, &pipeline.Batch{N: b.N, Data: slices.Clone(b.Data)})
	}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// replayInto makes b a batch of the samples idx carrying r's pixels
// (Config.BenchReplay): a copy, where a real batch is a decode. Its indices
// and labels are the samples' own, so that a coordinator's checks of a
// peer's batches (indices and labels against its plan and dataset) pass;
// only a byte-for-byte check of its pixels would not (--verify-fraction).
func replayInto(b, r *pipeline.Batch, ds pipeline.Dataset, idx []int64) {
	n, per := len(idx), len(r.Data)/r.N
	b.N = n
	b.Data = append(b.Data[:0], r.Data[:n*per]...)
	b.Labels = b.Labels[:0]
	for _, i := range idx {
		b.Labels = append(b.Labels, ds.Label(int(i)))
	}
	b.Indices = append(b.Indices[:0], idx...)
	b.Errors = b.Errors[:0]
}
