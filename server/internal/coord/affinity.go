package coord

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
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
// samples to their home, each maker making its samples straight into
// their places in the batch's buffer (lease.Lease.Place): no buffer of
// their own, no copy. The bytes are the same whoever
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

// weighted is a score on a maker of routing weight w (weighted rendezvous
// hashing: a maker's share of the samples is its weight's share of the
// weights): w / -ln(u), u the score as a number in (0, 1). With equal
// weights it orders makers as the scores do.
func weighted(s uint64, w float64) float64 {
	u := (float64(s>>11) + 0.5) / (1 << 53)
	return w / -math.Log(u)
}

// ranker ranks makers for a sample: by score alone while their weights
// are equal, by weighted score otherwise.
type ranker struct {
	keys    []uint64
	weights []float64
	equal   bool
}

func (c *Coordinator) ranker(ms []Maker) ranker {
	r := ranker{keys: make([]uint64, len(ms)), weights: make([]float64, len(ms)), equal: true}
	for i, m := range ms {
		r.keys[i] = c.makerKey(m)
		r.weights[i] = c.stat(m).routeWeight()
		if r.weights[i] != r.weights[0] {
			r.equal = false
		}
	}
	return r
}

// rank is maker i's rank for sample idx: the higher, the better (its
// score, or its weighted score when the weights differ).
type rank struct {
	s uint64
	w float64
}

func (r ranker) rank(i int, idx int64) rank {
	v := rank{s: score(r.keys[i], idx)}
	if !r.equal {
		v.w = weighted(v.s, r.weights[i])
	}
	return v
}

// above reports whether rank a is above rank b.
func (r ranker) above(a, b rank) bool {
	if r.equal {
		return a.s > b.s
	}
	return a.w > b.w
}

// Routing weights. Makers differ (a worker with fewer cores, or on a
// loaded machine), and a batch is as late as its slowest part: with equal
// shares the pool would move at its slowest maker's pace. So each
// maker's share of the samples follows the rate its parts were made at
// (samples per second of a part, from lease to answer), as a power of two
// of the fastest maker's: a weight moves only when the rate moved past
// twice or half of it for reweighTicks control ticks in a row (2 s), so
// that a burst of noise on a loaded machine moves no sample, and a change
// moves only the samples it must (rendezvous).

// reweighTicks is how many control ticks in a row a maker's rate must be
// past twice or half its weight for the weight to move.
const reweighTicks = 4

// minWeight bounds a maker's routing weight: one 64 times slower still
// keeps a share, and its rate measured.
const minWeight = 1.0 / 64

func (st *makerStat) routeWeight() float64 {
	if st.weight == 0 {
		return 1
	}
	return st.weight
}

// partMade records a part of n samples made in took.
func (st *makerStat) partMade(n int, took time.Duration) {
	rate := float64(n) / max(took.Seconds(), 1e-6)
	if st.partRate == 0 {
		st.partRate = rate
	} else {
		st.partRate = 0.8*st.partRate + 0.2*rate
	}
	st.fails = 0 // on trial no more
}

// reweigh sets the makers' routing weights from their parts' rates: each
// the power of two nearest its rate over the fastest's, when that was past
// twice or half its weight for reweighTicks ticks in a row.
func (c *Coordinator) reweigh(ms []Maker) {
	fastest := 0.0
	for _, m := range ms {
		if st := c.stats[m]; st != nil && c.usable(m) {
			fastest = max(fastest, st.partRate)
		}
	}
	if fastest == 0 {
		return
	}
	for _, m := range ms {
		st := c.stats[m]
		if st == nil || st.partRate == 0 {
			continue
		}
		ratio, w := st.partRate/fastest, st.routeWeight()
		if ratio >= w/2 && ratio <= w*2 {
			st.drift = 0
			continue
		}
		if st.drift++; st.drift >= reweighTicks {
			st.weight = min(max(math.Exp2(math.Round(math.Log2(ratio))), minWeight), 1)
			st.drift = 0
		}
	}
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
		if c.stuck(st, now) {
			continue
		}
		takers = append(takers, m)
	}
	return homes, takers
}

// stuck reports whether a maker with parts in flight answered none for as
// long as a lease is hedged after (twice the p95 of the job's lease times,
// per part in flight on it), and at least an eighth of the lease timeout: a
// peer stopped or hung. Its samples go to the next makers of their ranking
// meanwhile, rather than every batch wait for its room until its parts
// time out; it takes parts again once it answers. The floor keeps a
// healthy maker whose parts queue behind each other (a worker with fewer
// cores than parts) from being taken for stuck: the job's lease times
// are a lead's whole batches, not a maker's queue.
func (c *Coordinator) stuck(st *makerStat, now time.Time) bool {
	open := st.open.Load()
	if open <= 0 {
		return false
	}
	d := c.env.Config.LeaseTimeout / stuckShare
	if c.hedging.perLease > 0 {
		d = max(time.Duration(hedgeMultiple*c.hedging.perLease*float64(open)*float64(time.Second)), d)
	}
	return d > 0 && now.Sub(time.Unix(0, st.answered.Load())) > d
}

// waitsOnStuck reports whether lease rec, in parts, waits for a stuck
// maker.
func (c *Coordinator) waitsOnStuck(rec *leaseRec) bool {
	if rec.parts == nil {
		return false
	}
	now := time.Now()
	for _, m := range waitsFor(rec) {
		if c.stuck(c.stat(m), now) {
			return true
		}
	}
	return false
}

// stuckShare: before a job's first batch, a maker is stuck after this
// share of the lease timeout.
const stuckShare = 8

// split routes the samples of batch indices to makers: each to its home
// when the home can take a part now, else to the next of its ranking that
// can. It returns the parts (in takers' order), and how many samples went
// to their home. No parts when fewer than two makers can take one.
func (c *Coordinator) split(ms []Maker, indices []int64) (parts []part, home int) {
	homes, takers := c.affinityGroups(ms, time.Now())
	if len(takers) < 2 {
		return nil, 0
	}
	r := c.ranker(homes)
	byMaker := make(map[Maker]*part, len(takers))
	for _, m := range takers {
		byMaker[m] = &part{m: m, st: c.stat(m)}
	}
	for pos, idx := range indices {
		best, bestTaker := -1, -1
		var bestR, takerR rank
		for i, m := range homes {
			v := r.rank(i, idx)
			if best < 0 || r.above(v, bestR) {
				best, bestR = i, v
			}
			if byMaker[m] != nil && (bestTaker < 0 || r.above(v, takerR)) {
				bestTaker, takerR = i, v
			}
		}
		if bestTaker == best {
			home++
		}
		p := byMaker[homes[bestTaker]]
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
	var homes []Maker
	mine := -1
	for _, o := range ms {
		if c.usable(o) {
			if o == m {
				mine = len(homes)
			}
			homes = append(homes, o)
		}
	}
	if mine < 0 {
		return 0
	}
	r := c.ranker(homes)
	n := 0
	for _, idx := range indices {
		at, v := true, r.rank(mine, idx)
		for i := range homes {
			if i != mine && r.above(r.rank(i, idx), v) {
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

// makeParts makes the parts of lease l and assembles them into b. ctx is
// the job's, lctx the lease's. It returns whether every sample was
// compared byte for byte (or made on this server), the makers of parts
// that were not, how long each part took, and the failed parts (with the
// worst failure as err).
func (c *Coordinator) makeParts(ctx, lctx context.Context, l *lease.Lease, b *pipeline.Batch, parts []part) (checked bool, unchecked []Maker, took []time.Duration, failed []partFailure, err error) {
	pctx, cancel := context.WithCancel(lctx)
	defer cancel()
	type outcome struct {
		i       int
		checked bool
		err     error
		// cancelled: the part's context had ended as its maker
		// answered (another part had failed, or the lease ended).
		cancelled bool
	}
	done := make(chan outcome, len(parts))
	// Each part is made straight into its places in the batch's buffer
	// (lease.Lease.Place: a peer's pixels from gRPC's buffers, the local
	// executor's from its decoders): no buffer of its own, no copy. Its
	// labels and indices are its own, put in place by assemble.
	bufs := make([]*pipeline.Batch, len(parts))
	took = make([]time.Duration, len(parts))
	size, n := c.j.SampleBytes(), len(l.Indices)
	if cap(b.Data) < n*size {
		b.Data = make([]byte, n*size)
	}
	b.Data = b.Data[:n*size]
	for i, p := range parts {
		pb := &pipeline.Batch{Data: b.Data}
		bufs[i] = pb
		pl := &lease.Lease{Epoch: l.Epoch, Number: l.Number, Indices: p.idx, Demand: l.Demand, Place: p.pos}
		trusted := p.m.Trusted()
		if !trusted {
			pl.Keep = c.env.Verifier.Pick(p.m, len(p.idx), c.j.BatchSize())
		}
		go func() {
			p.st.starting.Add(-1) // Make counts it from here
			t0 := time.Now()
			made, err := c.makePart(pctx, p.m, pl, pb)
			took[i] = time.Since(t0)
			p.out.Store(false)
			p.st.answered.Store(time.Now().UnixNano())
			p.st.open.Add(-1)
			cancelled := pctx.Err() != nil
			ok := trusted
			if err == nil {
				err = c.checkPart(pl, pb)
			}
			if err == nil && len(pb.Errors) > 0 {
				err = errSamplesFailed
			}
			if err == nil && !trusted {
				ok, err = c.env.Verifier.Verify(ctx, c.j, pl, pb, made.Kept)
			}
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
		if o.err != nil && err == nil {
			err = o.err
		}
		switch {
		case o.err == nil:
			if !o.checked {
				checked = false
				unchecked = append(unchecked, p.m)
			}
		case o.cancelled && lctx.Err() == nil && !errors.Is(o.err, ErrMismatch) && !errors.Is(o.err, lease.ErrRefused):
			// Cancelled here because another part had failed: not its
			// maker's failure.
		default:
			if errors.Is(lctx.Err(), context.DeadlineExceeded) && !errors.Is(o.err, ErrMismatch) {
				o.err = fmt.Errorf("%w: %v", context.DeadlineExceeded, o.err)
			}
			failed = append(failed, partFailure{p.m, o.err})
		}
	}
	if len(failed) > 0 {
		// The worst first: a lie, then a failure, then a part to make
		// again whole, then a maker turning it away.
		slices.SortStableFunc(failed, func(a, b partFailure) int { return failRank(a.err) - failRank(b.err) })
		return false, nil, nil, failed, failed[0].err
	}
	if err != nil {
		// Every failed part was cancelled as it failed (the lease
		// ended): the batch is not whole, whoever is to blame.
		return false, nil, nil, nil, err
	}
	if err := lctx.Err(); errors.Is(err, context.Canceled) {
		// Outrun by the batch's other lease (or the job ended).
		return false, nil, nil, nil, fmt.Errorf("lease of batch %d cancelled: %w", l.Number, err)
	}
	assemble(b, n, parts, bufs)
	return checked, unchecked, took, nil, nil
}

// checkPart is check for a part: a peer's part leaves its pixels in the
// whole batch (lease.Lease.Place), its other fields its own.
func (c *Coordinator) checkPart(l *lease.Lease, b *pipeline.Batch) error {
	if l.Place == nil {
		return c.check(l, b)
	}
	if b.N < 0 || b.N > len(l.Indices) || len(b.Labels) != b.N || len(b.Indices) != b.N {
		return fmt.Errorf("batch %d: a part of %d samples with %d labels and %d indices for %d samples", l.Number, b.N, len(b.Labels), len(b.Indices), len(l.Indices))
	}
	return nil
}

// busyRetry is how long a part turned away as busy waits before it asks
// its maker again, and busyGiveUp the share of the lease timeout it keeps
// asking for.
const (
	busyRetry  = 20 * time.Millisecond
	busyGiveUp = 4
)

// makePart makes part l on m, asking again while m turns it away as busy
// (lease.ErrBusy: another job's lease took its room since the part was
// routed, or the worker has not yet seen the cancellation of one it
// held), for up to a quarter of the lease timeout. Failing the lease
// instead would cancel its other parts, whose slots a worker frees only
// when the cancellations reach it: the next parts sent would be turned
// away in turn, and a pool of several jobs would spin.
func (c *Coordinator) makePart(ctx context.Context, m Maker, l *lease.Lease, b *pipeline.Batch) (lease.Made, error) {
	giveUp := time.Now().Add(c.env.Config.LeaseTimeout / busyGiveUp)
	for {
		made, err := m.Make(ctx, c.j, l, b)
		if !errors.Is(err, lease.ErrBusy) || !time.Now().Add(busyRetry).Before(giveUp) {
			return made, err
		}
		t := time.NewTimer(busyRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return made, err
		case <-t.C:
		}
	}
}

func failRank(err error) int {
	switch {
	case errors.Is(err, ErrMismatch):
		return 0
	case errors.Is(err, lease.ErrBusy), errors.Is(err, lease.ErrDraining):
		return 3
	case errors.Is(err, errSamplesFailed):
		return 2
	}
	return 1
}

// assemble puts the labels and indices of parts' batches (bufs) at their
// places in b, a batch of n samples whose pixels the parts made in place
// (lease.Lease.Place), and adds up their stage times.
func assemble(b *pipeline.Batch, n int, parts []part, bufs []*pipeline.Batch) {
	b.N = n
	b.Labels = slices.Grow(b.Labels[:0], n)[:n]
	b.Indices = slices.Grow(b.Indices[:0], n)[:n]
	b.Errors = b.Errors[:0]
	b.Times = pipeline.StageTimes{}
	for i, p := range parts {
		pb := bufs[i]
		for s, pos := range p.pos {
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
