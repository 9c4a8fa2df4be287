package coord

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
)

// Cache affinity. A maker keeps what it learnt of the files it read (the
// coefficient cache, a bucket's bytes), so a sample made again where it
// was made before costs less. For the pool's caches to add up, rather than
// each hold a random share of the dataset, every sample has a home maker:
// the one of the makers the job can use (usable) with the highest
// rendezvous score for the sample's dataset index, so that a maker joining
// or leaving moves only the samples it gains or held. A batch is leased in
// parts, one per home among its samples, each part a lease of those
// samples to their home; the coordinator copies the parts into the
// batch's buffer, in the plan's order. The bytes are the same whoever
// makes each sample (its pixels are a function of seed, epoch and index
// alone), so the batch is the one a single maker would make.
//
// The parts of a batch stand or fall together: a part that fails fails
// the lease, its maker is blamed as a whole lease's would be (a back-off
// takes it out of the homes, so its samples go to the next maker in their
// ranking, and a quarantine, or leaving, out of the makers), and the batch
// is leased again. A part that reports failed samples has the batch made
// again whole, by one maker: how a fail policy fills a batch depends on
// all of its samples. Hedges are whole batches.

// part is the samples of one batch made by one maker.
type part struct {
	m   Maker
	st  *makerStat
	pos []int   // the samples' places in the batch, ascending
	idx []int64 // their dataset indices, in that order
	// out: its maker has not answered yet (set by start, cleared by
	// makeParts): a lease in parts waits for these makers.
	out *atomic.Bool
}

// waitsFor is the makers lease rec waits for: its maker, or, leased in
// parts, the makers of its parts not answered yet (its lead when none
// is). Its hedge goes to another maker, and counts them slow when it
// outruns the lease.
func waitsFor(rec *leaseRec) []Maker {
	var ms []Maker
	for _, p := range rec.parts {
		if p.out.Load() {
			ms = append(ms, p.m)
		}
	}
	if len(ms) == 0 {
		ms = append(ms, rec.maker)
	}
	return ms
}

// partFailure is a part that failed, and why: the maker to blame.
type partFailure struct {
	m   Maker
	err error
}

// errSamplesFailed: a part came back with failed samples; the batch is made
// again whole.
var errSamplesFailed = errors.New("a part has failed samples: the batch is made again whole")

// makerKey is m's rendezvous key: its name's hash (a peer's address, so a
// peer that reconnects, or is dialled again, keeps its samples).
func (c *Coordinator) makerKey(m Maker) uint64 {
	k, ok := c.keys[m]
	if !ok {
		h := fnv.New64a()
		h.Write([]byte(m.Name()))
		k = mix64(h.Sum64())
		c.keys[m] = k
	}
	return k
}

// score is sample idx's rendezvous score on the maker keyed key.
func score(key uint64, idx int64) uint64 {
	return mix64(key ^ uint64(idx)*0x9e3779b97f4a7c15)
}

// mix64 is SplitMix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// affinityGroups are the makers a batch's samples are routed among: homes
// are the makers the job can use, and takers those of them that can take a
// part now (not backing off after a failure; one on trial after a back-off
// takes one part at a time).
func (c *Coordinator) affinityGroups(ms []Maker, now time.Time) (homes, takers []Maker) {
	for _, m := range ms {
		if !c.usable(m) {
			continue
		}
		homes = append(homes, m)
		st := c.stat(m)
		if st.fails > 0 && (now.Before(st.retryAt) || st.parts > 0) {
			continue
		}
		takers = append(takers, m)
	}
	return homes, takers
}

// split routes the samples of batch indices to makers: each to its home
// when the home can take a part now, else to the next of its ranking that
// can. It returns the parts (in takers' order), and how many samples went
// to their home. No parts when fewer than two makers can take one.
func (c *Coordinator) split(ms []Maker, indices []int64) (parts []part, home int) {
	homes, takers := c.affinityGroups(ms, time.Now())
	if len(takers) < 2 {
		return nil, 0
	}
	homeKeys := make([]uint64, len(homes))
	for i, m := range homes {
		homeKeys[i] = c.makerKey(m)
	}
	byMaker := make(map[Maker]*part, len(takers))
	for _, m := range takers {
		byMaker[m] = &part{m: m, st: c.stat(m)}
	}
	for pos, idx := range indices {
		var best, bestTaker Maker
		var bestS, bestTakerS uint64
		for i, m := range homes {
			s := score(homeKeys[i], idx)
			if best == nil || s > bestS {
				best, bestS = m, s
			}
			if byMaker[m] != nil && (bestTaker == nil || s > bestTakerS) {
				bestTaker, bestTakerS = m, s
			}
		}
		if bestTaker == best {
			home++
		}
		p := byMaker[bestTaker]
		p.pos = append(p.pos, pos)
		p.idx = append(p.idx, idx)
	}
	for _, m := range takers {
		if p := byMaker[m]; len(p.pos) > 0 {
			parts = append(parts, *p)
		}
	}
	return parts, home
}

// homeShare counts how many of indices have m as their home among the
// makers the job can use (a whole batch's lease).
func (c *Coordinator) homeShare(ms []Maker, m Maker, indices []int64) int {
	var keys []uint64
	mine := -1
	for _, o := range ms {
		if c.usable(o) {
			if o == m {
				mine = len(keys)
			}
			keys = append(keys, c.makerKey(o))
		}
	}
	if mine < 0 {
		return 0
	}
	n := 0
	for _, idx := range indices {
		s := score(keys[mine], idx)
		at := true
		for i, k := range keys {
			if i != mine && score(k, idx) > s {
				at = false
				break
			}
		}
		if at {
			n++
		}
	}
	return n
}

// fullPart is the first of parts whose maker has no room for it now.
func fullPart(parts []part) Maker {
	for _, p := range parts {
		if p.st.free(p.m) <= 0 {
			return p.m
		}
	}
	return nil
}

// partBufs are part buffers, shared by a server's coordinators (a part's
// pixels are copied into its batch as soon as all parts are in).
var partBufs = sync.Pool{New: func() any { return new(pipeline.Batch) }}

// makeParts makes the parts of lease l and assembles them into b. ctx is
// the job's, lctx the lease's. It returns whether every sample was
// compared byte for byte (or made on this server), the makers of parts
// that were not, and the failed parts (with the first failure as err).
func (c *Coordinator) makeParts(ctx, lctx context.Context, l *work.Lease, b *pipeline.Batch, parts []part) (checked bool, unchecked []Maker, failed []partFailure, err error) {
	pctx, cancel := context.WithCancel(lctx)
	defer cancel()
	type outcome struct {
		i       int
		checked bool
		err     error
		// cancelled: the part failed with the parts already cancelled
		// (by another part's failure, or the lease's end).
		cancelled bool
	}
	done := make(chan outcome, len(parts))
	bufs := make([]*pipeline.Batch, len(parts))
	for i, p := range parts {
		pb := partBufs.Get().(*pipeline.Batch)
		bufs[i] = pb
		pl := &work.Lease{Epoch: l.Epoch, Number: l.Number, Indices: p.idx, Demand: l.Demand}
		local := p.m.Local()
		if !local {
			pl.Keep = c.env.Verifier.Pick(p.m, len(p.idx))
		}
		go func() {
			p.st.starting.Add(-1) // Make counts it from here
			err := p.m.Make(pctx, c.j, pl, pb)
			p.out.Store(false)
			ok := local
			if err == nil {
				err = c.check(pl, pb)
			}
			if err == nil && len(pb.Errors) > 0 {
				err = errSamplesFailed
			}
			if err == nil && !local {
				ok, err = c.env.Verifier.Verify(ctx, c.j, pl, pb)
			}
			// Read before this part's own cancel below: a part that
			// fails is to blame unless another had cancelled it.
			cancelled := err != nil && pctx.Err() != nil
			if err != nil && !errors.Is(err, errSamplesFailed) {
				cancel() // the batch fails: the other parts are not needed
			}
			done <- outcome{i, ok, err, cancelled}
		}()
	}
	checked = true
	for range parts {
		o := <-done
		p := parts[o.i]
		switch {
		case o.err == nil:
			if !o.checked {
				checked = false
				unchecked = append(unchecked, p.m)
			}
		case o.cancelled && lctx.Err() == nil && !errors.Is(o.err, ErrMismatch) && !errors.Is(o.err, work.ErrRefused):
			// Cancelled here because another part failed: not its
			// maker's failure.
		default:
			if errors.Is(lctx.Err(), context.DeadlineExceeded) && !errors.Is(o.err, ErrMismatch) {
				o.err = fmt.Errorf("%w: %v", context.DeadlineExceeded, o.err)
			}
			failed = append(failed, partFailure{p.m, o.err})
		}
	}
	defer func() {
		for _, pb := range bufs {
			partBufs.Put(pb)
		}
	}()
	if len(failed) > 0 {
		// The worst first: a lie, then a failure, then a part to make
		// again whole, then a maker turning it away.
		slices.SortStableFunc(failed, func(a, b partFailure) int { return failRank(a.err) - failRank(b.err) })
		return false, nil, failed, failed[0].err
	}
	if err := lctx.Err(); errors.Is(err, context.Canceled) {
		// Outrun by the batch's other lease (or the job ended).
		return false, nil, nil, fmt.Errorf("lease of batch %d cancelled: %w", l.Number, err)
	}
	assemble(b, c.j.SampleBytes(), len(l.Indices), parts, bufs)
	return checked, unchecked, nil, nil
}

func failRank(err error) int {
	switch {
	case errors.Is(err, ErrMismatch):
		return 0
	case errors.Is(err, work.ErrBusy), errors.Is(err, work.ErrDraining):
		return 3
	case errors.Is(err, errSamplesFailed):
		return 2
	}
	return 1
}

// assemble copies parts' batches (bufs) into b, a batch of n samples of
// size bytes: each part's samples at their places.
func assemble(b *pipeline.Batch, size, n int, parts []part, bufs []*pipeline.Batch) {
	if cap(b.Data) < n*size {
		b.Data = make([]byte, n*size)
	}
	b.N, b.Data = n, b.Data[:n*size]
	b.Labels = slices.Grow(b.Labels[:0], n)[:n]
	b.Indices = slices.Grow(b.Indices[:0], n)[:n]
	b.Errors = b.Errors[:0]
	b.Times = pipeline.StageTimes{}
	for i, p := range parts {
		pb := bufs[i]
		for s, pos := range p.pos {
			copy(b.Data[pos*size:(pos+1)*size], pb.Data[s*size:(s+1)*size])
			b.Labels[pos], b.Indices[pos] = pb.Labels[s], pb.Indices[s]
		}
		t := pb.Times
		b.Times.Queue += t.Queue
		b.Times.Read += t.Read
		b.Times.Decode += t.Decode
		b.Times.Transform += t.Transform
		b.Times.Wall = max(b.Times.Wall, t.Wall)
	}
}
