package coord

import (
	"context"
	"fmt"
	"testing"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
)

// benchMaker makes every lease at once, as an honest maker does, and
// keeps nothing of it: the cost left is the coordinator's.
type benchMaker struct{ name string }

func (m *benchMaker) Make(_ context.Context, _ Job, l *lease.Lease, b *pipeline.Batch) (lease.Made, error) {
	fill(l, b)
	return lease.Made{}, nil
}

func (m *benchMaker) Name() string  { return m.name }
func (m *benchMaker) Trusted() bool { return false }
func (m *benchMaker) Remote() bool  { return true }
func (m *benchMaker) Free() int     { return 1 << 20 }
func (m *benchMaker) Ready() bool   { return true }
func (m *benchMaker) Forget(Job)    {}

// BenchmarkCoordinator is the coordinator's own cost per batch: a job of
// b.N batches of 8 over three makers that answer at once (whole batches,
// or in parts by cache affinity), read by a trainer with credit for all
// that gives each buffer back. What is left is the loop's: leasing,
// routing, collecting, delivering, and a goroutine per maker's answer.
func BenchmarkCoordinator(b *testing.B) {
	for _, affinity := range []bool{false, true} {
		b.Run(fmt.Sprintf("affinity=%v", affinity), func(b *testing.B) {
			env := testEnv(&fakeVerifier{}, &benchMaker{"a"}, &benchMaker{"b"}, &benchMaker{"c"})
			env.Config.Affinity = affinity
			co := New(env, &fakeJob{n: 8 * b.N, size: 8}, Stream{Epochs: 1, Credits: int64(b.N), Memory: &memory{}}, "bench", discard)
			b.ReportAllocs()
			b.ResetTimer()
			done := make(chan error, 1)
			go func() { done <- co.Run(context.Background()) }()
			n := 0
			for o := range co.Out() {
				if o.Batch != nil {
					n++
					co.Recycle(o.Batch)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if n != b.N {
				b.Fatalf("%d batches delivered, want %d", n, b.N)
			}
		})
	}
}
