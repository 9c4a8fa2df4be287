//go:build cgo

package pipeline

import (
	"hash/maphash"
	"os"
	"testing"
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
	tr, err := ParseTransform("imagenet-train", CHW)
	if err != nil {
		b.Fatal(err)
	}
	ix, cc := NewIndex(1<<30), NewCoefCache(1<<30)
	defer cc.Close()
	d := NewDecoder(WithIndex(ix), WithCoefCache(cc))
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	decode := func(i int) {
		if err := d.Decode(data, tr, Key{Seed: 1, Epoch: uint64(i)}, out); err != nil {
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

// BenchmarkCoefIdentity is what a cached sample's decode pays to know its
// file (coefCacheHit's file), the decode itself left out:
//
//	xxhash64+maphash  the decoder-index key and the coefficient cache's
//	                  check hash of the build before (two passes)
//	mac               a hit now: coefHint, the MAC (CoefCache.id) and the
//	                  entry's index key (one pass)
func BenchmarkCoefIdentity(b *testing.B) {
	data, err := os.ReadFile(coefBenchFile)
	if err != nil {
		b.Fatal(err)
	}
	cc := NewCoefCache(1 << 20)
	defer cc.Close()
	seed := maphash.MakeSeed()
	var sink uint64
	b.Run("xxhash64+maphash", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			sink += keyOf(data).Sum ^ maphash.Bytes(seed, data)
		}
	})
	b.Run("mac", func(b *testing.B) {
		var tag [16]byte
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if cc.mayHold(coefHint(data)) {
				b.Fatal("an empty cache may hold the file")
			}
			k, check := cc.id(data, &tag)
			xx, _ := cc.indexKeyOf(k, check)
			sink += k.sum ^ check ^ xx.Sum
		}
	})
	_ = sink
}
