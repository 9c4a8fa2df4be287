//go:build cgo

package pipeline

import (
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// coefBenchFile is the ~100 KB baseline photo BenchmarkCoefCacheHit
// decodes (466x393, 104,532 bytes).
const coefBenchFile = "../testdata/photos/colorfulcups/000003.jpg"

// BenchmarkCoefCacheHit decodes one ~100 KB baseline JPEG with
// imagenet-train, a new crop each op, through a decoder index and a
// coefficient cache both warmed by 8 epochs: the per-sample cost of a
// cached sample, the file's identity (its hashes) included. ns/op and
// cpu-ns/op are per sample.
func BenchmarkCoefCacheHit(b *testing.B) {
	data, err := os.ReadFile(coefBenchFile)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		b.Fatal(err)
	}
	ix, cc := index.New(1<<30), codec.NewCoefCache(1<<30)
	defer cc.Close()
	d := NewDecoder(WithIndex(ix), WithCoefCache(cc))
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	decode := func(i int) {
		if err := d.Decode(data, tr, det.Key{Seed: 1, Epoch: uint64(i)}, out); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 8 {
		decode(i)
	}
	s0 := cc.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	i, start := 8, benchCPUTime()
	for b.Loop() {
		decode(i)
		i++
	}
	benchReportCPU(b, start, i-8)
	if s := cc.Stats(); s.MCUsHit == s0.MCUsHit || s.Collisions != 0 {
		b.Fatalf("no MCU from the cache (%d hit) or %d collisions: not the cached path", s.MCUsHit-s0.MCUsHit, s.Collisions)
	}
}
