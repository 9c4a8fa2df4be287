package limits

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestMemReturnPolicy: memory is returned once the budget in use has
// fallen far and stayed down, not for small releases nor for a dip that
// streams fill again, and at most once per memReturnEvery under a churn.
func TestMemReturnPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		m := newMemReturn(func() { n.Add(1) })
		const mb = 1 << 20
		want := func(what string, k int64) {
			t.Helper()
			synctest.Wait()
			if got := n.Load(); got != k {
				t.Fatalf("%s: %d returns, want %d", what, got, k)
			}
		}
		m.note(500 * mb)
		m.note(490 * mb)
		time.Sleep(time.Minute)
		want("a small release", 0)

		m.note(100 * mb) // the large streams end
		time.Sleep(memReturnSettle / 2)
		want("settling", 0)
		time.Sleep(memReturnSettle)
		want("settled", 1)

		m.note(600 * mb)
		m.note(200 * mb)
		time.Sleep(memReturnSettle / 2)
		m.note(600 * mb) // in use again before it settled
		time.Sleep(time.Minute)
		want("a dip filled again", 1)

		for range 120 { // streams of 500 MB start and end every second
			m.note(600 * mb)
			m.note(100 * mb)
			time.Sleep(time.Second)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := n.Load() - 1; got < 1 || got > int64(121*time.Second/memReturnEvery)+1 {
			t.Errorf("%d returns in 2 min of churn, want 1..%d", got, 121*time.Second/memReturnEvery+1)
		}
	})
}
