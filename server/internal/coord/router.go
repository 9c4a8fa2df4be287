package coord

import (
	"hash/fnv"
	"math"
	"slices"
	"time"
)

// Routing by cache affinity. A maker keeps what it learnt of the files it
// read (the coefficient cache, a bucket's bytes), so a sample made again
// where it was made before costs less. For the pool's caches to add up,
// rather than each hold a random share of the dataset, every sample has a
// home maker: the one of the makers the job can use (usable) with the
// highest rendezvous score for the sample's dataset index, so that a
// maker joining or leaving moves only the samples it gains or held.
//
// Makers differ (a worker with fewer cores, or on a loaded machine), and
// a batch is as late as its slowest part: with equal shares the pool
// would move at its slowest maker's pace. So each maker's share of the
// samples follows the rate its parts were made at (samples per second of
// a part, from lease to answer), as a power of two of the fastest
// maker's: a weight moves only when the rate moved past twice or half of
// it for reweighTicks control ticks in a row (2 s), so that a burst of
// noise on a loaded machine moves no sample, and a change moves only the
// samples it must (weighted rendezvous hashing).
//
// The router keeps the keys and weights; a route is an immutable snapshot
// of them over the makers the job can use, with which of them can take a
// part now (parts.go says which), rebuilt when those makers change, a
// weight moves, or a maker goes stuck or backs off. Split and HomeShare
// are pure functions of a route.

// router is a job's routing by cache affinity: each maker's rendezvous
// key and routing weight, and the route last built from them. Owned by
// the coordinator's goroutine.
type router struct {
	keys    map[Maker]uint64
	weights map[Maker]*weight
	last    *route
}

func newRouter() router {
	return router{keys: make(map[Maker]uint64), weights: make(map[Maker]*weight)}
}

// weight is what the router measured of one maker's speed.
type weight struct {
	// rate is the samples per second its parts were made at, EWMA; 0
	// until one was.
	rate float64
	// w is its routing weight (0: 1), from rate; drift counts the control
	// ticks in a row its rate was out of w's band.
	w     float64
	drift int
}

// reweighTicks is how many control ticks in a row a maker's rate must be
// past twice or half its weight for the weight to move.
const reweighTicks = 4

// minWeight bounds a maker's routing weight: one 64 times slower still
// keeps a share, and its rate measured.
const minWeight = 1.0 / 64

// key is m's rendezvous key: its name's hash (a peer's address, so a peer
// that reconnects, or is dialled again, keeps its samples).
func (r *router) key(m Maker) uint64 {
	k, ok := r.keys[m]
	if !ok {
		h := fnv.New64a()
		h.Write([]byte(m.Name()))
		k = mix64(h.Sum64())
		r.keys[m] = k
	}
	return k
}

// weightOf is m's routing weight.
func (r *router) weightOf(m Maker) float64 {
	if w := r.weights[m]; w != nil && w.w != 0 {
		return w.w
	}
	return 1
}

// rated records that m made n samples of a batch in took (a part).
func (r *router) rated(m Maker, n int, took time.Duration) {
	w := r.weights[m]
	if w == nil {
		w = &weight{}
		r.weights[m] = w
	}
	rate := float64(n) / max(took.Seconds(), 1e-6)
	if w.rate == 0 {
		w.rate = rate
	} else {
		w.rate = 0.8*w.rate + 0.2*rate
	}
}

// reweigh sets the routing weights of ms from their parts' rates: each
// the power of two nearest its rate over the fastest usable maker's, when
// that was past twice or half its weight for reweighTicks ticks in a row.
func (r *router) reweigh(ms []Maker, usable func(Maker) bool) {
	fastest := 0.0
	for _, m := range ms {
		if w := r.weights[m]; w != nil && usable(m) {
			fastest = max(fastest, w.rate)
		}
	}
	if fastest == 0 {
		return
	}
	for _, m := range ms {
		w := r.weights[m]
		if w == nil || w.rate == 0 {
			continue
		}
		ratio, cur := w.rate/fastest, r.weightOf(m)
		if ratio >= cur/2 && ratio <= cur*2 {
			w.drift = 0
			continue
		}
		if w.drift++; w.drift >= reweighTicks {
			w.w = min(max(math.Exp2(math.Round(math.Log2(ratio))), minWeight), 1)
			w.drift = 0
			r.last = nil // the routes to come weigh it anew
		}
	}
}

// forget drops what the router keeps of m (a maker gone from the job).
func (r *router) forget(m Maker) {
	delete(r.keys, m)
	delete(r.weights, m)
	r.last = nil
}

// at is the route over homes (the makers the job can use, in order), of
// which takes says which can take a part now: the last route built, when
// it is over the same makers.
func (r *router) at(homes []Maker, takes []bool) *route {
	if l := r.last; l != nil && slices.Equal(l.homes, homes) && slices.Equal(l.takes, takes) {
		return l
	}
	keys, weights := make([]uint64, len(homes)), make([]float64, len(homes))
	for i, m := range homes {
		keys[i], weights[i] = r.key(m), r.weightOf(m)
	}
	r.last = newRoute(homes, keys, weights, takes)
	return r.last
}

// route is where a job's samples go: the makers it can use (the samples'
// homes), their rendezvous keys and routing weights, and which of them
// can take a part now. Immutable once built.
type route struct {
	homes   []Maker
	keys    []uint64
	weights []float64
	takes   []bool
	// equal: the weights are equal, and makers rank by score alone.
	equal  bool
	takers int
}

func newRoute(homes []Maker, keys []uint64, weights []float64, takes []bool) *route {
	rt := &route{homes: homes, keys: keys, weights: weights, takes: takes, equal: true}
	for i := range homes {
		if weights[i] != weights[0] {
			rt.equal = false
		}
		if takes[i] {
			rt.takers++
		}
	}
	return rt
}

// part is the samples of one batch routed to one maker.
type part struct {
	m   Maker
	pos []int   // the samples' places in the batch, ascending
	idx []int64 // their dataset indices, in that order
}

// Split routes the samples of a batch (indices, in the plan's order) to
// makers: each to its home when the home can take a part, else to the
// next maker of its ranking that can. It returns the parts (in the
// homes' order) and how many samples went to their home; no parts when
// fewer than two makers can take one (the batch goes whole).
func (rt *route) Split(indices []int64) (parts []part, home int) {
	if rt.takers < 2 {
		return nil, 0
	}
	byHome := make([]part, len(rt.homes))
	for pos, idx := range indices {
		best, bestTaker := -1, -1
		var bestR, takerR rank
		for i := range rt.homes {
			v := rt.rank(i, idx)
			if best < 0 || rt.above(v, bestR) {
				best, bestR = i, v
			}
			if rt.takes[i] && (bestTaker < 0 || rt.above(v, takerR)) {
				bestTaker, takerR = i, v
			}
		}
		if bestTaker == best {
			home++
		}
		p := &byHome[bestTaker]
		p.pos = append(p.pos, pos)
		p.idx = append(p.idx, idx)
	}
	for i, p := range byHome {
		if len(p.pos) > 0 {
			p.m = rt.homes[i]
			parts = append(parts, p)
		}
	}
	return parts, home
}

// HomeShare is how many of indices have m as their home (a whole batch's
// lease to m).
func (rt *route) HomeShare(m Maker, indices []int64) int {
	mine := slices.Index(rt.homes, m)
	if mine < 0 {
		return 0
	}
	n := 0
	for _, idx := range indices {
		at, v := true, rt.rank(mine, idx)
		for i := range rt.homes {
			if i != mine && rt.above(rt.rank(i, idx), v) {
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

// rank is a maker's rank for a sample: the higher, the better (its score,
// or its weighted score when the weights differ).
type rank struct {
	s uint64
	w float64
}

// rank is homes[i]'s rank for sample idx.
func (rt *route) rank(i int, idx int64) rank {
	v := rank{s: score(rt.keys[i], idx)}
	if !rt.equal {
		v.w = weighted(v.s, rt.weights[i])
	}
	return v
}

// above reports whether rank a is above rank b.
func (rt *route) above(a, b rank) bool {
	if rt.equal {
		return a.s > b.s
	}
	return a.w > b.w
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

// mix64 is SplitMix64's finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
