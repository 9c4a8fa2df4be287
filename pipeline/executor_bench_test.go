//go:build cgo

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/transform"
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
//	empty-8jobs  the same, from 8 goroutines at once, each with its own
//	        Queue: the weighted schedule choosing among 8 queues
func BenchmarkExecutorFill(b *testing.B) {
	_, _, files := benchPhotos(b, 48)
	tr, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		b.Fatal(err)
	}
	indices := make([]int64, len(files)) // 48, or the 42 of testdata/photos
	for i := range indices {
		indices[i] = int64(i)
	}
	// The -cpuclock variants charge each sample its thread CPU time, as
	// the server does (WithCPUClock): what that costs.
	for _, c := range []struct {
		name string
		ds   dataset.Dataset
		opts []Option
	}{
		{"photos", memDataset{files}, nil},
		{"photos-cpuclock", memDataset{files}, []Option{WithCPUClock(ThreadCPUClock)}},
		{"empty", failDataset{48}, nil},
		{"empty-cpuclock", failDataset{48}, []Option{WithCPUClock(ThreadCPUClock)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := NewExecutor(2, c.opts...)
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
	b.Run("empty-8jobs", func(b *testing.B) {
		e := NewExecutor(2)
		defer e.Close()
		ds := failDataset{48}
		var jobs atomic.Int64
		b.SetParallelism(8 / runtime.GOMAXPROCS(0))
		b.ReportAllocs()
		start := benchCPUTime()
		b.RunParallel(func(pb *testing.PB) {
			q := e.Queue(fmt.Sprint("job", jobs.Add(1)))
			defer q.Close()
			var batch Batch
			for pb.Next() {
				if err := q.Fill(context.Background(), ds, tr, 1, 0, indices, PadFromBatch, &batch); err != nil {
					b.Error(err)
					return
				}
			}
		})
		samples := float64(b.N * len(indices))
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/samples, "ns/sample")
		b.ReportMetric(float64(benchCPUTime()-start)/samples, "cpu-ns/sample")
	})
}

// BenchmarkExecutorViews runs Executor.Fill on one worker over batches of
// 50 of up to 200 photos, for presets of several views and their one-view
// parts: cpu-ns/sample is a sample's CPU with all its views, what `perf
// record` over it divides among the kernels (BENCHMARKS.md, "Many views
// from one decode").
func BenchmarkExecutorViews(b *testing.B) {
	_, _, files := benchPhotos(b, 200)
	for _, preset := range []string{"dinov2", "simclr", "simclr-view"} {
		b.Run(preset, func(b *testing.B) {
			tr, err := transform.ParseTransform(preset, transform.CHW)
			if err != nil {
				b.Fatal(err)
			}
			e := NewExecutor(1)
			defer e.Close()
			indices := make([]int64, 50)
			var batch Batch
			n, start := 0, benchCPUTime()
			for b.Loop() {
				for i := range indices {
					indices[i] = int64((n*len(indices) + i) % len(files))
				}
				if err := e.Fill(context.Background(), memDataset{files}, tr, 1, uint64(n), indices, PadFromBatch, &batch); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(benchCPUTime()-start)/float64(n*len(indices)), "cpu-ns/sample")
		})
	}
}
