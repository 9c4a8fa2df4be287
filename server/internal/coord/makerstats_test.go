package coord

import (
	"testing"
	"testing/synctest"
	"time"
)

// What a job measures of its makers, and what it makes of it.

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
