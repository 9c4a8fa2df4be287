package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// blockedBudget is a ScratchBudget that never has the bytes: Acquire
// waits its whole wait unless its ctx ends first.
type blockedBudget struct {
	once    sync.Once
	waiting chan struct{} // closed when the first Acquire waits
}

func (b *blockedBudget) Acquire(ctx context.Context, n int64, wait time.Duration, what string) error {
	b.once.Do(func() { close(b.waiting) })
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return errors.New("blockedBudget: the wait ran out")
	}
}
func (b *blockedBudget) Try(n int64) bool { return false }
func (b *blockedBudget) Release(n int64)  {}

// TestScratchWaitEndsWithJob: a sample waiting for the memory budget to
// have its scratch (reserveScratch) waits under its Fill's context, ended
// too when its queue closes: with an hour's wait, a cancelled Fill
// returns context.Canceled (or its sample failed with it) and a closed queue's Fill ErrClosed (and
// Close returns), at once rather than after the wait.
func TestScratchWaitEndsWithJob(t *testing.T) {
	tr := mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpYOLOLoadImage, Args: &transform.YOLOLoadImageArgs{ImgSz: 64}}, // the YOLO kernels' planes: scratch whatever the image
		ops.Op{Kind: transform.OpYOLOLetterBox, Args: &transform.YOLOLetterBoxArgs{NewShape: [2]int{64, 64}, Stride: 32, ScaleUp: true, Center: true}})
	ds := memDataset{goldenJPEGs()[:1]}
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			bb := &blockedBudget{waiting: make(chan struct{})}
			e := NewExecutor(1, WithScratchBudget(bb, time.Hour))
			defer e.Close()
			q := e.Queue("waits")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			var b Batch
			go func() { done <- q.Fill(ctx, ds, tr, 0, 0, []int64{0}, Drop, &b) }()
			select {
			case <-bb.waiting:
			case <-time.After(time.Minute):
				t.Fatal("no sample waited for its scratch")
			}
			want := context.Canceled
			closed := make(chan struct{})
			if how == "cancel" {
				cancel()
				close(closed)
			} else {
				want = ErrClosed
				go func() { q.Close(); close(closed) }()
			}
			// The sample's wait may end (its error ctx's) before the
			// Fill sees its ctx end: a batch of no sample then.
			err := waitFill(t, done)
			if !errors.Is(err, want) && (err != nil || b.N != 0 || len(b.Errors) != 1 || !errors.Is(b.Errors[0].Err, want)) {
				t.Fatalf("Fill: %v (N %d, errors %v), want %v", err, b.N, b.Errors, want)
			}
			<-closed
		})
	}
}
