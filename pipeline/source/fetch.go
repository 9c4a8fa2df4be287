package source

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Fetcher reads a store's ranges for a dataset, fast: Read answers from
// the Cache, else from a read-ahead already in flight or done (waiting for
// it), else with a ranged read of its own. Prefetch, told which ranges
// will be read soon (the deterministic plan knows), starts reading them in
// the background, so that by the time a decoder asks the bytes are here.
//
// Read-ahead is bounded three ways: requests in flight (per Fetcher),
// bytes read ahead and not yet consumed (a Budget, which Fetchers may
// share), and ranges hinted and not yet started; a hint past the last
// bound is dropped (its Read reads directly). Ranges of one object that
// are adjacent, or separated by a small gap, are read as one request of
// bounded size and split back. Bytes read ahead are released when read,
// or when they have gone unread for a while (a hint that never
// materialises does not pin memory); a range hinted and not started for
// that long is forgotten too. A failed read-ahead is not kept: the Read
// that wanted it reads directly, under the store's retry policy, and
// returns that read's error.
//
// A Fetcher is safe for concurrent use. Close stops its goroutines; it
// does not close the store.
type Fetcher struct {
	st     Store
	name   string // st.String(): the cache's key for the store
	cache  *Cache // nil: none
	budget *Budget
	o      fetchOptions

	ctx    context.Context // ends at Close: read-aheads stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // size 1: something changed, the loop looks again

	mu       sync.Mutex
	parts    map[cacheKey]*part // hinted ranges not yet read (store "")
	queued   groupList          // not started, in hint order
	done     groupList          // read, some ranges unread, in completion order
	nqueued  int                // ranges in queued groups
	inflight int                // groups being read
	held     int64              // of the budget, this Fetcher's bytes
	closed   bool

	ready, waited, failed, direct atomic.Int64
	requests, dropped, expired    atomic.Int64
}

// part is one hinted range, in its group until read or dropped.
type part struct {
	r Range
	g *group
}

type groupState int

const (
	groupQueued  groupState = iota
	groupReading            // a request is in flight
	groupRead               // done: buf or err is set
)

// group is one read-ahead request: ranges of one object read as one.
type group struct {
	obj   Object
	parts []*part // ranges hinted and not yet taken by a Read
	state groupState
	at    time.Time // hinted (queued) or read (done): expiry runs from it
	off   int64     // of buf, in the object
	buf   []byte    // set before done is closed, while there is no error
	err   error
	done  chan struct{} // closed when read
	held  int64         // budget bytes, given back at release
	// readers are Reads that took a range of the group and have not
	// copied it yet: buf stays until they have.
	readers    int
	prev, next *group
	list       *groupList
}

// NewFetcher returns a Fetcher over st and starts its loop.
func NewFetcher(st Store, opts ...FetchOption) *Fetcher {
	o := fetchOptions{maxInFlight: DefaultMaxInFlight, maxGap: DefaultMaxGap, maxReq: DefaultMaxRequest,
		unused: DefaultUnusedAfter, maxHints: DefaultMaxHints}
	for _, f := range opts {
		f(&o)
	}
	if o.budget == nil {
		o.budget = NewBudget(DefaultReadAhead)
	}
	o.maxInFlight = max(o.maxInFlight, 1)
	o.maxGap = max(o.maxGap, 0)
	o.maxReq = min(max(o.maxReq, 1), o.budget.Limit())
	if o.unused <= 0 {
		o.unused = DefaultUnusedAfter
	}
	f := &Fetcher{st: st, name: st.String(), cache: o.cache, budget: o.budget, o: o,
		kick: make(chan struct{}, 1), parts: map[cacheKey]*part{}}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.budget.wait(f.kick, true)
	f.wg.Add(1)
	go f.loop()
	return f
}

// Read implements Ranges.
func (f *Fetcher) Read(ctx context.Context, r Range, buf []byte) ([]byte, error) {
	return f.readCached(ctx, r, buf, nil)
}

// ReadChecked is Read for bytes that check must accept (say, against a
// content hash of the range): bytes from the cache are checked once, when
// first served or stored, and served again without it; bytes check
// refuses are never cached, and its error is returned.
func (f *Fetcher) ReadChecked(ctx context.Context, r Range, buf []byte, check func([]byte) error) ([]byte, error) {
	return f.readCached(ctx, r, buf, check)
}

// readCached is Read (check nil) and ReadChecked.
func (f *Fetcher) readCached(ctx context.Context, r Range, buf []byte, check func([]byte) error) ([]byte, error) {
	if r.Off < 0 || r.Len < 0 || r.Off+r.Len > r.Obj.Size {
		return nil, fmt.Errorf("%s: range [%d, %d) outside its %d bytes", r.Obj.Key, r.Off, r.Off+r.Len, r.Obj.Size)
	}
	var out []byte
	var ok bool
	if check == nil {
		out, ok = f.cache.Get(f.name, r, buf)
	} else {
		out, ok = f.cache.GetChecked(f.name, r, buf, check)
	}
	if ok {
		return out, nil
	}
	out, ok, err := f.readAhead(ctx, r, buf)
	if err != nil {
		return nil, err
	}
	if !ok {
		out = grow(buf, r.Len)
		if err := f.st.ReadRange(ctx, r.Obj, r.Off, out); err != nil {
			return nil, err
		}
	}
	if check == nil {
		f.cache.Put(f.name, r, out)
		return out, nil
	}
	if err := check(out); err != nil {
		return nil, err
	}
	f.cache.PutChecked(f.name, r, out)
	return out, nil
}

// readAhead answers r from a read-ahead, waiting for one in flight; ok
// false: there is none (or it failed), read directly.
func (f *Fetcher) readAhead(ctx context.Context, r Range, buf []byte) (out []byte, ok bool, err error) {
	f.mu.Lock()
	p := f.parts[keyOf("", r)]
	if p == nil {
		f.mu.Unlock()
		f.direct.Add(1)
		return nil, false, nil
	}
	g := p.g
	f.take(p)
	if g.state == groupQueued { // not started: read it now, directly
		f.mu.Unlock()
		f.direct.Add(1)
		return nil, false, nil
	}
	g.readers++
	wait := g.state == groupReading
	f.mu.Unlock()
	if wait {
		select {
		case <-g.done:
		case <-ctx.Done():
			f.unread(g)
			return nil, false, ctx.Err()
		}
	}
	// buf and err were set before done was closed, and buf stays while
	// this Read is among the readers.
	if g.err == nil {
		out = grow(buf, r.Len)
		copy(out, g.buf[r.Off-g.off:])
	}
	f.unread(g)
	switch {
	case g.err != nil:
		f.failed.Add(1)
		f.direct.Add(1)
	case wait:
		f.waited.Add(1)
	default:
		f.ready.Add(1)
	}
	return out, g.err == nil, nil
}

// take removes p from the hinted ranges. f.mu is held.
func (f *Fetcher) take(p *part) {
	delete(f.parts, keyOf("", p.r))
	g := p.g
	for i, q := range g.parts {
		if q == p {
			g.parts[i] = g.parts[len(g.parts)-1]
			g.parts[len(g.parts)-1] = nil
			g.parts = g.parts[:len(g.parts)-1]
			break
		}
	}
	if g.state == groupQueued {
		f.nqueued--
		if len(g.parts) == 0 {
			f.queued.remove(g)
		}
	}
}

// unread ends a Read's use of g's bytes.
func (f *Fetcher) unread(g *group) {
	f.mu.Lock()
	g.readers--
	f.maybeRelease(g)
	f.start() // the bytes given back may start the next
	f.mu.Unlock()
}

// maybeRelease gives g's bytes back once no range of it is left to read
// and no Read is copying from it. f.mu is held.
func (f *Fetcher) maybeRelease(g *group) {
	if g.state != groupRead || len(g.parts) > 0 || g.readers > 0 && g.err == nil || g.held == 0 {
		return
	}
	if g.list != nil {
		g.list.remove(g)
	}
	f.budget.give(g.held)
	f.held -= g.held
	g.held, g.buf = 0, nil
}

// Prefetch implements Ranges: it queues the ranges neither cached nor
// already hinted, coalesced, and starts the requests the bounds allow
// (the rest start as bytes are consumed and requests end). It keeps no
// reference to rs.
func (f *Fetcher) Prefetch(rs []Range) {
	if f.budget.Limit() == 0 || len(rs) == 0 {
		return
	}
	want := make([]Range, 0, len(rs))
	for _, r := range rs {
		switch {
		case r.Len <= 0 || r.Off < 0 || r.Off+r.Len > r.Obj.Size:
		case r.Len > f.o.maxReq:
			f.dropped.Add(1)
		case !f.cache.Contains(f.name, r):
			want = append(want, r)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	j := 0
	for _, r := range want {
		if f.parts[keyOf("", r)] == nil {
			want[j] = r
			j++
		}
	}
	want = want[:j]
	now := time.Now()
	for _, s := range coalesce(want, f.o.maxGap, f.o.maxReq) {
		g := &group{obj: s.obj, at: now, done: make(chan struct{})}
		for _, i := range s.members {
			k := keyOf("", want[i])
			switch {
			case f.parts[k] != nil: // twice in rs
			case f.nqueued >= f.o.maxHints:
				f.dropped.Add(1)
			default:
				p := &part{r: want[i], g: g}
				f.parts[k] = p
				g.parts = append(g.parts, p)
				f.nqueued++
			}
		}
		if len(g.parts) > 0 {
			f.queued.push(g)
		}
	}
	// Started here rather than by the loop: a Read right after this
	// finds its range in flight, not queued (which it would read itself).
	f.start()
	f.wake() // the loop's expiry timer
}

func (f *Fetcher) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// loop starts requests while the bounds allow and drops what went unused,
// until Close.
func (f *Fetcher) loop() {
	defer f.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		f.mu.Lock()
		next := f.expire(time.Now())
		f.start()
		f.mu.Unlock()
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-f.ctx.Done():
			return
		case <-f.kick:
		case <-timer.C:
		}
	}
}

// start sends the queued groups' requests, in hint order, while requests
// in flight and the budget allow. f.mu is held.
func (f *Fetcher) start() {
	for !f.closed && f.inflight < f.o.maxInFlight {
		g := f.queued.front()
		if g == nil {
			return
		}
		off, end := g.parts[0].r.Off, int64(0)
		for _, p := range g.parts {
			off, end = min(off, p.r.Off), max(end, p.r.Off+p.r.Len)
		}
		if !f.budget.take(end - off) {
			return // bytes given back wake the loop
		}
		f.queued.remove(g)
		f.nqueued -= len(g.parts)
		g.state, g.off, g.held = groupReading, off, end-off
		f.held += g.held
		f.inflight++
		f.requests.Add(1)
		f.wg.Add(1)
		go f.read(g)
	}
}

// read is one read-ahead request.
func (f *Fetcher) read(g *group) {
	defer f.wg.Done()
	buf := make([]byte, g.held)
	err := f.st.ReadRange(f.ctx, g.obj, g.off, buf)
	f.mu.Lock()
	g.state, g.at = groupRead, time.Now()
	f.inflight--
	if err != nil {
		// Not kept: the Reads that want these ranges read them directly.
		g.err = err
		f.failed.Add(int64(len(g.parts)))
		for _, p := range g.parts {
			delete(f.parts, keyOf("", p.r))
		}
		g.parts = nil
	} else {
		g.buf = buf
	}
	if len(g.parts) > 0 {
		f.done.push(g)
	}
	close(g.done)
	f.maybeRelease(g)
	f.start() // a request slot is free
	f.mu.Unlock()
	f.wake()
}

// expire drops the hints queued and the bytes read that have waited
// longer than the unused age, and returns when the next will have; zero:
// nothing waits. f.mu is held.
func (f *Fetcher) expire(now time.Time) time.Time {
	cut := now.Add(-f.o.unused)
	for g := f.queued.front(); g != nil && !g.at.After(cut); g = f.queued.front() {
		f.queued.remove(g)
		f.nqueued -= len(g.parts)
		f.drop(g)
	}
	for g := f.done.front(); g != nil && !g.at.After(cut); g = f.done.front() {
		f.done.remove(g)
		f.drop(g)
		f.maybeRelease(g)
	}
	var next time.Time
	for _, g := range []*group{f.queued.front(), f.done.front()} {
		if g != nil && (next.IsZero() || g.at.Before(next)) {
			next = g.at
		}
	}
	if next.IsZero() {
		return next
	}
	return next.Add(f.o.unused)
}

// drop forgets g's ranges not yet read. f.mu is held.
func (f *Fetcher) drop(g *group) {
	for _, p := range g.parts {
		delete(f.parts, keyOf("", p.r))
	}
	f.expired.Add(int64(len(g.parts)))
	g.parts = nil
}

// Close stops the read-aheads and gives their bytes back. Reads still
// work after it (from the cache, or directly); Prefetch does nothing.
func (f *Fetcher) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
	f.budget.wait(f.kick, false)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range []*groupList{&f.queued, &f.done} {
		for g := l.front(); g != nil; g = l.front() {
			l.remove(g)
			for _, p := range g.parts {
				delete(f.parts, keyOf("", p.r))
			}
			g.parts = nil
			f.maybeRelease(g)
		}
	}
	f.nqueued = 0
	return nil
}

func (l *groupList) front() *group { return l.head }

func (l *groupList) push(g *group) {
	g.list, g.prev, g.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = g
	} else {
		l.head = g
	}
	l.tail = g
}

func (l *groupList) remove(g *group) {
	if g.prev != nil {
		g.prev.next = g.next
	} else {
		l.head = g.next
	}
	if g.next != nil {
		g.next.prev = g.prev
	} else {
		l.tail = g.prev
	}
	g.list, g.prev, g.next = nil, nil, nil
}
