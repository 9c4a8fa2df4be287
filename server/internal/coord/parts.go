package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline/batch"
)

// A batch in parts. With cache affinity on (router.go), a batch is leased
// in parts, one per home among its samples, each part a lease of those
// samples to their home, each maker making its samples straight into
// their places in the batch's buffer (lease.Lease.Place): no buffer of
// their own, no copy. The bytes are the same whoever makes each sample
// (its pixels are a function of seed, epoch and index alone), so the
// batch is the one a single maker would make.
//
// To the lease table a batch in parts is one lease like any other,
// counted in the stats of a lead maker (the parts' makers in turn): the
// parts are a lessee (inParts) that makes the batch as a maker would, and
// answers it made, or failed with each failed part blamed on its maker
// (blames). The parts of a batch stand or fall together: a part that
// fails fails the lease, its maker is blamed as a whole lease's would be
// (a back-off takes it out of the makers that take parts, so its samples
// go to the next maker in their ranking, and a quarantine, or leaving,
// out of the homes), and the batch is leased again. A part that reports
// failed samples has the batch made again whole, by one maker: how a fail
// policy fills a batch depends on all of its samples. Hedges are whole
// batches.

// stuckShare: before a job's first batch, a maker is stuck after this
// share of the lease timeout.
const stuckShare = 8

// stuck reports whether m, with parts in flight, answered none for as
// long as a lease is hedged after (twice the p95 of the job's lease times,
// per part in flight on it), and at least an eighth of the lease timeout:
// a peer stopped or hung. Its samples go to the next makers of their
// ranking meanwhile, rather than every batch wait for its room until its
// parts time out; it takes parts again once it answers. The floor keeps a
// healthy maker whose parts queue behind each other (a worker with fewer
// cores than parts) from being taken for stuck: the job's lease times are
// a lead's whole batches, not a maker's queue.
func (c *Coordinator) stuck(m Maker, now time.Time) bool {
	open, silent := c.parts.silent(m, now)
	if open <= 0 {
		return false
	}
	d := c.env.Config.LeaseTimeout / stuckShare
	if c.hedging.perLease > 0 {
		d = max(time.Duration(hedgeMultiple*c.hedging.perLease*float64(open)*float64(time.Second)), d)
	}
	return d > 0 && silent > d
}

// routeNow is the job's route now: over the makers it can use (usable),
// those marked that can take a part (not backing off after a failure, one
// on trial after a back-off a part at a time, not stuck).
func (c *Coordinator) routeNow(ms []Maker, now time.Time) *route {
	var homes []Maker
	var takes []bool
	for _, m := range ms {
		if !c.usable(m) {
			continue
		}
		st := c.stat(m)
		backingOff := st.fails > 0 && (now.Before(st.retryAt) || c.parts.inFlight(m) > 0)
		homes = append(homes, m)
		takes = append(takes, !backingOff && !c.stuck(m, now))
	}
	return c.routing.at(homes, takes)
}

// byAffinity is how batch id is leased by cache affinity: in parts, with
// how many of its samples go to their home; nil when the job does not
// route by affinity, the batch is to be made whole, or fewer than two
// makers can take a part (it goes whole, to the maker choose picks); or
// wait, a maker a part would go to that has no room now: the job waits
// for it (the caller registers the wait: its Freed wakes the job), since
// another maker would make the part uncached.
func (c *Coordinator) byAffinity(ms []Maker, id batchID) (by lessee, home int, wait Maker) {
	if !c.env.Config.Affinity || c.table.whole[id] {
		return nil, 0, nil
	}
	parts, home := c.routeNow(ms, time.Now()).Split(c.table.batch(id))
	if parts == nil {
		return nil, 0, nil
	}
	for _, p := range parts {
		if c.stat(p.m).free(p.m) <= 0 {
			return nil, 0, p.m
		}
	}
	return c.newInParts(parts, id.k), home, nil
}

// waitsOnStuck reports whether lease rec, in parts, waits for a stuck
// maker.
func (c *Coordinator) waitsOnStuck(rec *leaseRec) bool {
	if _, ok := rec.by.(*inParts); !ok {
		return false
	}
	now := time.Now()
	for _, m := range rec.by.waitsFor() {
		if c.stuck(m, now) {
			return true
		}
	}
	return false
}

// inParts is a batch leased in parts, as a lessee: each part a lease of
// its own to its maker, made at its places in the batch's buffer.
type inParts struct {
	c      *Coordinator
	parts  []part
	of     []ofPart
	leader Maker
}

// ofPart is what a lease in parts keeps of each part.
type ofPart struct {
	st *makerStat // its maker's
	// out: its maker has not answered yet (set as the lease is issued,
	// cleared by make): a lease in parts waits for these makers.
	out atomic.Bool
	// b is its batch: its own labels, indices and errors, the batch's
	// pixels (from partLoad, as the lease is issued, given back as it
	// ends); took how long its maker took.
	b    *batch.Batch
	took time.Duration
	// counted ends its count in its maker's starting (makerStat.start).
	counted func()
}

// newInParts leases parts of batch number k, its lead (whose stats the
// lease counts in) the parts' makers in turn.
func (c *Coordinator) newInParts(parts []part, k int) *inParts {
	ip := &inParts{c: c, parts: parts, of: make([]ofPart, len(parts)), leader: parts[k%len(parts)].m}
	for i, p := range parts {
		ip.of[i].st = c.stat(p.m)
	}
	return ip
}

func (ip *inParts) lead() Maker { return ip.leader }

func (ip *inParts) String() string {
	names := make([]string, len(ip.parts))
	for i, p := range ip.parts {
		names[i] = p.m.Name()
	}
	return "parts on " + strings.Join(names, ", ")
}

// waitsFor is the makers of the parts not answered yet (the lead when
// all are): a hedge goes to another maker, and counts them slow when it
// outruns the lease.
func (ip *inParts) waitsFor() []Maker {
	var ms []Maker
	for i, p := range ip.parts {
		if ip.of[i].out.Load() {
			ms = append(ms, p.m)
		}
	}
	if len(ms) == 0 {
		ms = append(ms, ip.leader)
	}
	return ms
}

func (ip *inParts) issued(now time.Time, _ *lease.Lease) {
	bs := ip.c.parts.batches(len(ip.parts))
	for i, p := range ip.parts {
		o := &ip.of[i]
		o.out.Store(true)
		o.b = bs[i]
		ip.c.parts.leased(p.m, now)
		o.counted = o.st.start()
		ip.c.env.Metrics.Leases.WithLabelValues(p.m.Name()).Inc()
	}
}

func (ip *inParts) ended() {
	for _, p := range ip.parts {
		ip.c.parts.collected(p.m)
	}
	ip.c.parts.spareAgain(ip.of)
}

// make makes the parts of lease l and puts their labels and indices in
// place in b: made, with the makers of the parts not compared byte for
// byte and each part's rate; or failed, with the failed parts blamed on
// their makers, worst first. ctx is the job's, lctx the lease's.
func (ip *inParts) make(ctx, lctx context.Context, l *lease.Lease, b *batch.Batch) made {
	c := ip.c
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
	done := make(chan outcome, len(ip.parts))
	// Each part is made straight into its places in the batch's buffer
	// (lease.Lease.Place: a peer's pixels from gRPC's buffers, the local
	// executor's from its decoders): no buffer of its own, no copy. Its
	// labels and indices are its own, put in place by assemble.
	size, n := c.j.SampleBytes(), len(l.Indices)
	if cap(b.Data) < n*size {
		b.Data = make([]byte, n*size)
	}
	b.Data = b.Data[:n*size]
	for i, p := range ip.parts {
		o := &ip.of[i]
		pb := o.b
		pb.Data = b.Data
		pl := &lease.Lease{Epoch: l.Epoch, Number: l.Number, Indices: p.idx, Demand: l.Demand, Place: p.pos, Counted: o.counted}
		if l.Copies != nil {
			// A part's samples are at their places in the batch: the
			// lease's order.
			pl.Copies = make([]uint32, len(p.pos))
			for i, at := range p.pos {
				pl.Copies[i] = l.Copies[at]
			}
		}
		trusted := p.m.Trusted()
		if !trusted {
			pl.Keep = c.env.Verifier.Pick(p.m, len(p.idx), c.j.BatchSize())
		}
		go func() {
			t0 := time.Now()
			made, err := c.makePart(pctx, p.m, pl, pb)
			o.counted() // if its maker did not say
			o.took = time.Since(t0)
			o.out.Store(false)
			c.parts.answer(p.m, time.Now())
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
	var (
		err       error
		failed    blames
		unchecked []Maker
	)
	for range ip.parts {
		o := <-done
		p := ip.parts[o.i]
		if o.err != nil && err == nil {
			err = o.err
		}
		switch {
		case o.err == nil:
			if !o.checked {
				unchecked = append(unchecked, p.m)
			}
		case o.cancelled && lctx.Err() == nil && !errors.Is(o.err, ErrMismatch) && !errors.Is(o.err, lease.ErrRefused):
			// Cancelled here because another part had failed: not its
			// maker's failure.
		default:
			if errors.Is(lctx.Err(), context.DeadlineExceeded) && !errors.Is(o.err, ErrMismatch) {
				o.err = fmt.Errorf("%w: %v", context.DeadlineExceeded, o.err)
			}
			failed = append(failed, blame{p.m, o.err})
		}
	}
	if len(failed) > 0 {
		// The worst first: a lie, then a failure, then a part to make
		// again whole, then a maker turning it away.
		slices.SortStableFunc(failed, func(a, b blame) int { return failRank(a.err) - failRank(b.err) })
		return made{err: failed}
	}
	if err != nil {
		// Every failed part was cancelled as it failed (the lease
		// ended): the batch is not whole, whoever is to blame (the lead).
		return made{err: err}
	}
	if err := lctx.Err(); errors.Is(err, context.Canceled) {
		// Outrun by the batch's other lease (or the job ended).
		return made{err: fmt.Errorf("lease of batch %d cancelled: %w", l.Number, err)}
	}
	assemble(b, n, ip.parts, ip.of)
	rates := make([]sampleRate, len(ip.parts))
	for i, p := range ip.parts {
		rates[i] = sampleRate{p.m, len(p.idx), ip.of[i].took}
	}
	return made{unchecked: unchecked, rates: rates}
}

// rated records how fast the makers of a batch in parts made their parts:
// their routing weights follow, and each is on trial no more.
func (c *Coordinator) rated(rs []sampleRate) {
	for _, r := range rs {
		c.routing.rated(r.m, r.n, r.took)
		c.stat(r.m).fails = 0
	}
}

// errSamplesFailed: a part came back with failed samples; the batch is made
// again whole.
var errSamplesFailed = errors.New("a part has failed samples: the batch is made again whole")

// checkPart is check for a part: it leaves its pixels in the whole batch
// (lease.Lease.Place), its other fields its own.
func (c *Coordinator) checkPart(l *lease.Lease, b *batch.Batch) error {
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
func (c *Coordinator) makePart(ctx context.Context, m Maker, l *lease.Lease, b *batch.Batch) (lease.Made, error) {
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

// assemble puts the labels and indices of parts' batches (of) at their
// places in b, a batch of n samples whose pixels the parts made in place
// (lease.Lease.Place), and adds up their stage times.
func assemble(b *batch.Batch, n int, parts []part, of []ofPart) {
	b.N = n
	b.Labels = slices.Grow(b.Labels[:0], n)[:n]
	b.Indices = slices.Grow(b.Indices[:0], n)[:n]
	b.Errors = b.Errors[:0]
	b.Times = batch.StageTimes{}
	// The samples' traces, where the parts carry them (the job asked):
	// each at its sample's place.
	traced := len(parts) > 0
	for i := range parts {
		traced = traced && len(of[i].b.Traces) == len(parts[i].pos)
	}
	b.Trace = traced
	b.Traces = b.Traces[:0]
	if traced {
		b.Traces = slices.Grow(b.Traces, n)[:n]
	}
	// The samples' fields likewise, each moved (not copied) from its
	// part's batch, which takes the whole batch's buffers in exchange.
	var fs batch.FieldSpec
	if len(parts) > 0 {
		fs = of[0].b.FieldSet
	}
	nf := batch.FieldCount(fs)
	for i := range parts {
		if of[i].b.FieldSet != fs || len(of[i].b.Fields) != len(parts[i].pos)*nf {
			fs, nf = nil, 0 // not asked for (or a part without them: the header has none, and the client says so)
		}
	}
	b.SetFields(fs, n)
	for i, p := range parts {
		pb := of[i].b
		for s, pos := range p.pos {
			b.Labels[pos], b.Indices[pos] = pb.Labels[s], pb.Indices[s]
			if traced {
				b.Traces[pos] = append(b.Traces[pos][:0], pb.Traces[s]...)
			}
			for f := range nf {
				b.Fields[pos*nf+f], pb.Fields[s*nf+f] = pb.Fields[s*nf+f], b.Fields[pos*nf+f]
			}
		}
		b.Times.Add(pb.Times)
		b.Times.Wall = max(b.Times.Wall, pb.Times.Wall)
	}
}
