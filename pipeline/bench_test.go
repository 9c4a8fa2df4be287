//go:build cgo

package pipeline

import (
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"
)

// benchCPUTime is the process's user+system CPU time. The benchmark machine is
// shared and noisy; CPU time per op counts only the time this process ran,
// so it is the steadier figure when other work competes for the cores.
func benchCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchReportCPU adds cpu-ns/op (see benchCPUTime) to a benchmark's results.
func benchReportCPU(b *testing.B, start time.Duration, ops int) {
	if ops > 0 {
		b.ReportMetric(float64(benchCPUTime()-start)/float64(ops), "cpu-ns/op")
	}
}

// BenchmarkDecode decodes ~50 photos held in memory, one per op, each with
// its own key, into a reused output buffer: ns/op is per image and MB/s is
// of encoded bytes. The fast variants must show 0 allocs/op. Variants:
//
//	jpeg/<transform>/fast        the defaults (ScalePow2, merged chroma
//	                             upsampling, islow IDCT)
//	jpeg/<transform>/fast-any    ScaleAny
//	jpeg/<transform>/fast-off    ScaleOff
//	jpeg/<transform>/fast-merged  chroma replicated (libjpeg's merged upsampler), not fancy
//	jpeg/<transform>/fast-ifast  JDCT_IFAST
//	jpeg/<transform>/fast-libhuff  libjpeg's own Huffman decoder, not huff.c's
//	jpeg/<transform>/fast-scalar resampling without SIMD
//	jpeg/<transform>/ref         the pure-Go reference path
//	file/<transform>/fast        os.ReadFile (from the page cache) + decode
//	                             over all the photos: the whole per-image
//	                             work of a loader, as a Python loop over
//	                             files does it
func BenchmarkDecode(b *testing.B) {
	dir, _, files := benchPhotos(b, 50)
	var total int
	for _, f := range files {
		total += len(f)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
	sort.Strings(paths)
	for _, tc := range fastTransforms(b)[:2] {
		for _, v := range []struct {
			name string
			opts []Option
			tune func(*fastState)
		}{
			{"fast", nil, nil},
			{"fast-any", []Option{WithDCTScaling(ScaleAny)}, nil},
			{"fast-off", []Option{WithDCTScaling(ScaleOff)}, nil},
			{"fast-merged", nil, func(f *fastState) { f.merged = true }},
			{"fast-ifast", nil, func(f *fastState) { f.ifast = true }},
			{"fast-libhuff", nil, func(f *fastState) { f.libHuff = true }},
			{"fast-scalar", nil, func(f *fastState) { f.simdMax = -1 }},
			{"ref", []Option{WithReference(true)}, nil},
		} {
			b.Run("jpeg/"+tc.name+"/"+v.name, func(b *testing.B) {
				d := NewDecoder(v.opts...)
				defer d.Close()
				if v.tune != nil {
					v.tune(&d.fast)
				}
				out := make([]byte, tc.t.SampleBytes())
				b.SetBytes(int64(total / len(files)))
				b.ReportAllocs()
				i, start := 0, benchCPUTime()
				for b.Loop() {
					if err := d.Decode(files[i%len(files)], tc.t, Key{Seed: 1, Index: uint64(i)}, out); err != nil {
						b.Fatal(err)
					}
					i++
				}
				benchReportCPU(b, start, i)
			})
		}
		b.Run("file/"+tc.name+"/fast", func(b *testing.B) {
			d := NewDecoder()
			defer d.Close()
			out := make([]byte, tc.t.SampleBytes())
			b.ReportAllocs()
			i, start := 0, benchCPUTime()
			for b.Loop() {
				data, err := os.ReadFile(paths[i%len(paths)])
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Decode(data, tc.t, Key{Seed: 1, Index: uint64(i)}, out); err != nil {
					b.Fatal(err)
				}
				i++
			}
			benchReportCPU(b, start, i)
		})
	}
}
