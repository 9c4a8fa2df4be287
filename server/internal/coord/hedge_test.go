package coord

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Hedged leases and slow makers (hedge.go, makerstats.go), on the fake
// clock: a lease much slower than the job's recent ones is also given to
// another maker, the first answer wins and the other lease is cancelled;
// the maker outrun is backed off, longer each time, without a cap of
// seconds; a maker not measured yet gets one lease at a time.

func hedges(env *Env, outcome string) float64 {
	return testutil.ToFloat64(env.Metrics.Hedges.WithLabelValues(outcome))
}

// hedgeScene is a job of one lease at a time over a fast maker, which
// makes the first `made` batches (each in 10 ms, so that the hedge delay
// is known: twice 10 ms), a slow maker the test scripts, which gets the
// next batch (the fast maker is not ready then), and a third the test
// scripts (hold), ready from then on when the hedge is to go to it.
type hedgeScene struct {
	env              *Env
	j                *fakeJob
	fast, slow, hold *scriptedMaker
}

func newHedgeScene(made int, hedgeTo string) *hedgeScene {
	s := &hedgeScene{fast: newMaker("fast", 8), slow: newMaker("slow", 8), hold: newMaker("hold", 8), j: &fakeJob{n: 3 * 20, size: 3}}
	s.slow.ready.Store(false)
	s.hold.ready.Store(false)
	var n atomic.Int64
	made10ms := paced(10 * time.Millisecond)
	s.fast.auto = func(c *call) {
		if n.Add(1) == int64(made) {
			// The next batch is the slow maker's, and the hedge's maker's.
			s.fast.ready.Store(false)
			s.slow.ready.Store(true)
			if hedgeTo == "hold" {
				s.hold.ready.Store(true)
			}
			s.env.Makers.Poke()
		}
		made10ms(c)
	}
	s.env = testEnvWindow(1, &fakeVerifier{}, s.fast, s.slow, s.hold)
	return s
}

// TestLeaseHedged: the slow maker's lease is hedged twice the job's lease
// time after it was issued, well before the lease timeout. Whichever
// lease answers first makes the batch; the other is cancelled, and an
// answer it still sends is dropped. The trainer gets each batch once.
func TestLeaseHedged(t *testing.T) {
	for _, tc := range []string{"hedge wins", "first lease wins", "outrun lease answers late"} {
		t.Run(tc, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hedgeTo := "fast"
				if tc == "first lease wins" {
					hedgeTo = "hold"
				}
				s := newHedgeScene(1+minHedgeSamples, hedgeTo) // its first batch, its start, is not a sample
				late := make(chan struct{})
				if tc == "outrun lease answers late" {
					// A maker that does not notice the cancellation: it
					// answers, made, once the test says.
					s.slow.auto = func(c *call) {
						s.slow.calls <- c
						<-late
						c.made()
					}
				}
				_, tr := start(s.env, s.j, Stream{Epochs: 1, Credits: 100})
				wait := tr.run(t.Context())
				first := s.slow.next(t)
				issued := time.Now()
				if hedgeTo == "fast" {
					s.fast.ready.Store(true)
					s.env.Makers.Poke()
				}
				switch tc {
				case "hedge wins":
					time.Sleep(100 * time.Millisecond) // the hedge made the batch
					s.slow.ready.Store(false)
					if err := first.ctx.Err(); !errors.Is(err, context.Canceled) {
						t.Errorf("the outrun lease's context: %v, want cancelled", err)
					}
				case "first lease wins":
					h := s.hold.next(t)
					if after := time.Since(issued); after != 2*10*time.Millisecond {
						t.Errorf("hedged %v after the lease was issued, want twice the job's lease time (20ms)", after)
					}
					s.slow.ready.Store(false)
					s.hold.ready.Store(false)
					s.fast.ready.Store(true)
					s.env.Makers.Poke()
					first.made()
					synctest.Wait()
					if err := h.ctx.Err(); !errors.Is(err, context.Canceled) {
						t.Errorf("the hedge's context: %v, want cancelled", err)
					}
				case "outrun lease answers late":
					time.Sleep(100 * time.Millisecond) // the hedge made the batch
					if err := first.ctx.Err(); !errors.Is(err, context.Canceled) {
						t.Errorf("the outrun lease's context: %v, want cancelled", err)
					}
					close(late)
				}
				if err := wait(); err != nil {
					t.Fatal(err)
				}
				tr.exactlyOnce(t, s.j, 1)
				won, lost := hedges(s.env, "won"), hedges(s.env, "lost")
				switch {
				case tc == "first lease wins" && (won != 0 || lost != 1):
					t.Errorf("hedges won %v, lost %v; want 0 and 1", won, lost)
				case tc != "first lease wins" && (won != 1 || lost != 0 || failures(s.env, "slow", "slow") != 1):
					t.Errorf("hedges won %v, lost %v, the slow maker outrun %v times; want 1, 0, 1", won, lost, failures(s.env, "slow", "slow"))
				}
				if n := failures(s.env, "slow", "timeout"); n != 0 {
					t.Errorf("%v leases timed out: the hedge should have come first", n)
				}
				if got := testutil.ToFloat64(s.env.Metrics.ResultsDropped); got != 1 {
					t.Errorf("%v results dropped, want the outrun lease's 1", got)
				}
			})
		})
	}
}

// TestLeaseSlowMakerBenched: beside a maker of 100 batches/s, one that
// never answers. Its leases are hedged, not waited for; it is backed off
// twice as long each time it is outrun, past the old 5 s cap, and the
// job's status says so; the trainer gets its batches at no less than 0.8
// of the rate the fast maker alone gives (on the fake clock).
func TestLeaseSlowMakerBenched(t *testing.T) {
	const batches = 2000 // 20 s of the fast maker
	took := func(hung bool) (time.Duration, *Env, *Coordinator, *trainer) {
		var d time.Duration
		var env *Env
		var c *Coordinator
		var tr *trainer
		synctest.Test(t, func(t *testing.T) {
			fast := newMaker("fast", 8)
			fast.auto = paced(10 * time.Millisecond)
			ms := []Maker{fast}
			if hung {
				slow := newMaker("slow", 8)
				slow.auto = func(c *call) { <-c.ctx.Done(); c.answer <- c.ctx.Err() }
				ms = append(ms, slow)
			}
			env = testEnv(&fakeVerifier{}, ms...)
			env.Config.LeaseTimeout = 10 * time.Second
			j := &fakeJob{n: 3 * batches, size: 3}
			c, tr = start(env, j, Stream{Epochs: 1, Credits: 1 << 20})
			t0 := time.Now()
			wait := tr.run(t.Context())
			if hung {
				// The status at 15 s: the slow maker is backed off.
				time.Sleep(15 * time.Second)
				js := c.Status()
				for _, m := range js.Makers {
					t.Logf("at 15 s: %s: %v", m.Name, m)
					if m.Name == "slow" && (m.BackoffSeconds <= 0 || m.FailuresInARow < 5) {
						t.Errorf("status of the hung maker: backed off %vs after %d failures in a row; want backed off, after 5 or more",
							m.BackoffSeconds, m.FailuresInARow)
					}
				}
			}
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			d = time.Since(t0)
			tr.exactlyOnce(t, j, 1)
		})
		return d, env, c, tr
	}
	alone, _, _, _ := took(false)
	with, env, c, _ := took(true)
	ratio := alone.Seconds() / with.Seconds()
	t.Logf("%d batches: %v with the fast maker alone, %v beside a hung one: %.3f of the rate", batches, alone, with, ratio)
	if ratio < 0.8 {
		t.Errorf("beside a hung maker the trainer got %.3f of the fast maker's rate alone, want >= 0.8", ratio)
	}
	outrun := failures(env, "slow", "slow")
	t.Logf("hedges won %v, lost %v, failed %v; the hung maker's leases: %v, outrun %v, timed out %v; its back-off at the end %v",
		hedges(env, "won"), hedges(env, "lost"), hedges(env, "failed"), testutil.ToFloat64(env.Metrics.Leases.WithLabelValues("slow")),
		outrun, failures(env, "slow", "timeout"), c.makers.stats[findMaker(env, "slow")].retryAt.Sub(c.makers.stats[findMaker(env, "slow")].failedAt))
	if outrun < 5 || failures(env, "slow", "timeout") != 0 {
		t.Errorf("the hung maker was outrun %v times and timed out %v; want >= 5 and none", outrun, failures(env, "slow", "timeout"))
	}
	if leased := testutil.ToFloat64(env.Metrics.Leases.WithLabelValues("slow")); leased > 20 {
		t.Errorf("the hung maker got %v leases in %v: not backed off enough", leased, with)
	}
	if st := c.makers.stats[findMaker(env, "slow")]; st.retryAt.Sub(st.failedAt) <= 5*time.Second {
		t.Errorf("the hung maker's last back-off %v, want past the old cap of 5 s", st.retryAt.Sub(st.failedAt))
	}
}

func findMaker(env *Env, name string) Maker {
	ms, _ := env.Makers.Snapshot()
	for _, m := range ms {
		if m.Name() == name {
			return m
		}
	}
	return nil
}

// TestHedgeBudget: two makers that slow down together, ten times, every
// 40 leases, and speed up again (as when other jobs come and go on the
// workers): at each slow-down every lease in flight is past its hedge
// delay until the job's lease times catch up, more than the budget
// allows. The job hedges at most hedgeFraction of its leases (after the
// burst), and a batch never has more than two leases at once.
func TestHedgeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		inFlight := make(map[batchID]int)
		most := 0
		var calls atomic.Int64
		phased := func(name string) *scriptedMaker {
			m := newMaker(name, 8)
			m.auto = func(c *call) {
				id := batchID{c.l.Epoch, c.l.Number}
				mu.Lock()
				inFlight[id]++
				most = max(most, inFlight[id])
				mu.Unlock()
				defer func() {
					mu.Lock()
					inFlight[id]--
					mu.Unlock()
				}()
				d := 10 * time.Millisecond
				if calls.Add(1)/40%2 == 1 {
					d *= 10
				}
				select {
				case <-time.After(d):
					c.made()
				case <-c.ctx.Done():
					c.answer <- c.ctx.Err()
				}
			}
			return m
		}
		a, b := phased("a"), phased("b")
		env := testEnv(&fakeVerifier{}, a, b)
		env.Config.LeaseTimeout = 10 * time.Second
		j := &fakeJob{n: 3 * 2000, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 1 << 20})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		leases := testutil.ToFloat64(env.Metrics.Leases.WithLabelValues("a")) + testutil.ToFloat64(env.Metrics.Leases.WithLabelValues("b"))
		hedged := hedges(env, "won") + hedges(env, "lost") + hedges(env, "failed")
		first := leases - hedged
		t.Logf("%v leases, %v of them hedges (won %v, lost %v), the budget %v; at most %d leases of a batch at once",
			leases, hedged, hedges(env, "won"), hedges(env, "lost"), hedgeFraction*first+hedgeBurst, most)
		if hedged > hedgeFraction*first+hedgeBurst {
			t.Errorf("%v hedges for %v leases, want at most %v%% of them and %v more", hedged, first, 100*hedgeFraction, hedgeBurst)
		}
		if hedged == 0 {
			t.Error("no lease was hedged: the slow-downs were not exercised")
		}
		if most > 2 {
			t.Errorf("a batch had %d leases at once, want at most 2 (its lease and one hedge)", most)
		}
	})
}
