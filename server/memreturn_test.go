package server

import (
	"context"
	"testing"
	"time"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestMemReturnAfterLargeStream: a real server returns memory to the OS
// after a stream whose buffers held much of its budget (limits' memReturnMin)
// ends, and not before.
func TestMemReturnAfterLargeStream(t *testing.T) {
	e := newEnv(t, Config{MemoryBudget: 2 << 30})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := smallJob("tiny", 200)
	open.Job.Transform = &pb.TransformSpec{Ops: []*pb.Op{rrcOp(256)}} // 200 × 192 KiB: 2 × 37.5 MiB reserved
	b := e.srv.budget
	s := e.feedStream(t, ctx, open)
	if _, err := s.Recv(); err != nil { // JobInfo: the job holds its buffers
		t.Fatal(err)
	}
	if b.Returns() != 0 {
		t.Fatal("memory returned while the stream runs")
	}
	for {
		if _, err := s.Recv(); err != nil {
			break // the epoch's end, then the stream's
		}
	}
	for b.Returns() == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("no memory returned after the stream ended (budget in use %d)", b.InUse())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
