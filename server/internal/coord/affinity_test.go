package coord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/errs"
)

// Cache affinity (router.go, parts.go): each sample is made at its home
// maker, the one of the makers the job can use with the highest
// rendezvous score for its index; a batch is leased in parts, one per home
// among its samples, each made at its places in the batch. Against the
// scripted makers, on the fake clock.

// ranking ranks makers for a sample as the coordinator's rendezvous
// hashing does (router.key, score): a router of its own, for its keys.
type ranking struct{ r *router }

func newRanking() ranking {
	r := newRouter()
	return ranking{&r}
}

// rank is among, highest score for sample idx first.
func (r ranking) rank(idx int64, among ...Maker) []Maker {
	ms := slices.Clone(among)
	slices.SortFunc(ms, func(a, b Maker) int {
		sa, sb := score(r.r.key(a), idx), score(r.r.key(b), idx)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return 0
	})
	return ms
}

// home is sample idx's home among.
func (r ranking) home(idx int64, among ...Maker) Maker { return r.rank(idx, among...)[0] }

// homesOf are the distinct homes of indices among, in among's order: the
// makers of a batch's parts when all of among can take one.
func (r ranking) homesOf(indices []int64, among ...Maker) []Maker {
	var hs []Maker
	for _, m := range among {
		for _, idx := range indices {
			if r.home(idx, among...) == m {
				hs = append(hs, m)
				break
			}
		}
	}
	return hs
}

// after answers a call made, d after it came (the lease's end first: its
// context's error).
func after(d time.Duration) func(*call) {
	return func(c *call) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			c.made()
		case <-c.ctx.Done():
			c.answer <- c.ctx.Err()
		}
	}
}

// perSample answers a call made, d per sample of its lease after it came
// (as a decoder would): each maker's parts are made at the same rate per
// sample, so the routing weights stay equal.
func perSample(d time.Duration) func(*call) {
	return func(c *call) { after(d * time.Duration(len(c.l.Indices)))(c) }
}

// equalWeights checks that the job, over, kept its makers' routing
// weights equal (router.go): where each sample goes is then its
// rendezvous score's doing alone, as ranking computes it.
func equalWeights(t *testing.T, c *Coordinator) {
	t.Helper()
	for m := range c.routing.weights {
		if w := c.routing.weightOf(m); w != 1 {
			t.Errorf("%s's routing weight %v: the test's makers were to be equally fast", m.Name(), w)
		}
	}
}

// setWeight sets m's routing weight (0: back to 1), as reweigh does.
func setWeight(c *Coordinator, m Maker, w float64) {
	if c.routing.weights[m] == nil {
		c.routing.weights[m] = &weight{}
	}
	c.routing.weights[m].w = w
	c.routing.last = nil
}

// setRate sets the rate m's parts were made at.
func setRate(c *Coordinator, m Maker, rate float64) {
	if c.routing.weights[m] == nil {
		c.routing.weights[m] = &weight{}
	}
	c.routing.weights[m].rate = rate
}

// affinityEnv is testEnv with cache affinity on.
func affinityEnv(v Verifier, ms ...Maker) *Env {
	env := testEnv(v, ms...)
	env.Config.Affinity = true
	return env
}

func affinitySamples(env *Env, made string) float64 {
	return testutil.ToFloat64(env.Metrics.AffinitySamples.WithLabelValues(made))
}

// madeWhere checks the affinity counters: every sample delivered counted
// once, home or away; it returns the two counts.
func madeWhere(t *testing.T, env *Env, tr *trainer) (home, away float64) {
	t.Helper()
	n := 0
	for _, d := range tr.batches {
		n += len(d.idx)
	}
	home, away = affinitySamples(env, "home"), affinitySamples(env, "away")
	if home+away != float64(n) {
		t.Errorf("affinity counters: %v home + %v away, want the %d samples delivered", home, away, n)
	}
	return home, away
}

func names(ms []Maker) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Name())
	}
	return s
}

// partsOf checks that the leases of batch (e, k) that began at `at`, given
// to makers ms, are its parts: disjoint, in plan order each, together its
// indices. It returns the makers that got one.
func partsOf(t *testing.T, j *fakeJob, e uint64, k int, at time.Time, ms ...*scriptedMaker) []Maker {
	t.Helper()
	want := j.Plan(e, 0).Batch(k)
	var got []int64
	var who []Maker
	for _, m := range ms {
		for _, l := range m.leases() {
			if l.epoch != e || l.number != k || !l.start.Equal(at) {
				continue
			}
			if !slices.IsSorted(l.indices) {
				t.Errorf("%s's part of batch %d: indices %v, not in plan order", m.name, k, l.indices)
			}
			got = append(got, l.indices...)
			who = append(who, m)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("batch %d's leases at %v: samples %v together, want its %v", k, at, got, want)
	}
	return who
}

// TestAffinityRendezvous: a job's route gives each sample to its highest-scoring
// maker; a maker leaving the usable set moves only the samples whose home
// it was (each to its next in rank), one joining takes only samples that
// move to it, one whose routing weight halves loses only samples of its
// own, half its share; a maker backing off keeps its samples' home but
// not their making; and the homes share the samples out evenly.
func TestAffinityRendezvous(t *testing.T) {
	var ms []*scriptedMaker
	var all []Maker
	for _, name := range []string{"local", "10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:7070", "10.0.0.4:7070"} {
		m := newMaker(name, 8)
		ms = append(ms, m)
		all = append(all, m)
	}
	v := &fakeVerifier{}
	env := affinityEnv(v, all...)
	c, _ := start(env, &fakeJob{n: 10, size: 10}, Stream{})
	indices := make([]int64, 10_000)
	for i := range indices {
		indices[i] = int64(i)*7919 + 3 // not consecutive: as a shuffled plan's
	}
	// best is the oracle: the maker of among whose score is the highest.
	best := func(idx int64, among []Maker) Maker {
		var b Maker
		var bs uint64
		for _, m := range among {
			if s := score(c.routing.key(m), idx); b == nil || s > bs {
				b, bs = m, s
			}
		}
		return b
	}
	// split is the job's route over among now.
	split := func(among []Maker) ([]part, int) { return c.routeNow(among, time.Now()).Split(indices) }
	// route is where split sends each sample, checking its parts.
	route := func(among []Maker) (map[int64]Maker, int) {
		t.Helper()
		parts, home := split(among)
		where := make(map[int64]Maker, len(indices))
		for _, p := range parts {
			if len(p.pos) != len(p.idx) || !slices.IsSorted(p.pos) {
				t.Fatalf("part on %s: places %v for %d samples, want ascending, one each", p.m.Name(), p.pos, len(p.idx))
			}
			for i, pos := range p.pos {
				if indices[pos] != p.idx[i] {
					t.Fatalf("part on %s: sample %d at place %d, which holds %d", p.m.Name(), p.idx[i], pos, indices[pos])
				}
				if where[p.idx[i]] != nil {
					t.Fatalf("sample %d in two parts", p.idx[i])
				}
				where[p.idx[i]] = p.m
			}
		}
		if len(where) != len(indices) {
			t.Fatalf("the parts hold %d samples of %d", len(where), len(indices))
		}
		return where, home
	}

	four := all[:4]
	homes, home := route(four)
	if home != len(indices) {
		t.Errorf("%d samples at their home, want all %d", home, len(indices))
	}
	count := map[string]int{}
	for _, idx := range indices {
		if homes[idx] != best(idx, four) {
			t.Fatalf("sample %d to %s, its highest score is %s's", idx, homes[idx].Name(), best(idx, four).Name())
		}
		count[homes[idx].Name()]++
	}
	for _, m := range four {
		if share := float64(count[m.Name()]) / float64(len(indices)); share < 0.15 || share > 0.35 {
			t.Errorf("%s is home to %.1f%% of the samples, want about a quarter", m.Name(), 100*share)
		}
	}
	t.Logf("homes over 4 makers: %v", count)

	// One leaves the usable set (not ready, quarantined): only its samples
	// move, each to the next maker of its ranking.
	leave := func(name string, gone Maker, undo func()) {
		t.Run(name, func(t *testing.T) {
			defer undo()
			moved, _ := route(four)
			rest := slices.DeleteFunc(slices.Clone(four), func(m Maker) bool { return m == gone })
			for _, idx := range indices {
				switch {
				case homes[idx] != gone && moved[idx] != homes[idx]:
					t.Fatalf("sample %d moved from %s to %s, though %s stayed", idx, homes[idx].Name(), moved[idx].Name(), homes[idx].Name())
				case homes[idx] == gone && moved[idx] != best(idx, rest):
					t.Fatalf("sample %d of %s to %s, its next in rank is %s", idx, gone.Name(), moved[idx].Name(), best(idx, rest).Name())
				}
			}
		})
	}
	ms[1].ready.Store(false)
	leave("not ready", ms[1], func() { ms[1].ready.Store(true) })
	c.makers.refused[ms[2]] = fmt.Errorf("%w: no such dataset", lease.ErrRefused)
	leave("refused", ms[2], func() { delete(c.makers.refused, ms[2]) })
	v.Quarantine(ms[3], ErrMismatch)
	leave("quarantined", ms[3], func() { delete(v.quarantined, ms[3]) })

	// One joins: the samples that move all move to it.
	five := all[:5]
	joined, _ := route(five)
	took := 0
	for _, idx := range indices {
		if joined[idx] != homes[idx] {
			if joined[idx] != all[4] {
				t.Fatalf("sample %d moved from %s to %s when %s joined", idx, homes[idx].Name(), joined[idx].Name(), all[4].Name())
			}
			took++
		}
	}
	if share := float64(took) / float64(len(indices)); share < 0.1 || share > 0.3 {
		t.Errorf("the maker that joined took %.1f%% of the samples, want about a fifth", 100*share)
	}

	// homeShare, a whole lease's count of samples at home, agrees.
	for _, m := range four {
		if got := c.routeNow(four, time.Now()).HomeShare(m, indices); got != count[m.Name()] {
			t.Errorf("homeShare of %s: %d, split gives it %d", m.Name(), got, count[m.Name()])
		}
	}

	// A maker half as fast (routing weight 1/2) is home to half as many
	// samples as each other, about 1/7 of them; those it loses are all
	// that move.
	setWeight(c, ms[0], 0.5)
	weighed, _ := route(four)
	lost := 0
	for _, idx := range indices {
		if weighed[idx] != homes[idx] {
			if homes[idx] != ms[0] {
				t.Fatalf("sample %d moved from %s to %s when %s's weight halved", idx, homes[idx].Name(), weighed[idx].Name(), ms[0].Name())
			}
			lost++
		}
	}
	if share := float64(count[ms[0].Name()]-lost) / float64(len(indices)); share < 0.09 || share > 0.2 {
		t.Errorf("a maker of weight 1/2 beside three of 1 is home to %.1f%% of the samples, want about 1/7", 100*share)
	}
	n := 0
	for _, idx := range indices {
		if weighed[idx] == ms[1] {
			n++
		}
	}
	if got := c.routeNow(four, time.Now()).HomeShare(ms[1], indices); got != n {
		t.Errorf("homeShare of %s with weights: %d, split gives it %d", ms[1].Name(), got, n)
	}
	setWeight(c, ms[0], 0)

	// One backing off after a failure stays its samples' home, but they
	// are made by the next of their ranking meanwhile, and not counted as
	// made at home.
	st := c.stat(ms[0])
	st.fails, st.retryAt = 1, time.Now().Add(time.Hour)
	backing, home := route(four)
	mine := 0
	for _, idx := range indices {
		if homes[idx] == ms[0] {
			mine++
			if rest := four[1:]; backing[idx] != best(idx, rest) {
				t.Fatalf("sample %d of the maker backing off to %s, its next in rank is %s", idx, backing[idx].Name(), best(idx, rest).Name())
			}
		} else if backing[idx] != homes[idx] {
			t.Fatalf("sample %d moved from %s to %s, which is not backing off", idx, homes[idx].Name(), backing[idx].Name())
		}
	}
	if home != len(indices)-mine {
		t.Errorf("%d samples counted at home with one maker backing off, want the %d others'", home, len(indices)-mine)
	}
	// Its back-off over, it is on trial: a part at a time.
	st.retryAt = time.Now()
	if back, _ := route(four); back[indices[slices.IndexFunc(indices, func(i int64) bool { return homes[i] == ms[0] })]] != ms[0] {
		t.Error("a maker whose back-off ended took no part")
	}
	c.parts.leased(ms[0], time.Now()) // a part in flight, answered, not yet collected
	c.parts.answer(ms[0], time.Now())
	if back, _ := route(four); slices.ContainsFunc(indices, func(i int64) bool { return back[i] == ms[0] }) {
		t.Error("a maker on trial with a part in flight took another")
	}
	c.parts.collected(ms[0])
	st.fails = 0

	// Fewer than two makers that can take a part: no parts.
	if parts, _ := split(all[:1]); parts != nil {
		t.Errorf("one maker: %d parts, want none (the batch whole)", len(parts))
	}
	st.fails, st.retryAt = 1, time.Now().Add(time.Hour)
	if parts, _ := split(all[:2]); parts != nil {
		t.Errorf("two makers, one backing off: %d parts, want none (the batch whole)", len(parts))
	}
}

// TestAffinityParts: with affinity on and three makers, every batch is
// leased in parts, each maker given only samples whose home it is, and
// delivered with every sample's pixels in its place; every sample
// delivered is counted as made at home.
func TestAffinityParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newMaker("a", 8), newMaker("b", 8), newMaker("c", 8)
		for _, m := range []*scriptedMaker{a, b, c} {
			m.auto = perSample(time.Millisecond)
		}
		env := affinityEnv(&fakeVerifier{}, a, b, c)
		j := &fakeJob{n: 8 * 40, size: 8}
		co, tr := start(env, j, Stream{Epochs: 2, Credits: 1000})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 2)
		equalWeights(t, co)
		for _, d := range tr.batches {
			if want := j.Plan(d.epoch, 0).Batch(d.k); !slices.Equal(d.idx, want) {
				t.Errorf("batch %d of epoch %d: indices %v, want the plan's %v", d.k, d.epoch, d.idx, want)
			}
		}
		r := newRanking()
		ms := []Maker{a, b, c}
		split := 0
		for _, m := range []*scriptedMaker{a, b, c} {
			for _, l := range m.leases() {
				for _, idx := range l.indices {
					if h := r.home(idx, ms...); h != m {
						t.Errorf("%s was leased sample %d (batch %d of epoch %d), whose home is %s", m.name, idx, l.number, l.epoch, h.Name())
					}
				}
			}
		}
		for e := range uint64(2) {
			plan := j.Plan(e, 0)
			for k := range plan.Batches() {
				var at time.Time
				for _, m := range []*scriptedMaker{a, b, c} {
					for _, l := range m.leases() {
						if l.epoch == e && l.number == k {
							at = l.start
						}
					}
				}
				who := partsOf(t, j, e, k, at, a, b, c)
				if want := r.homesOf(plan.Batch(k), ms...); !slices.Equal(who, want) {
					t.Errorf("batch %d of epoch %d leased to %v, want a part on each of its samples' homes %v", k, e, names(who), names(want))
				}
				if len(who) > 1 {
					split++
				}
			}
		}
		if split == 0 {
			t.Error("no batch was leased in parts")
		}
		if home, away := madeWhere(t, env, tr); away != 0 || home != float64(2*j.n) {
			t.Errorf("%v samples counted at home, %v away; want all %d at home", home, away, 2*j.n)
		}
		leased := 0.0
		for _, m := range ms {
			leased += testutil.ToFloat64(env.Metrics.Leases.WithLabelValues(m.Name()))
		}
		if got := len(a.leases()) + len(b.leases()) + len(c.leases()); leased != float64(got) {
			t.Errorf("stoker_leases_total %v, the makers were leased %d parts", leased, got)
		}
	})
}

// TestAffinityOff: with affinity off, leases are whole batches, as before,
// and nothing is counted home or away.
func TestAffinityOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newMaker("a", 8), newMaker("b", 8), newMaker("c", 8)
		for _, m := range []*scriptedMaker{a, b, c} {
			m.auto = after(time.Millisecond)
		}
		env := testEnv(&fakeVerifier{}, a, b, c)
		j := &fakeJob{n: 8 * 20, size: 8}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 1000})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		n := 0
		for _, m := range []*scriptedMaker{a, b, c} {
			for _, l := range m.leases() {
				n++
				if want := j.Plan(l.epoch, 0).Batch(l.number); !slices.Equal(l.indices, want) {
					t.Errorf("%s was leased %v of batch %d, want the whole batch %v", m.name, l.indices, l.number, want)
				}
			}
		}
		if n != j.Plan(0, 0).Batches() {
			t.Errorf("%d leases for %d batches", n, j.Plan(0, 0).Batches())
		}
		if home, away := affinitySamples(env, "home"), affinitySamples(env, "away"); home != 0 || away != 0 {
			t.Errorf("affinity off: %v samples counted home, %v away; want none", home, away)
		}
	})
}

// byStart is a maker's leases in the order they began.
func byStart(m *scriptedMaker) []gotLease {
	ls := m.leases()
	slices.SortStableFunc(ls, func(a, b gotLease) int { return a.start.Compare(b.start) })
	return ls
}

// TestAffinityPartFails: a maker fails its parts. Each batch they were of
// is leased again at once, without it (its samples to the next of their
// ranking), and delivered once, whole; the maker, blamed, backs off. When
// its back-off ends it is on trial, with one part at a time; once that is
// made its samples go home again.
func TestAffinityPartFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		a, b, c := newMaker("a", 8), newMaker("b", 8), newMaker("c", 8)
		made := perSample(2 * time.Millisecond)
		a.auto, b.auto = made, made
		c.auto = func(cl *call) {
			if !time.Now().Equal(t0) {
				made(cl)
				return
			}
			// Its first parts, leased as the job starts, fail 1 ms in
			// (before any other part is made).
			select {
			case <-time.After(time.Millisecond):
				cl.answer <- errors.New("the disk said no")
			case <-cl.ctx.Done():
				cl.answer <- cl.ctx.Err()
			}
		}
		env := affinityEnv(&fakeVerifier{}, a, b, c)
		j := &fakeJob{n: 6 * 300, size: 6}
		co, tr := start(env, j, Stream{Epochs: 1, Credits: 1000})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		equalWeights(t, co)

		failAt := t0.Add(time.Millisecond)
		retryAt := failAt.Add(backoff(1))
		var failed, later []gotLease
		var trial gotLease
		for _, l := range byStart(c) {
			switch {
			case l.start.Equal(t0):
				failed = append(failed, l)
			case l.start.Before(retryAt):
				t.Errorf("c was leased batch %d %v in, during its back-off (%v to %v)", l.number, l.start.Sub(t0), failAt.Sub(t0), retryAt.Sub(t0))
			case trial.start.IsZero():
				trial = l
			default:
				later = append(later, l)
			}
		}
		if len(failed) == 0 || trial.start.IsZero() || len(later) == 0 {
			t.Fatalf("c was leased %d parts at the start, %d after its back-off; want some of each", len(failed), len(later)+len(ifLeased(trial)))
		}
		for _, l := range failed {
			if l.err == nil {
				t.Errorf("c's part of batch %d: made, want failed", l.number)
			}
		}
		if got := failures(env, "c", "error"); got != float64(len(failed)) {
			t.Errorf("c blamed for %v failures, want its %d failed parts", got, len(failed))
		}
		for _, m := range []string{"a", "b"} {
			if got := failures(env, m, "error") + failures(env, m, "timeout"); got != 0 {
				t.Errorf("%s blamed for %v failures: its parts were cancelled by c's, not failed", m, got)
			}
		}
		// Its back-off over, c is on trial: the first part it is leased is
		// its only one until it is made.
		if trial.start.Sub(retryAt) >= 20*time.Millisecond || trial.running != 1 {
			t.Errorf("c's first part after its back-off came %v after it ended, with %d running; want within 20ms, alone", trial.start.Sub(retryAt), trial.running)
		}
		if l := later[0]; l.start.Before(trial.end) {
			t.Errorf("c on trial was leased batch %d %v in, before its trial part (%v to %v) was made", l.number, l.start.Sub(t0), trial.start.Sub(t0), trial.end.Sub(t0))
		}
		// Each batch whose part failed was leased again at once, to a and b.
		for _, l := range failed {
			if who := partsOf(t, j, 0, l.number, failAt, a, b, c); slices.Contains(who, Maker(c)) {
				t.Errorf("batch %d leased again to %v, with c backing off", l.number, names(who))
			}
		}
		// Where each sample went: home while c was healthy; c's to the next
		// of their ranking while it backed off; either while on trial.
		r := newRanking()
		all, ab := []Maker{a, b, c}, []Maker{a, b}
		away := 0
		for _, m := range []*scriptedMaker{a, b, c} {
			for _, l := range m.leases() {
				for _, idx := range l.indices {
					home, next := r.home(idx, all...), r.home(idx, ab...)
					if home != m {
						away++
					}
					switch {
					case m == c || l.start.Before(failAt) || l.start.After(trial.end):
						if home != m {
							t.Errorf("%s was leased sample %d (batch %d) %v in, its home is %s (c backed off from %v to %v, on trial to %v)",
								m.name, idx, l.number, l.start.Sub(t0), home.Name(), failAt.Sub(t0), retryAt.Sub(t0), trial.end.Sub(t0))
						}
					case l.start.Before(trial.start):
						if next != m {
							t.Errorf("%s was leased sample %d (batch %d) %v in, with c backing off; want it on %s, first of a and b in its ranking", m.name, idx, l.number, l.start.Sub(t0), next.Name())
						}
					case home != m && next != m:
						t.Errorf("%s was leased sample %d (batch %d) %v in, neither its home nor next", m.name, idx, l.number, l.start.Sub(t0))
					}
				}
			}
		}
		t.Logf("c failed %d parts at the start; back on trial %v in (%v to %v), then %d parts; %d samples made away",
			len(failed), trial.start.Sub(t0), trial.start.Sub(t0), trial.end.Sub(t0), len(later), away)
		if _, got := madeWhere(t, env, tr); away == 0 || got != float64(away) {
			t.Errorf("%v samples counted away, want the %d that a and b made for c (some)", got, away)
		}
	})
}

func ifLeased(l gotLease) []gotLease {
	if l.start.IsZero() {
		return nil
	}
	return []gotLease{l}
}

// fillFailing makes lease l's batch as the pipeline does under the pad
// policy when sample bad fails: the failure listed, its slot a copy of
// the batch's first good sample (pixels, label and index), or the batch
// empty when it has none.
func fillFailing(l *lease.Lease, b *pipeline.Batch, bad int64) {
	fill(l, b)
	i := slices.Index(l.Indices, bad)
	if i < 0 {
		return
	}
	b.Errors = append(b.Errors, pipeline.SampleError{Index: bad, Reason: "corrupt JPEG", Err: errs.Corrupt})
	if len(l.Indices) == 1 {
		b.N, b.Labels, b.Indices = 0, b.Labels[:0], b.Indices[:0]
		if l.Place == nil {
			b.Data = b.Data[:0]
		}
		return
	}
	g := 0
	if i == 0 {
		g = 1
	}
	at := func(k int) int { // where sample k of the lease's is in b
		if l.Place != nil {
			return l.Place[k] * sampleBytes
		}
		return k * sampleBytes
	}
	copy(b.Data[at(i):at(i)+sampleBytes], b.Data[at(g):at(g)+sampleBytes])
	b.Labels[i], b.Indices[i] = b.Labels[g], b.Indices[g]
}

// TestAffinityFailedSample: a part that comes back with a failed sample
// (its maker padded it from the part's good ones, as the pad policy does)
// has the batch made again whole, by one maker: the pad policy fills a
// failed sample from the whole batch's. It is delivered so, with the
// failure reported once; no maker is blamed.
func TestAffinityFailedSample(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newMaker("a", 8), newMaker("b", 8), newMaker("c", 8)
		ms := []Maker{a, b, c}
		j := &fakeJob{n: 6 * 20, size: 6, pads: true}
		r := newRanking()
		// A batch in parts, not the first; its sample whose part has
		// another sample, padded from it.
		k, bad := -1, int64(-1)
		for k = 1; bad < 0; k++ {
			idx := j.Plan(0, 0).Batch(k)
			if len(r.homesOf(idx, ms...)) < 2 {
				continue
			}
			for _, i := range idx {
				h := r.home(i, ms...)
				if slices.ContainsFunc(idx, func(o int64) bool { return o != i && r.home(o, ms...) == h }) {
					bad = i
					break
				}
			}
		}
		k--
		for _, m := range []*scriptedMaker{a, b, c} {
			m.auto = func(cl *call) {
				time.Sleep(time.Duration(len(cl.l.Indices)) * time.Millisecond)
				fillFailing(cl.l, cl.b, bad)
				cl.answer <- nil
			}
		}
		env := affinityEnv(&fakeVerifier{}, ms...)
		co, tr := start(env, j, Stream{Epochs: 1, Credits: 1000})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		equalWeights(t, co)
		plan := j.Plan(0, 0)
		if len(tr.batches) != plan.Batches() || len(tr.ends) != 1 {
			t.Fatalf("%d batches, %d EpochEnds; want %d, 1", len(tr.batches), len(tr.ends), plan.Batches())
		}
		for i, d := range tr.batches {
			l := &lease.Lease{Number: i, Indices: plan.Batch(i)}
			var want pipeline.Batch
			fillFailing(l, &want, bad)
			if d.k != i || !bytes.Equal(d.data, want.Data) || !slices.Equal(d.idx, want.Indices) || len(d.errs) != len(want.Errors) {
				t.Errorf("batch %d out: batch %d, indices %v, %d errors; want indices %v, %d errors, with its bytes", i, d.k, d.idx, len(d.errs), want.Indices, len(want.Errors))
			}
		}
		if e := tr.batches[k].errs; len(e) != 1 || e[0].Index != bad {
			t.Errorf("batch %d's errors %v, want sample %d's alone", k, e, bad)
		}
		if got := tr.ends[0].SampleErrors; got != 1 {
			t.Errorf("the epoch reports %d sample errors, want 1", got)
		}
		// Batch k's leases: its parts, then one lease of the whole batch.
		var at []time.Time
		var whole []Maker
		for _, m := range []*scriptedMaker{a, b, c} {
			for _, l := range m.leases() {
				if l.number != k {
					continue
				}
				if slices.Equal(l.indices, plan.Batch(k)) {
					whole = append(whole, m)
				} else if !slices.ContainsFunc(at, l.start.Equal) {
					at = append(at, l.start)
				}
			}
		}
		if len(at) != 1 || len(whole) != 1 {
			t.Fatalf("batch %d leased in parts %d times, whole %d times; want once each", k, len(at), len(whole))
		}
		if who := partsOf(t, j, 0, k, at[0], a, b, c); !slices.Equal(who, r.homesOf(plan.Batch(k), ms...)) {
			t.Errorf("batch %d's parts on %v, want its homes %v", k, names(who), names(r.homesOf(plan.Batch(k), ms...)))
		}
		for _, m := range ms {
			for _, reason := range []string{"error", "timeout", "mismatch", "busy"} {
				if got := failures(env, m.Name(), reason); got != 0 {
					t.Errorf("%s blamed for %v failures (%s): a failed sample is no maker's failure", m.Name(), got, reason)
				}
			}
		}
		// The whole batch's samples count home where their home made them.
		awayK := 0
		for _, i := range plan.Batch(k) {
			if r.home(i, ms...) != whole[0] {
				awayK++
			}
		}
		if _, away := madeWhere(t, env, tr); away != float64(awayK) {
			t.Errorf("%v samples counted away, want batch %d's %d not homed on %s, which made it whole", away, k, awayK, whole[0].Name())
		}
	})
}

// TestAffinityMismatch: a maker whose part is compared byte for byte and
// does not match is quarantined; the batch is made again without it, and
// so is every batch with a part of its not compared, made and waiting
// for the trainer's credit: the trainer gets none of its bytes.
func TestAffinityMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		a, b, liar := newMaker("a", 8), newMaker("b", 8), newMaker("liar", 8)
		ms := []Maker{a, b, liar}
		j := &fakeJob{n: 6 * 20, size: 6}
		r := newRanking()
		// The batch compared: the last of the first window's with a part
		// on the liar.
		target := -1
		for k := range DefaultWindow + 2 {
			if slices.Contains(r.homesOf(j.Plan(0, 0).Batch(k), ms...), Maker(liar)) {
				target = k
			}
		}
		a.auto, b.auto = after(time.Millisecond), after(time.Millisecond)
		liar.auto = func(cl *call) {
			d := time.Millisecond
			if cl.l.Number == target {
				d *= 2 // the others first
			}
			time.Sleep(d)
			fill(cl.l, cl.b)
			for i := range cl.b.Data {
				// Its own samples only: a part's buffer is the whole
				// batch's, the other parts' samples beside its own.
				if cl.l.Place == nil || slices.Contains(cl.l.Place, i/sampleBytes) {
					cl.b.Data[i] ^= 0x5a
				}
			}
			cl.answer <- nil
		}
		v := &fakeVerifier{check: func(l *lease.Lease) bool { return l.Epoch == 0 && l.Number == target }}
		env := affinityEnv(v, ms...)
		co, tr := start(env, j, Stream{Epochs: 1, Credits: 0}) // made batches wait for the trainer's credit
		wait := tr.run(t.Context())
		time.Sleep(time.Millisecond)
		synctest.Wait()
		var lied []int // batches made with an unchecked part of the liar's, waiting
		for _, l := range liar.leases() {
			if l.number != target {
				lied = append(lied, l.number)
			}
		}
		if v.Why(liar) != nil || len(lied) == 0 {
			t.Fatalf("before the mismatch: quarantined %v, %d batches made with the liar's parts; want not yet, some", v.Why(liar), len(lied))
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		quarantined := time.Now()
		if v.Why(liar) == nil {
			t.Fatal("the liar is not quarantined")
		}
		co.Grant(1000)
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1) // the liar's bytes would differ
		equalWeights(t, co)
		for _, l := range liar.leases() {
			if l.start.After(t0) {
				t.Errorf("the liar was leased batch %d %v in (quarantined %v in)", l.number, l.start.Sub(t0), quarantined.Sub(t0))
			}
		}
		if got := failures(env, "liar", "mismatch"); got < 1 {
			t.Errorf("%v mismatches counted, want 1 or more", got)
		}
		// Each batch with a part of the liar's was made again, without it.
		for _, k := range append(lied, target) {
			var again time.Time
			for _, m := range []*scriptedMaker{a, b} {
				for _, l := range m.leases() {
					if l.number == k && l.start.After(t0) {
						again = l.start
					}
				}
			}
			if again.IsZero() {
				t.Errorf("batch %d, made with the liar's part, was not leased again", k)
				continue
			}
			if who := partsOf(t, j, 0, k, again, a, b, liar); slices.Contains(who, Maker(liar)) {
				t.Errorf("batch %d leased again to %v", k, names(who))
			}
		}
	})
}

// TestAffinityFullMaker: a maker with no room (Free 0) holds the job up:
// no part of its samples goes to another maker, however long it stays
// full; the job leases the moment it frees room (Makers.Freed), and each
// sample is made at its home.
func TestAffinityFullMaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newMaker("a", 8), newMaker("b", 8), newMaker("c", 0)
		ms := []Maker{a, b, c}
		for _, m := range []*scriptedMaker{a, b, c} {
			m.auto = perSample(time.Millisecond)
		}
		env := affinityEnv(&fakeVerifier{}, ms...)
		j := &fakeJob{n: 6 * 40, size: 6}
		r := newRanking()
		if !slices.Contains(r.homesOf(j.Plan(0, 0).Batch(0), ms...), Maker(c)) {
			t.Fatal("batch 0 has no sample homed on c: pick other names")
		}
		co, tr := start(env, j, Stream{Epochs: 1, Credits: 1000})
		wait := tr.run(t.Context())
		time.Sleep(5 * time.Second) // past noMakerLeaseTimeouts × the lease timeout
		synctest.Wait()
		for _, m := range []*scriptedMaker{a, b, c} {
			if n := len(m.leases()); n != 0 {
				t.Fatalf("%s was leased %d parts while c was full", m.name, n)
			}
		}
		freed := time.Now()
		c.capacity.Store(2)
		env.Makers.Freed(c)
		synctest.Wait()
		if len(c.leases()) == 0 || !c.leases()[0].start.Equal(freed) {
			t.Fatalf("c freed room: %d leases; want one at once", len(c.leases()))
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		equalWeights(t, co)
		for _, m := range []*scriptedMaker{a, b, c} {
			for _, l := range m.leases() {
				if l.running > int(m.capacity.Load()) {
					t.Errorf("%s ran %d Makes at once, room for %d", m.name, l.running, m.capacity.Load())
				}
				for _, idx := range l.indices {
					if h := r.home(idx, ms...); h != m {
						t.Errorf("%s was leased sample %d (batch %d), whose home is %s", m.name, idx, l.number, h.Name())
					}
				}
			}
		}
		if home, away := madeWhere(t, env, tr); away != 0 || home != float64(j.n) {
			t.Errorf("%v samples counted home, %v away; want all %d home", home, away, j.n)
		}
	})
}

// nextOf is the next call on any of ms, and its maker.
func nextOf(t *testing.T, ms ...*scriptedMaker) (*scriptedMaker, *call) {
	t.Helper()
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(time.Minute))}}
	for _, m := range ms {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.calls)})
	}
	i, v, _ := reflect.Select(cases)
	if i == 0 {
		t.Fatal("no call within a minute")
	}
	return ms[i-1], v.Interface().(*call)
}

// TestAffinityHedge: a batch leased in parts one of which is slow is
// hedged whole, on a maker other than the slow part's; whichever lease
// makes it first, it is delivered once and the other lease cancelled. A
// hedge that wins counts the slow part's maker as slow, no other.
func TestAffinityHedge(t *testing.T) {
	for _, slowName := range []string{"a", "b", "c"} {
		for _, win := range []string{"hedge wins", "parts win"} {
			t.Run(slowName+" slow, "+win, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					a, b, c := newMaker("a", 8), newMaker("b", 8), newMaker("c", 8)
					all := []*scriptedMaker{a, b, c}
					ms := []Maker{a, b, c}
					slow := all[slices.IndexFunc(all, func(m *scriptedMaker) bool { return m.name == slowName })]
					j := &fakeJob{n: 6 * 30, size: 6}
					r := newRanking()
					// A batch leased in parts, one on the slow maker, after
					// each maker has led a few (the hedge delay is known).
					target := 10
					for ; ; target++ {
						hs := r.homesOf(j.Plan(0, 0).Batch(target), ms...)
						if len(hs) >= 2 && slices.Contains(hs, Maker(slow)) {
							break
						}
					}
					batch := j.Plan(0, 0).Batch(target)
					for _, m := range all {
						m.auto = after(10 * time.Millisecond)
						m.hold = func(l *lease.Lease) bool {
							return l.Number == target && (m == slow || len(l.Indices) == len(batch))
						}
					}
					env := affinityEnv(&fakeVerifier{}, ms...)
					env.Config.Window = 1 // one batch at a time: its hedge's delay is twice its lease time
					co, tr := start(env, j, Stream{Epochs: 1, Credits: 1000})
					wait := tr.run(t.Context())
					first := slow.next(t)
					issued := time.Now()
					if slices.Equal(first.l.Indices, batch) {
						t.Fatalf("batch %d leased whole to %s, want in parts", target, slow.name)
					}
					hm, hedge := nextOf(t, all...)
					if d := time.Since(issued); d != 20*time.Millisecond {
						t.Errorf("hedged %v after the lease, want twice the job's lease time (20ms)", d)
					}
					if !slices.Equal(hedge.l.Indices, batch) {
						t.Fatalf("the hedge leased %v to %s, want the whole batch %v", hedge.l.Indices, hm.name, batch)
					}
					if hm == slow {
						t.Fatalf("the hedge went to %s, the maker whose part it hedges", hm.name)
					}
					switch win {
					case "hedge wins":
						hedge.made()
						synctest.Wait()
						if err := first.ctx.Err(); !errors.Is(err, context.Canceled) {
							t.Errorf("the slow part's context: %v, want cancelled", err)
						}
					case "parts win":
						first.made()
						synctest.Wait()
						if err := hedge.ctx.Err(); !errors.Is(err, context.Canceled) {
							t.Errorf("the hedge's context: %v, want cancelled", err)
						}
					}
					if err := wait(); err != nil {
						t.Fatal(err)
					}
					tr.exactlyOnce(t, j, 1)
					equalWeights(t, co)
					won, lost := hedges(env, "won"), hedges(env, "lost")
					if win == "hedge wins" && (won != 1 || lost != 0) || win == "parts win" && (won != 0 || lost != 1) {
						t.Errorf("hedges won %v, lost %v", won, lost)
					}
					if got := testutil.ToFloat64(env.Metrics.ResultsDropped); got != 1 {
						t.Errorf("%v results dropped, want the cancelled lease's 1", got)
					}
					for _, m := range all {
						want := 0.0
						if m == slow && win == "hedge wins" {
							want = 1
						}
						if got := failures(env, m.name, "slow"); got != want {
							t.Errorf("%s counted slow %v times, want %v", m.name, got, want)
						}
					}
					madeWhere(t, env, tr)
				})
			})
		}
	}
}

// TestAffinityHungAtStart: a maker that never answers from the job's
// start (a peer hung before it made anything): with no lease time to go
// by yet, it is stuck after an eighth of the lease timeout, and the batches
// leased from then on are made by the other two, its samples among them,
// long before its parts time out. The epoch is whole, exactly once.
// Its leases are hedged free of the hedge budget once it is stuck.
func TestAffinityHungAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := newMaker("a", 8), newMaker("b", 8), newMaker("c", 8)
		a.auto, b.auto = perSample(time.Millisecond), perSample(time.Millisecond)
		c.auto = func(cl *call) { <-cl.ctx.Done(); cl.answer <- cl.ctx.Err() } // hung
		env := affinityEnv(&fakeVerifier{}, a, b, c)
		j := &fakeJob{n: 8 * 30, size: 8}
		t0 := time.Now()
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 1000})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		tr.exactlyOnce(t, j, 1)
		stuckAt := t0.Add(env.Config.LeaseTimeout / stuckShare)
		r := newRanking()
		var early int // c's samples made by a or b before its parts timed out
		for _, m := range []*scriptedMaker{a, b} {
			for _, l := range m.leases() {
				if l.err != nil || !l.start.Before(t0.Add(env.Config.LeaseTimeout)) {
					continue
				}
				if l.start.Before(stuckAt) {
					continue
				}
				for _, idx := range l.indices {
					if r.home(idx, a, b, c) == Maker(c) {
						early++
					}
				}
			}
		}
		if early == 0 {
			t.Errorf("no sample of the hung maker's was made elsewhere between %v (stuck) and %v (its lease timeout)",
				env.Config.LeaseTimeout/stuckShare, env.Config.LeaseTimeout)
		}
		// Usually the epoch ends long before the lease timeout; in about 1
		// run in 100 (the makers' map order) a hedge of the hung maker's
		// trial part finds no room and the last batch waits for its
		// timeout: bounded, so logged, not failed.
		t.Logf("the epoch took %v (fake clock; the lease timeout is %v)", took, env.Config.LeaseTimeout)
	})
}

// TestReweigh: a maker whose parts are made at an eighth of the fastest's
// rate gets weight 1/8, but only once that held for reweighTicks control
// ticks in a row: a shorter burst of slowness (a loaded machine's noise)
// moves no sample; and it gets its weight back the same way.
func TestReweigh(t *testing.T) {
	a, b := newMaker("a", 8), newMaker("b", 8)
	env := affinityEnv(&fakeVerifier{}, a, b)
	c := New(env, &fakeJob{n: 64, size: 8}, Stream{Epochs: 1}, "job", discard)
	ms := []Maker{a, b}
	setRate(c, a, 800)
	setRate(c, b, 800)
	c.routing.reweigh(ms, c.usable)
	if w := c.routing.weightOf(b); w != 1 {
		t.Fatalf("equal rates: b's weight %v, want 1", w)
	}
	setRate(c, b, 100) // an eighth
	for tick := range reweighTicks - 1 {
		c.routing.reweigh(ms, c.usable)
		if w := c.routing.weightOf(b); w != 1 {
			t.Fatalf("tick %d of b at an eighth: weight %v, want 1 until %d ticks in a row", tick+1, w, reweighTicks)
		}
	}
	setRate(c, b, 800) // the burst ends
	c.routing.reweigh(ms, c.usable)
	setRate(c, b, 100)
	for range reweighTicks - 1 {
		c.routing.reweigh(ms, c.usable)
	}
	if w := c.routing.weightOf(b); w != 1 {
		t.Fatalf("b slow for %d ticks, a fast one between: weight %v, want 1", 2*reweighTicks-2, w)
	}
	c.routing.reweigh(ms, c.usable)
	if w := c.routing.weightOf(b); w != 1.0/8 {
		t.Fatalf("b at an eighth for %d ticks in a row: weight %v, want 1/8", reweighTicks, w)
	}
	if w := c.routing.weightOf(a); w != 1 {
		t.Errorf("a, the fastest: weight %v, want 1", w)
	}
	setRate(c, b, 600) // within twice of 1: back to 1 after reweighTicks
	for range reweighTicks {
		c.routing.reweigh(ms, c.usable)
	}
	if w := c.routing.weightOf(b); w != 1 {
		t.Errorf("b back at 3/4 of a's rate for %d ticks: weight %v, want 1", reweighTicks, w)
	}
}

// TestAffinityBusyPart: a part its maker turns away as busy (another
// job's lease took its room since the part was routed, or a worker had
// not yet seen a cancellation) is asked again after busyRetry, within the
// lease: the batch's other parts go on, and no lease fails. Failing the
// lease would cancel them, and a pool of several jobs would spin on the
// slots the cancellations hold until the workers see them.
func TestAffinityBusyPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newMaker("a", 8), newMaker("b", 8)
		a.auto = perSample(time.Millisecond)
		var turned atomic.Int32
		b.auto = func(c *call) {
			if turned.Add(1) == 1 {
				c.answer <- fmt.Errorf("%w: b took another job's lease", lease.ErrBusy)
				return
			}
			perSample(time.Millisecond)(c)
		}
		env := affinityEnv(&fakeVerifier{}, a, b)
		env.Config.Window = 1
		j := &fakeJob{n: 8 * 4, size: 8}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 1000})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		bl := byStart(b)
		if len(bl) < 2 || bl[0].err == nil || !errors.Is(bl[0].err, lease.ErrBusy) {
			t.Fatalf("b's leases %v: want its first turned away as busy", bl)
		}
		if bl[1].number != bl[0].number || !slices.Equal(bl[1].indices, bl[0].indices) || bl[1].start.Sub(bl[0].start) != busyRetry {
			t.Errorf("b's second lease: batch %d %v at +%v; want the same part again, %v later", bl[1].number, bl[1].indices, bl[1].start.Sub(bl[0].start), busyRetry)
		}
		for _, l := range a.leases() {
			if l.err != nil {
				t.Errorf("a's part of batch %d: %v; want it made once, not cancelled", l.number, l.err)
			}
		}
		for _, m := range []string{"a", "b"} {
			for _, reason := range []string{"busy", "error", "timeout"} {
				if n := failures(env, m, reason); n != 0 {
					t.Errorf("%s: %v lease failures (%s), want none", m, n, reason)
				}
			}
		}
	})
}

// noRoom is a stream's memory with no room beyond what the stream
// reserved: every Try fails, and is counted.
type noRoom struct{ tries atomic.Int64 }

func (m *noRoom) Try(int64) bool { m.tries.Add(1); return false }
func (m *noRoom) Release(int64)  {}

// TestAffinityPartsInBudget: the parts of a batch take no memory beyond
// the batch's buffer, whichever maker makes them: with no room in the
// budget beyond the stream's reserved buffers, batches are still leased
// in parts, and the local executor's part is made straight into its
// places in the batch's buffer (lease.Lease.Place), as a peer's is. (A
// part made in a buffer of its own, copied into the batch, is memory the
// budget must pay for: without room, the batch went whole.)
func TestAffinityPartsInBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		local, peer := newMaker("local", 8), newMaker("10.0.0.1:7070", 8)
		local.local = true
		j := &fakeJob{n: 8 * 20, size: 8}
		var misplaced atomic.Int32
		for _, m := range []*scriptedMaker{local, peer} {
			m.auto = func(c *call) {
				if whole := len(j.Plan(c.l.Epoch, 0).Batch(c.l.Number)) * sampleBytes; len(c.l.Indices) < j.size && (c.l.Place == nil || len(c.b.Data) != whole) {
					misplaced.Add(1) // a part not made in the batch's buffer
				}
				perSample(time.Millisecond)(c)
			}
		}
		env := affinityEnv(&fakeVerifier{}, local, peer)
		mem := &noRoom{}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 1000, Memory: mem})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		r := newRanking()
		ms := []Maker{local, peer}
		for k := range j.Plan(0, 0).Batches() {
			want := r.homesOf(j.Plan(0, 0).Batch(k), ms...)
			var at time.Time
			for _, m := range []*scriptedMaker{local, peer} {
				for _, l := range m.leases() {
					if l.number == k {
						at = l.start
					}
				}
			}
			if who := partsOf(t, j, 0, k, at, local, peer); !slices.Equal(who, want) {
				t.Errorf("batch %d leased to %v with no room in the budget, want a part on each of its homes %v", k, names(who), names(want))
			}
		}
		if n := misplaced.Load(); n != 0 {
			t.Errorf("%d parts made outside the batch's buffer", n)
		}
		if home, away := madeWhere(t, env, tr); away != 0 || home != float64(j.n) {
			t.Errorf("%v samples made at home, %v away; want all %d at home", home, away, j.n)
		}
	})
}
