//go:build cgo

package pipeline

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/transform"
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
			tune func(*fastKnobs)
		}{
			{"fast", nil, nil},
			{"fast-any", []Option{WithDCTScaling(ScaleAny)}, nil},
			{"fast-off", []Option{WithDCTScaling(ScaleOff)}, nil},
			{"fast-merged", nil, func(k *fastKnobs) { k.Merged = true }},
			{"fast-ifast", nil, func(k *fastKnobs) { k.IFast = true }},
			{"fast-libhuff", nil, func(k *fastKnobs) { k.LibHuff = true }},
			{"fast-scalar", nil, func(k *fastKnobs) { k.SIMDMax = -1 }},
			{"ref", []Option{WithReference(true)}, nil},
		} {
			b.Run("jpeg/"+tc.name+"/"+v.name, func(b *testing.B) {
				d := NewDecoder(v.opts...)
				defer d.Close()
				if v.tune != nil {
					v.tune(knobsOf(d))
				}
				out := make([]byte, tc.t.SampleBytes())
				b.SetBytes(int64(total / len(files)))
				b.ReportAllocs()
				i, start := 0, benchCPUTime()
				for b.Loop() {
					if err := d.Decode(files[i%len(files)], tc.t, det.Key{Seed: 1, Index: uint64(i)}, out); err != nil {
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
				if err := d.Decode(data, tc.t, det.Key{Seed: 1, Index: uint64(i)}, out); err != nil {
					b.Fatal(err)
				}
				i++
			}
			benchReportCPU(b, start, i)
		})
	}
}

// BenchmarkIndex decodes the photos held in memory (the shared 1,000 where
// they are), one per op, as epochs: each op is the next file of the
// current pass, with the key (seed, epoch, file), so every epoch crops each
// file anew. ns/op is per image. Variants:
//
//	none           no decoder index (what every epoch cost before it)
//	epoch1         an Index that has never seen the file (it is emptied
//	               at every pass): the first epoch's cost, hashing and
//	               recording included
//	loaded         an Index saved after one epoch and loaded into a fresh
//	               one at every pass (a restarted server with --index-dir):
//	               the first epoch after a restart; its checkpoints are
//	               confirmed as decodes pass them, never started from
//	warm/<px>      an Index filled by one epoch before the timer starts
//	               (checkpoints every <px> source pixels of a row; rows:
//	               row starts only): the second and later epochs
//	epoch1+coefs   epoch1 with a CoefCache too (emptied at every pass):
//	               the first epoch's cost with the cache on (files are
//	               admitted on their second decode)
//	coefs/<n>      the index and a CoefCache after n epochs: what the
//	               cache serves as it fills (hit-%: MCUs copied from it;
//	               coef-B/img: its memory per file; stored/img: MCUs it
//	               still gains per image)
//
// Metrics: cpu-ns/op; mcu-% (the share of the scans' MCUs entropy-decoded)
// and index-B/img (the index's bytes per file) for the index variants.
func BenchmarkIndex(b *testing.B) {
	_, _, files := benchPhotos(b, 0)
	tr, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]byte, tr.SampleBytes())
	decode := func(b *testing.B, d *Decoder, i int) {
		n := len(files)
		if err := d.Decode(files[i%n], tr, det.Key{Seed: 1, Epoch: uint64(i / n), Index: uint64(i % n)}, out); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("none", func(b *testing.B) {
		d := NewDecoder()
		defer d.Close()
		b.ReportAllocs()
		i, start := 0, benchCPUTime()
		for b.Loop() {
			decode(b, d, i)
			i++
		}
		benchReportCPU(b, start, i)
	})
	for _, withCoefs := range []bool{false, true} {
		name := "epoch1"
		if withCoefs {
			name += "+coefs"
		}
		b.Run(name, func(b *testing.B) {
			var cc *codec.CoefCache
			d := NewDecoder()
			defer d.Close()
			b.ReportAllocs()
			i, start := 0, benchCPUTime()
			for b.Loop() {
				if i%len(files) == 0 {
					b.StopTimer()
					d.opts.index = index.New(1 << 30)
					if withCoefs {
						if cc != nil {
							cc.Close()
						}
						cc = codec.NewCoefCache(1 << 32)
						d.opts.coefs = cc
					}
					b.StartTimer()
				}
				decode(b, d, i)
				i++
			}
			benchReportCPU(b, start, i)
			if cc != nil {
				cc.Close()
			}
		})
	}
	b.Run("loaded", func(b *testing.B) {
		ix := index.New(1 << 30)
		d := NewDecoder(WithIndex(ix))
		defer d.Close()
		for i := range files {
			decode(b, d, i)
		}
		var saved bytes.Buffer
		if err := ix.Save(&saved, "bench"); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		i, start := len(files), benchCPUTime()
		for b.Loop() {
			if i%len(files) == 0 {
				b.StopTimer()
				d.opts.index = index.New(1 << 30)
				if _, err := d.opts.index.Load(bytes.NewReader(saved.Bytes()), "bench"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			decode(b, d, i)
			i++
		}
		benchReportCPU(b, start, i-len(files))
	})
	// coefs/<n>: the index and the coefficient cache, after n epochs.
	for _, warm := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("coefs/%d", warm), func(b *testing.B) {
			ix, cc := index.New(1<<30), codec.NewCoefCache(1<<32)
			defer cc.Close()
			d := NewDecoder(WithIndex(ix), WithCoefCache(cc))
			defer d.Close()
			for i := range warm * len(files) {
				decode(b, d, i)
			}
			s0, x0 := cc.Stats(), ix.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			i, start := warm*len(files), benchCPUTime()
			for b.Loop() {
				decode(b, d, i)
				i++
			}
			benchReportCPU(b, start, i-warm*len(files))
			s := cc.Stats()
			b.ReportMetric(100*float64(s.MCUsHit-s0.MCUsHit)/float64(max(s.MCUsWanted-s0.MCUsWanted, 1)), "hit-%")
			b.ReportMetric(float64(s.Bytes)/float64(max(s.Entries, 1)), "coef-B/img")
			x := ix.Stats()
			b.ReportMetric(100*float64(x.MCUsDecoded-x0.MCUsDecoded)/float64(max(x.MCUsTotal-x0.MCUsTotal, 1)), "mcu-%")
			b.ReportMetric(float64(s.MCUsStored-s0.MCUsStored)/float64(i-warm*len(files)), "stored/img")
		})
	}
	for _, v := range []struct {
		name string
		px   int
	}{{"rows", 1 << 20}, {"128", 128}, {"64", 64}, {"32", 32}, {"16", 16}} {
		b.Run("warm/"+v.name, func(b *testing.B) {
			ix := index.New(1 << 30)
			d := NewDecoder(WithIndex(ix))
			defer d.Close()
			knobsOf(d).IxPx = v.px
			for i := range files {
				decode(b, d, i)
			}
			s0 := ix.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			i, start := len(files), benchCPUTime()
			for b.Loop() {
				decode(b, d, i)
				i++
			}
			benchReportCPU(b, start, i-len(files))
			s := ix.Stats()
			b.ReportMetric(100*float64(s.MCUsDecoded-s0.MCUsDecoded)/float64(max(s.MCUsTotal-s0.MCUsTotal, 1)), "mcu-%")
			b.ReportMetric(float64(s.Bytes)/float64(max(s.Entries, 1)), "index-B/img")
		})
	}
}
