package coord

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
)

// What a job measures of its makers, and what it makes of it: back-off,
// and the lease a maker not measured yet gets.

// TestBackoffUncapped: failures in a row double a maker's back-off, past
// seconds, up to maxBackoff; the leases already in flight when one failed
// count once with it; a success ends it.
func TestBackoffUncapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var st makerStat
		st.rate = 10
		var got []time.Duration
		for range 16 {
			issued := time.Now()
			time.Sleep(time.Second)
			st.failed(time.Now(), issued)
			got = append(got, st.retryAt.Sub(time.Now()))
			// Three more leases of the same burst, issued before the
			// failure: no doubling.
			for range 3 {
				st.failed(time.Now(), issued)
			}
			if d := st.retryAt.Sub(time.Now()); d != got[len(got)-1] {
				t.Fatalf("a lease in flight at the failure doubled the back-off: %v, then %v", got[len(got)-1], d)
			}
			time.Sleep(st.retryAt.Sub(time.Now()))
		}
		for i, d := range got {
			want := min(baseBackoff<<(i+1), maxBackoff)
			if d != want {
				t.Errorf("failure %d in a row: back-off %v, want %v", i+1, d, want)
			}
		}
		if got[6] <= 5*time.Second || got[len(got)-1] != maxBackoff {
			t.Errorf("back-offs %v: want past 5 s from the 7th failure, up to %v", got, maxBackoff)
		}
		if st.rate >= 10 {
			t.Errorf("rate %v after failures, want it halved each time", st.rate)
		}
		st.done(time.Now(), &leaseRec{n: 1}, time.Second)
		if st.fails != 0 {
			t.Errorf("%d failures in a row after a success, want 0", st.fails)
		}
	})
}

// TestLeaseUnmeasuredNotFastest: a maker that joins a job whose other
// maker is measured gets one lease, and no more until it answers it; it
// is not taken to be as fast as the fastest.
func TestLeaseUnmeasuredNotFastest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := newMaker("fast", 8)
		fast.auto = paced(10 * time.Millisecond)
		late := newMaker("late", 8)
		late.ready.Store(false)
		var calls atomic.Int64
		first := make(chan struct{})
		pace := paced(10 * time.Millisecond)
		late.auto = func(c *call) {
			if calls.Add(1) == 1 {
				<-first // its first lease: answered when the test says
			}
			pace(c)
		}
		env := testEnv(&fakeVerifier{}, fast, late)
		env.Config.LeaseTimeout = 10 * time.Second
		j := &fakeJob{n: 3 * 300, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 1000})
		wait := tr.run(t.Context())
		time.Sleep(500 * time.Millisecond) // the fast maker is measured
		late.ready.Store(true)
		env.Makers.Poke()
		time.Sleep(15 * time.Millisecond) // less than a hedge's delay
		if n := calls.Load(); n != 1 {
			t.Errorf("the unmeasured maker got %d leases while its first was in flight, want 1", n)
		}
		close(first)
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		if n := testutil.ToFloat64(env.Metrics.Leases.WithLabelValues("late")); n < 2 {
			t.Errorf("the late maker got %v leases, want more once measured", n)
		}
	})
}

// TestLeaseWaitsForFasterMaker: a maker of 100 batches/s that takes two
// leases at once (as a worker of one core does) beside one of 10
// batches/s with room for eight: when the fast one is full, the job waits
// for it rather than give the slow one a batch it would make ten times
// later, which delivery would then wait for. The trainer gets its batches
// about as fast as from the fast maker alone (on the fake clock).
func TestLeaseWaitsForFasterMaker(t *testing.T) {
	const batches = 300
	run := func(withSlow bool) (time.Duration, float64) {
		var took time.Duration
		var slowLeases float64
		synctest.Test(t, func(t *testing.T) {
			fast := newMaker("fast", 2)
			fast.auto = paced(10 * time.Millisecond)
			ms := []Maker{fast}
			if withSlow {
				slow := newMaker("slow", 8)
				slow.auto = paced(100 * time.Millisecond)
				ms = append(ms, slow)
			}
			env := testEnv(&fakeVerifier{}, ms...)
			env.Config.LeaseTimeout = 10 * time.Second
			j := &fakeJob{n: 3 * batches, size: 3}
			_, tr := start(env, j, Stream{Epochs: 1, Credits: 1 << 20})
			t0 := time.Now()
			if err := tr.run(t.Context())(); err != nil {
				t.Fatal(err)
			}
			took = time.Since(t0)
			tr.exactlyOnce(t, j, 1)
			slowLeases = testutil.ToFloat64(env.Metrics.Leases.WithLabelValues("slow"))
		})
		return took, slowLeases
	}
	alone, _ := run(false)
	with, slow := run(true)
	t.Logf("%d batches: %v from the fast maker alone, %v beside the slow one, which got %v leases", batches, alone, with, slow)
	if ratio := alone.Seconds() / with.Seconds(); ratio < 0.9 {
		t.Errorf("beside the slow maker the trainer got %.2f of the fast maker's rate alone, want >= 0.9", ratio)
	}
	if slow > 10 {
		t.Errorf("the slow maker got %v leases while the fast one was full, want a few (its first, measuring it)", slow)
	}
}

// TestOutrunOnce: a maker whose lease is outrun by its hedge once (a lease
// in the job's tail) is not backed off, and its rate moves only part way
// towards what the lease showed; outrun again in a row, it is.
func TestOutrunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var st makerStat
		st.rate = 10
		rec := &leaseRec{n: 1, issued: time.Now()}
		time.Sleep(time.Second)
		st.outrun(time.Now(), rec)
		if st.fails != 1 || st.retryAt.After(time.Now()) || st.rate != 0.7*10+0.3*1 {
			t.Errorf("outrun once: %d failures, back-off until %v, rate %v; want 1, none, %v", st.fails, st.retryAt, st.rate, 0.7*10+0.3*1)
		}
		rec = &leaseRec{n: 1, issued: time.Now()}
		time.Sleep(time.Second)
		st.outrun(time.Now(), rec)
		if d := st.retryAt.Sub(time.Now()); st.fails != 2 || d != backoff(1) {
			t.Errorf("outrun twice in a row: %d failures, back-off %v; want 2, %v", st.fails, d, backoff(1))
		}
	})
}

// TestRoomCountedOnce: a lease issued to a maker counts against the
// maker's room in the job's free until the maker counts it itself
// (lease.Lease.Counted, from its Make), through the turn-aways of a maker
// that was busy: never twice once the maker counts it, and never not at
// all in between (a part whose goroutine had started but whose Make had
// not was counted nowhere: a third part went to a maker of room 2, was
// turned away as busy, and its lease, late, was hedged).
func TestRoomCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMaker("a", 0)
		var st makerStat
		l := &lease.Lease{Counted: st.start()}
		if f := st.free(m); f != -1 {
			t.Fatalf("issued to a full maker: free %d, want -1", f)
		}
		if _, err := m.Make(t.Context(), nil, l, &pipeline.Batch{}); !errors.Is(err, lease.ErrBusy) {
			t.Fatalf("Make on a full maker: %v, want busy", err)
		}
		if n := st.starting.Load(); n != 1 {
			t.Fatalf("turned away as busy: starting %d, want the lease still counted", n)
		}
		m.capacity.Store(2)
		done := make(chan error, 1)
		go func() {
			_, err := m.Make(t.Context(), nil, l, &pipeline.Batch{})
			done <- err
		}()
		c := m.next(t)
		if f, n := st.free(m), st.starting.Load(); f != 1 || n != 0 {
			t.Errorf("while its Make runs: free %d, starting %d; want 1 and 0 (the maker counts it)", f, n)
		}
		c.answer <- nil
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		l.Count() // as the coordinator does when Make returns
		if f, n := st.free(m), st.starting.Load(); f != 2 || n != 0 {
			t.Errorf("after its Make: free %d, starting %d; want 2 and 0", f, n)
		}
	})
}
