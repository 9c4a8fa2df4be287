//go:build cgo

package pipeline

import (
	"context"
	"errors"
	"testing"
)

// failDataset is a Dataset whose every Read fails at once: a Fill over it
// costs only the executor's queueing, hand-off and wake-ups.
type failDataset struct{ n int }

var errBenchRead = errors.New("bench: no data")

func (d failDataset) Len() int                               { return d.n }
func (d failDataset) Label(i int) int64                      { return 0 }
func (d failDataset) Classes() []string                      { return []string{"a"} }
func (d failDataset) Name(i int) string                      { return "x" }
func (d failDataset) Fingerprint() string                    { return "" }
func (d failDataset) Close() error                           { return nil }
func (d failDataset) Read(i int, buf []byte) ([]byte, error) { return nil, errBenchRead }

// BenchmarkExecutorFill runs Executor.Fill over batches of 48 samples, one
// batch per op, on 2 workers. ns/sample is wall time per sample;
// cpu-ns/sample is the process's CPU time per sample (see benchCPUTime).
//
//	photos  48 photos held in memory, imagenet-train: the real per-sample
//	        work plus the executor's
//	empty   48 samples whose Read fails at once: the executor's own cost
//	        (queueing, hand-off, wake-ups, Fill's bookkeeping) alone
func BenchmarkExecutorFill(b *testing.B) {
	_, files := fastPhotos(b, 48)
	tr, err := ParseTransform("imagenet-train", CHW)
	if err != nil {
		b.Fatal(err)
	}
	indices := make([]int64, 48)
	for i := range indices {
		indices[i] = int64(i)
	}
	for _, c := range []struct {
		name string
		ds   Dataset
	}{
		{"photos", memDataset{files}},
		{"empty", failDataset{48}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := NewExecutor(2)
			defer e.Close()
			var batch Batch
			ctx := context.Background()
			b.ReportAllocs()
			n, start := 0, benchCPUTime()
			for b.Loop() {
				if err := e.Fill(ctx, c.ds, tr, 1, uint64(n), indices, PadFromBatch, &batch); err != nil {
					b.Fatal(err)
				}
				n++
			}
			samples := float64(n * len(indices))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/samples, "ns/sample")
			b.ReportMetric(float64(benchCPUTime()-start)/samples, "cpu-ns/sample")
		})
	}
}
