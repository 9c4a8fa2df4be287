package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stoker-dev/stoker/internal/lease"
)

// The lease state machine (the table, stepped by lease and collect), each
// way a maker can answer, against makers the test scripts: a batch is
// delivered once and only once, in order, with an honest maker's bytes,
// whatever the makers do. Each runs in a synctest bubble: lease deadlines
// and back-offs pass on a fake clock, in no time.

// start makes a coordinator of job j over env and its trainer.
func start(env *Env, j *fakeJob, st Stream) (*Coordinator, *trainer) {
	if st.Memory == nil {
		st.Memory = &memory{}
	}
	c := New(env, j, st, "tiny-r0-1", discard)
	return c, &trainer{c: c}
}

func failures(env *Env, maker, reason string) float64 {
	return testutil.ToFloat64(env.Metrics.LeaseFailures.WithLabelValues(maker, reason))
}

// Every answer made at once, by one maker: the baseline, over two epochs.
func TestLeaseAllMade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMaker("a", 8)
		a.auto = (*call).made
		env := testEnv(&fakeVerifier{}, a)
		j := &fakeJob{n: 10, size: 3}
		_, tr := start(env, j, Stream{Epochs: 2, Credits: 100})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 2)
		if a.forgot != 1 {
			t.Errorf("the maker forgot the job %d times, want once", a.forgot)
		}
	})
}

// A failed answer puts its batch back, to be leased again before any new
// one; the maker is backed off, and the failure counted.
func TestLeaseFailedAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMaker("a", 8)
		failed := false
		a.auto = func(c *call) {
			if c.l.Number == 1 && !failed {
				failed = true
				c.answer <- errors.New("the disk said no")
				return
			}
			c.made()
		}
		env := testEnv(&fakeVerifier{}, a)
		j := &fakeJob{n: 12, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		if got := failures(env, "a", "error"); got != 1 {
			t.Errorf("%v failures counted, want 1", got)
		}
	})
}

// Busy and draining answers are no failure: the batch is leased again,
// nothing is counted against the maker or the batch's attempts (more of
// them than maxAttempts do not fail the job).
func TestLeaseBusyAndDraining(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		err          error
	}{
		{"busy", "busy", lease.ErrBusy},
		{"draining", "draining", lease.ErrDraining},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newMaker("a", 8)
				turnedAway := 0
				a.auto = func(c *call) {
					if c.l.Number == 0 && turnedAway < 2*maxAttempts {
						turnedAway++
						c.answer <- fmt.Errorf("%w: try later", tc.err)
						return
					}
					c.made()
				}
				env := testEnv(&fakeVerifier{}, a)
				j := &fakeJob{n: 9, size: 3}
				_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
				if err := tr.run(t.Context())(); err != nil {
					t.Fatal(err)
				}
				tr.exactlyOnce(t, j, 1)
				if got := failures(env, "a", tc.reason); got != 2*maxAttempts {
					t.Errorf("%v %s answers counted, want %d", got, tc.reason, 2*maxAttempts)
				}
				if got := failures(env, "a", "error") + failures(env, "a", "timeout"); got != 0 {
					t.Errorf("%v failures counted, want none", got)
				}
			})
		})
	}
}

// A maker that never answers: its lease runs out at the lease timeout
// (on the fake clock) and the batch goes to another maker; the late
// maker's Make ends with the lease's context.
func TestLeaseTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := newMaker("slow", 1)
		fast := newMaker("fast", 8)
		fast.ready.Store(false) // the first lease goes to slow
		env := testEnvWindow(1, &fakeVerifier{}, slow, fast)
		j := &fakeJob{n: 6, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
		wait := tr.run(t.Context())
		hung := slow.next(t) // never answered
		slow.ready.Store(false)
		fast.auto = (*call).made
		fast.ready.Store(true)
		env.Makers.Poke()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		if !errors.Is(hung.ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("the hung lease's context: %v, want its deadline", hung.ctx.Err())
		}
		if got := failures(env, "slow", "timeout"); got != 1 {
			t.Errorf("%v timeouts counted, want 1", got)
		}
	})
}

// A maker that lies (its batches' bytes are wrong): the batch whose bytes
// are compared fails with ErrMismatch and quarantines it; its batches made
// and not compared are dropped from the reorder buffer and made again; the
// answer to its lease still in flight comes late and is dropped. The
// trainer gets only honest bytes, each batch once.
func TestLeaseMismatchedAndLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		liar := newMaker("liar", 8)
		honest := newMaker("honest", 8)
		honest.ready.Store(false) // every first lease goes to the liar
		v := &fakeVerifier{check: func(l *lease.Lease) bool { return l.Number == 2 }}
		env := testEnv(v, liar, honest)
		j := &fakeJob{n: 15, size: 3}
		c, tr := start(env, j, Stream{Epochs: 1, Credits: 0}) // nothing goes out before the trainer grants
		wait := tr.run(t.Context())
		lie := func(c *call) {
			fill(c.l, c.b)
			c.b.Data[0] ^= 0xff
			c.answer <- nil
		}
		calls := map[int]*call{}
		for len(calls) < 4 {
			cl := liar.next(t)
			calls[cl.l.Number] = cl
		}
		lie(calls[0])
		lie(calls[1])
		synctest.Wait() // both made, unchecked, and waiting for a credit
		honest.auto = (*call).made
		honest.ready.Store(true)
		lie(calls[2]) // checked: a mismatch
		synctest.Wait()
		if v.Why(liar) == nil {
			t.Fatal("the liar is not quarantined")
		}
		lie(calls[3]) // in flight when the liar was quarantined: late, dropped
		synctest.Wait()
		c.Grant(100)
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		if got := failures(env, "liar", "mismatch"); got != 1 {
			t.Errorf("%v mismatches counted, want 1", got)
		}
		if got := testutil.ToFloat64(env.Metrics.ResultsDropped); got != 1 {
			t.Errorf("%v results dropped, want the late answer's 1", got)
		}
	})
}

// Two answers for one batch (its first lease moved on when its maker was
// quarantined by another job, the batch was leased again, and both makers
// answered): whichever comes first while its lease is current is
// delivered, the other dropped.
func TestLeaseDuplicateAnswers(t *testing.T) {
	for _, first := range []string{"moved-on lease first", "current lease first"} {
		t.Run(first, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newMaker("a", 1)
				b := newMaker("b", 1)
				b.ready.Store(false)
				v := &fakeVerifier{}
				env := testEnvWindow(1, v, a, b)
				j := &fakeJob{n: 6, size: 3} // two batches
				_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
				wait := tr.run(t.Context())
				old := a.next(t)
				// Another job found a lying: every job leases elsewhere.
				v.Quarantine(a, fmt.Errorf("%w: another job's batch", ErrMismatch))
				b.ready.Store(true)
				env.Makers.Poke()
				again := b.next(t)
				if old.l.Number != 0 || again.l.Number != 0 {
					t.Fatalf("leases of batches %d and %d, want batch 0 twice", old.l.Number, again.l.Number)
				}
				if first == "moved-on lease first" {
					old.made()
					synctest.Wait()
					again.made()
				} else {
					again.made()
					synctest.Wait()
					old.made()
				}
				synctest.Wait()
				b.next(t).made() // batch 1
				if err := wait(); err != nil {
					t.Fatal(err)
				}
				tr.exactlyOnce(t, j, 1)
				if got := testutil.ToFloat64(env.Metrics.ResultsDropped); got != 1 {
					t.Errorf("%v results dropped, want 1", got)
				}
			})
		})
	}
}

// A refused job: a maker that refuses it gets no more of its leases; when
// every maker refuses, the job ends with ErrNoMaker naming each refusal.
func TestLeaseRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		picky := newMaker("picky", 8)
		picky.auto = func(c *call) { c.answer <- fmt.Errorf("%w: unknown dataset", lease.ErrRefused) }
		willing := newMaker("willing", 8)
		willing.auto = (*call).made
		env := testEnvWindow(1, &fakeVerifier{}, picky, willing)
		j := &fakeJob{n: 12, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
		if err := tr.run(t.Context())(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		if got := failures(env, "picky", "refused"); got != 1 {
			t.Errorf("%v refusals counted, want 1: a refusing maker is asked once", got)
		}

		env = testEnv(&fakeVerifier{}, picky)
		_, tr = start(env, j, Stream{Epochs: 1, Credits: 100})
		err := tr.run(t.Context())()
		if !errors.Is(err, ErrNoMaker) || !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "picky: job refused: unknown dataset") {
			t.Errorf("every maker refusing: %v, want ErrNoMaker naming the refusal", err)
		}
		if len(tr.batches) != 0 {
			t.Errorf("%d batches delivered by makers that refused", len(tr.batches))
		}
	})
}

// A batch that fails on every try fails the job, after maxAttempts
// leases, with ErrBatchFailed and the last maker's error.
func TestLeaseBatchFailsTheJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMaker("a", 8)
		a.auto = func(c *call) {
			if c.l.Number == 1 {
				c.answer <- errors.New("corrupt")
				return
			}
			c.made()
		}
		env := testEnv(&fakeVerifier{}, a)
		j := &fakeJob{n: 12, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
		err := tr.run(t.Context())()
		if !errors.Is(err, ErrBatchFailed) || !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("job: %v, want ErrBatchFailed with the maker's error", err)
		}
		if got := failures(env, "a", "error"); got != maxAttempts {
			t.Errorf("%v failures, want %d", got, maxAttempts)
		}
		for _, d := range tr.batches {
			if d.k >= 1 {
				t.Errorf("batch %d delivered after batch 1, which failed", d.k)
			}
		}
	})
}

// A maker that says the job cannot go on (lease.ErrJobFailed: its
// samples measured past the server's bound) ends the job at its first
// such answer, with that error as it is, not after maxAttempts leases,
// and is not backed off for it.
func TestLeaseJobFailedEndsTheJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		over := fmt.Errorf("%w: measured past the bound", lease.ErrJobFailed)
		a := newMaker("a", 8)
		a.auto = func(c *call) {
			if c.l.Number == 1 {
				c.answer <- over
				return
			}
			c.made()
		}
		env := testEnv(&fakeVerifier{}, a)
		j := &fakeJob{n: 12, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
		err := tr.run(t.Context())()
		if err != over {
			t.Fatalf("job: %v, want the maker's error as it is", err)
		}
		if got := failures(env, "a", "job_failed"); got != 1 {
			t.Errorf("%v job_failed answers counted, want 1", got)
		}
		if got := failures(env, "a", "error"); got != 0 {
			t.Errorf("%v errors counted, want none", got)
		}
	})
}

// errNotConnected is what a peer's leases in flight fail with when its
// stream dies (internal/work's ErrNotConnected).
var errNotConnected = errors.New("peer not connected")

// A maker that vanishes (a peer whose stream died: it is no longer Ready,
// its leases in flight fail with ErrNotConnected, and it leaves the set):
// its batches go to the makers that remain.
func TestLeaseMakerVanishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gone := newMaker("gone", 8)
		stays := newMaker("stays", 8)
		stays.ready.Store(false)
		env := testEnv(&fakeVerifier{}, gone, stays)
		j := &fakeJob{n: 15, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
		wait := tr.run(t.Context())
		var inFlight []*call
		for range DefaultWindow {
			inFlight = append(inFlight, gone.next(t))
		}
		inFlight[0].made()
		gone.ready.Store(false)
		env.Makers.Remove(gone)
		stays.auto = (*call).made
		stays.ready.Store(true)
		env.Makers.Poke()
		for _, c := range inFlight[1:] {
			c.answer <- fmt.Errorf("%w: peer gone: stream reset", errNotConnected)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
		if got := failures(env, "gone", "error"); got != float64(len(inFlight)-1) {
			t.Errorf("%v failures, want %d", got, len(inFlight)-1)
		}
	})
}

// The job cancelled (its trainer went) with leases in flight: Run returns
// the cause at once, every Make returns (its lease's context ends), every
// maker forgets the job, and nothing more is delivered.
func TestLeaseCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMaker("a", 8)
		env := testEnv(&fakeVerifier{}, a)
		j := &fakeJob{n: 30, size: 3}
		ctx, cancel := context.WithCancelCause(t.Context())
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
		wait := tr.run(ctx)
		first := a.next(t)
		first.made()
		second := a.next(t)
		gone := errors.New("the trainer went")
		cancel(gone)
		if err := wait(); !errors.Is(err, gone) {
			t.Fatalf("Run: %v, want the cause", err)
		}
		if !errors.Is(second.ctx.Err(), context.Canceled) {
			t.Errorf("a lease in flight: context %v, want cancelled", second.ctx.Err())
		}
		synctest.Wait()
		if a.pending != 0 || a.forgot != 1 {
			t.Errorf("%d Makes still running, the job forgotten %d times; want 0 and once", a.pending, a.forgot)
		}
		if len(tr.batches) > 1 || len(tr.batches) == 1 && tr.batches[0].k != 0 {
			t.Errorf("delivered %v after the job was cancelled", tr.batches)
		}
	})
}

// A maker full of other jobs' leases is waited for: the job leases to it
// the moment it frees room (Makers.Freed), with no time passing.
func TestLeaseWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMaker("a", 0) // full
		env := testEnv(&fakeVerifier{}, a)
		j := &fakeJob{n: 3, size: 3}
		_, tr := start(env, j, Stream{Epochs: 1, Credits: 100})
		wait := tr.run(t.Context())
		synctest.Wait()
		if len(a.calls) != 0 {
			t.Fatal("leased to a full maker")
		}
		freed := time.Now()
		a.capacity.Store(1)
		env.Makers.Freed(a)
		synctest.Wait()
		if len(a.calls) != 1 || !time.Now().Equal(freed) {
			t.Fatalf("%d leases, %v after the maker freed room; want one at once", len(a.calls), time.Since(freed))
		}
		a.next(t).made()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		tr.exactlyOnce(t, j, 1)
	})
}
