package server

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
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

// TestMemReturnAfterLargeStream: a real server returns memory to the OS
// after a stream whose buffers held more than memReturnMin of its budget
// ends, and not before.
func TestMemReturnAfterLargeStream(t *testing.T) {
	e := newEnv(t, Config{MemoryBudget: 2 << 30})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := smallJob("tiny", 200)
	open.Job.Transform = &pb.TransformSpec{Ops: []*pb.Op{rrcOp(256)}} // 200 × 192 KiB: 2 × 37.5 MiB reserved
	ret := e.srv.budget.ret
	s := e.feedStream(t, ctx, open)
	if _, err := s.Recv(); err != nil { // JobInfo: the job holds its buffers
		t.Fatal(err)
	}
	if ret.returns.Load() != 0 {
		t.Fatal("memory returned while the stream runs")
	}
	for {
		if _, err := s.Recv(); err != nil {
			break // the epoch's end, then the stream's
		}
	}
	for ret.returns.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no memory returned after the stream ended (budget in use %d)", e.srv.budget.inUse())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
