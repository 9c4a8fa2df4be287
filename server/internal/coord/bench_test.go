package coord

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkCoordinator is the coordinator's own cost per batch: a job of
// b.N batches of 8 over three makers that answer at once (whole batches,
// or in parts by cache affinity), read by a trainer with credit for all.
// The makers' and the trainer's work is a copy of a few bytes: what is
// left is the loop's (leasing, routing, collecting, delivering).
func BenchmarkCoordinator(b *testing.B) {
	for _, affinity := range []bool{false, true} {
		b.Run(fmt.Sprintf("affinity=%v", affinity), func(b *testing.B) {
			a, m, c := newMaker("a", 8), newMaker("b", 8), newMaker("c", 8)
			for _, mk := range []*scriptedMaker{a, m, c} {
				mk.auto = (*call).made
			}
			env := testEnv(&fakeVerifier{}, a, m, c)
			env.Config.Affinity = affinity
			j := &fakeJob{n: 8 * b.N, size: 8}
			co := New(env, j, Stream{Epochs: 1, Credits: int64(b.N), Memory: &memory{}}, "bench", discard)
			tr := &trainer{c: co}
			b.ReportAllocs()
			b.ResetTimer()
			if err := tr.run(context.Background())(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if len(tr.batches) != b.N {
				b.Fatalf("%d batches delivered, want %d", len(tr.batches), b.N)
			}
		})
	}
}
