package source

import (
	"cmp"
	"slices"
	"sync"
)

// span is one planned GET: ranges of one object, adjacent or separated by
// gaps of at most the coalescing gap, read as one request.
type span struct {
	obj      Object
	off, end int64
	first    int   // the hint position of its earliest range
	members  []int // positions in the hint of its ranges
}

// coalesce plans the GETs of rs (hint order): the ranges of one object
// whose gaps are at most maxGap are read as one request of at most
// maxRequest bytes (a range longer than that alone is its own request).
// The plan is in hint order of each request's earliest range, so what is
// needed first is asked for first. Ranges must have Len > 0.
func coalesce(rs []Range, maxGap, maxRequest int64) []span {
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := &rs[a], &rs[b]
		if c := cmp.Compare(ra.Obj.Key, rb.Obj.Key); c != 0 {
			return c
		}
		if c := cmp.Compare(ra.Obj.Version, rb.Obj.Version); c != 0 {
			return c
		}
		return cmp.Compare(ra.Off, rb.Off)
	})
	var out []span
	for _, i := range order {
		r := &rs[i]
		end := r.Off + r.Len
		if n := len(out); n > 0 {
			s := &out[n-1]
			if sameObject(s.obj, r.Obj) && r.Off-s.end <= maxGap && max(end, s.end)-s.off <= maxRequest {
				s.end = max(s.end, end)
				s.first = min(s.first, i)
				s.members = append(s.members, i)
				continue
			}
		}
		out = append(out, span{obj: r.Obj, off: r.Off, end: end, first: i, members: []int{i}})
	}
	slices.SortFunc(out, func(a, b span) int { return cmp.Compare(a.first, b.first) })
	return out
}

func sameObject(a, b Object) bool {
	return a.Key == b.Key && a.Version == b.Version && a.Size == b.Size && a.ModTime.Equal(b.ModTime)
}

// Budget bounds the bytes read ahead and not yet consumed, over every
// Fetcher that shares it (one per remote dataset of a server). A Fetcher
// takes a request's bytes before it sends the request and gives them back
// when its ranges have been read, or have gone unread too long. Safe for
// concurrent use.
type Budget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	// waiters are the Fetchers' wake-up channels (size 1): bytes given
	// back may let any of them start a request.
	waiters map[chan struct{}]struct{}
}

// NewBudget returns a Budget of limit bytes.
func NewBudget(limit int64) *Budget {
	return &Budget{limit: max(limit, 0), waiters: map[chan struct{}]struct{}{}}
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Used is the bytes taken now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *Budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// give returns n bytes and wakes every waiter.
func (b *Budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	for w := range b.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (b *Budget) wait(w chan struct{}, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.waiters[w] = struct{}{}
	} else {
		delete(b.waiters, w)
	}
}
