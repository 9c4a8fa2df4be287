package coord

import (
	"fmt"
	"slices"
	"testing"
)

// The route's decisions, as pure functions of a snapshot: where each
// sample of a batch goes (Split) and how many of a batch's samples are at
// home on a maker (HomeShare), against an oracle that ranks every maker
// for every sample.

// oracle is sample idx's home among homes (the highest rank: its weighted
// score, or its score when the weights are equal), and the highest-ranked
// maker that takes parts (-1: none).
func oracle(keys []uint64, weights []float64, takes []bool, idx int64) (home, taker int) {
	equal := !slices.ContainsFunc(weights, func(w float64) bool { return w != weights[0] })
	better := func(i, j int) bool {
		if equal {
			return score(keys[i], idx) > score(keys[j], idx)
		}
		return weighted(score(keys[i], idx), weights[i]) > weighted(score(keys[j], idx), weights[j])
	}
	home, taker = 0, -1
	for i := range keys {
		if better(i, home) {
			home = i
		}
		if takes[i] && (taker < 0 || better(i, taker)) {
			taker = i
		}
	}
	return home, taker
}

func TestRouteSplit(t *testing.T) {
	ms := make([]Maker, 5)
	keys := make([]uint64, len(ms))
	for i := range ms {
		ms[i] = &fakeMaker{name: fmt.Sprintf("10.0.0.%d:7070", i+1)}
		keys[i] = mix64(uint64(i) + 1)
	}
	batch := make([]int64, 256)
	for i := range batch {
		batch[i] = int64(i)*7919 + 3
	}
	for _, tc := range []struct {
		name    string
		n       int // makers: ms[:n]
		weights []float64
		takes   []bool
		noParts bool // the batch goes whole
	}{
		{name: "two", n: 2, weights: []float64{1, 1}, takes: []bool{true, true}},
		{name: "five", n: 5, weights: []float64{1, 1, 1, 1, 1}, takes: []bool{true, true, true, true, true}},
		{name: "one backing off", n: 3, weights: []float64{1, 1, 1}, takes: []bool{true, false, true}},
		{name: "weighed", n: 4, weights: []float64{1, 0.5, 0.25, 1}, takes: []bool{true, true, true, true}},
		{name: "weighed, one stuck", n: 4, weights: []float64{1, 0.5, 0.25, 1}, takes: []bool{true, true, true, false}},
		{name: "one taker", n: 3, weights: []float64{1, 1, 1}, takes: []bool{false, true, false}, noParts: true},
		{name: "one maker", n: 1, weights: []float64{1}, takes: []bool{true}, noParts: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRoute(ms[:tc.n], keys[:tc.n], tc.weights, tc.takes)
			parts, home := rt.Split(batch)
			if tc.noParts {
				if parts != nil || home != 0 {
					t.Fatalf("%d parts, %d at home; want none (the batch whole)", len(parts), home)
				}
				return
			}
			where := make(map[int]int) // place in the batch → index of its maker
			for _, p := range parts {
				i := slices.Index(ms[:tc.n], p.m)
				if i < 0 || !tc.takes[i] || len(p.pos) == 0 || len(p.pos) != len(p.idx) || !slices.IsSorted(p.pos) {
					t.Fatalf("part on %s: places %v, samples %v; want a maker that takes parts, its places ascending, one per sample", p.m.Name(), p.pos, p.idx)
				}
				for s, pos := range p.pos {
					if _, dup := where[pos]; dup || batch[pos] != p.idx[s] {
						t.Fatalf("part on %s: sample %d at place %d (which holds %d; in two parts: %v)", p.m.Name(), p.idx[s], pos, batch[pos], dup)
					}
					where[pos] = i
				}
			}
			wantHome, shares := 0, make([]int, tc.n)
			for pos, idx := range batch {
				h, taker := oracle(keys[:tc.n], tc.weights, tc.takes, idx)
				if where[pos] != taker {
					t.Fatalf("sample %d to %s, want %s (its home %s)", idx, ms[where[pos]].Name(), ms[taker].Name(), ms[h].Name())
				}
				if h == taker {
					wantHome++
				}
				shares[h]++
			}
			if home != wantHome {
				t.Errorf("%d samples at home, want %d", home, wantHome)
			}
			for i, m := range ms[:tc.n] {
				if got := rt.HomeShare(m, batch); got != shares[i] {
					t.Errorf("HomeShare of %s: %d, want the %d samples whose home it is", m.Name(), got, shares[i])
				}
			}
			if got := rt.HomeShare(ms[4], batch[:0]); got != 0 {
				t.Errorf("HomeShare of an empty batch: %d", got)
			}
		})
	}
	if got := newRoute(ms[:2], keys[:2], []float64{1, 1}, []bool{true, true}).HomeShare(ms[3], batch); got != 0 {
		t.Errorf("HomeShare of a maker the route does not hold: %d, want 0", got)
	}
}

// TestRouterRebuilds: the router hands out the route it built last while
// the makers, which of them take parts and their weights stay as they
// were, and builds another when one of them changes.
func TestRouterRebuilds(t *testing.T) {
	a, b, c := &fakeMaker{name: "a"}, &fakeMaker{name: "b"}, &fakeMaker{name: "c"}
	r := newRouter()
	rt := r.at([]Maker{a, b, c}, []bool{true, true, true})
	if r.at([]Maker{a, b, c}, []bool{true, true, true}) != rt {
		t.Error("the same makers: a new route")
	}
	if r.at([]Maker{a, b, c}, []bool{true, false, true}) == rt {
		t.Error("b backing off: the same route")
	}
	rt = r.at([]Maker{a, c}, []bool{true, true})
	if r.at([]Maker{a, c}, []bool{true, true}) != rt || r.at([]Maker{a, b, c}, []bool{true, true, true}) == rt {
		t.Error("b left, then came back: the routes do not follow")
	}
	rt = r.at([]Maker{a, b, c}, []bool{true, true, true})
	r.rated(a, 800, 1e9)
	r.rated(b, 100, 1e9)
	for range reweighTicks {
		r.reweigh([]Maker{a, b, c}, func(Maker) bool { return true })
	}
	rw := r.at([]Maker{a, b, c}, []bool{true, true, true})
	if rw == rt || rw.weights[1] != 1.0/8 || rw.weights[0] != 1 || rw.weights[2] != 1 {
		t.Errorf("b reweighed to 1/8: route weights %v (a new route: %v)", rw.weights, rw != rt)
	}
}
