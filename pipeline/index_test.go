//go:build cgo

package pipeline

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// The decoder index's names, as the tests here use them.
type indexKey = index.Key

func keyOf(data []byte) indexKey { return index.KeyOf(data) }

// ixGet is k's entry in ix (nil: none), made the most recently used.
func ixGet(ix *index.Index, k indexKey) []byte {
	b, _ := ix.Lookup(k)
	return b
}

// indexImages are the index tests' files: the repository's photos (4:2:0,
// 4:4:4, 4:2:2, gray, progressive, restart markers per row and per 7
// MCUs) and the generated JPEGs (every subsampling, odd and tiny sizes,
// restart markers, RGB, gray with 2x2 sampling, progressive).
func indexImages(tb testing.TB) []fastSynthJPEG {
	imgs := fastSynthJPEGs(tb)
	names, photos := fastPhotos(tb, 0)
	for i, p := range photos {
		imgs = append(imgs, fastSynthJPEG{"photo-" + names[i], p})
	}
	return imgs
}

// randomPlans are n crop-then-resize plans of a w x h image: crops of any
// size anywhere (from one pixel to the whole image), outputs that upscale
// or downscale past the DCT scales, flips.
func randomPlans(r *rand.Rand, w, h, n int) []transform.SamplePlan {
	ps := make([]transform.SamplePlan, 0, n)
	for range n {
		cw, ch := 1+r.IntN(w), 1+r.IntN(h)
		cx, cy := r.IntN(w-cw+1), r.IntN(h-ch+1)
		ow, oh := 1+r.IntN(min(2*cw, 300)), 1+r.IntN(min(2*ch, 300))
		if r.IntN(4) == 0 {
			ow, oh = max(1, cw/(1+r.IntN(9))), max(1, ch/(1+r.IntN(9)))
		}
		ps = append(ps, transform.SamplePlan{Geom: transform.CropResize, SrcW: w, SrcH: h, CX: cx, CY: cy, CW: cw, CH: ch, OutW: ow, OutH: oh, Flip: r.IntN(2) == 0, Antialias: true})
	}
	return ps
}

// TestExactIndexExact: decodes that start at the decoder index's checkpoints
// (and restart markers) give the very bytes of decodes without an index,
// for every kind of file, many random crops and the edge crops, at several
// checkpoint spacings (one MCU, a few, row starts only), with both chroma
// upsamplers and DCT scaling. The index must also be used: later decodes
// entropy-decode fewer MCUs.
func TestExactIndexExact(t *testing.T) {
	exactTest(t)
	imgs := indexImages(t)
	for _, knobs := range []struct {
		name    string
		px      int
		merged  bool
		scaling DCTScaling
		crops   int // random crops per file, besides the edge crops
		edges   int // edge crops per file (fastEdgePlans), at most
	}{
		{"default", 0, false, ScalePow2, 24, 1000},
		{"every-mcu", 1, false, ScalePow2, 12, 20},
		{"default-merged-any", 0, true, ScaleAny, 12, 20},
		{"rows-only", 1 << 20, false, ScalePow2, 12, 20},
	} {
		if testing.Short() {
			knobs.crops, knobs.edges = 6, 10
		}
		t.Run(knobs.name, func(t *testing.T) {
			ix := index.New(64 << 20)
			warm := NewDecoder(WithIndex(ix), WithDCTScaling(knobs.scaling))
			cold := NewDecoder(WithDCTScaling(knobs.scaling))
			defer warm.Close()
			defer cold.Close()
			knobsOf(warm).IxPx, knobsOf(warm).Merged, knobsOf(cold).Merged = knobs.px, knobs.merged, knobs.merged
			r := rand.New(rand.NewPCG(1, uint64(knobs.px)))
			var n, seeks, rst, indexed int
			var decoded, total int64
			for _, img := range imgs {
				hd, err := parseHeader(img.data)
				if err != nil {
					t.Fatal(err)
				}
				edges := fastEdgePlans(hd.w, hd.h)
				plans := append(randomPlans(r, hd.w, hd.h, knobs.crops), edges[:min(len(edges), knobs.edges)]...)
				for i, p := range plans {
					layout := transform.Layout(i % 2)
					a, b := make([]byte, 3*p.OutW*p.OutH), make([]byte, 3*p.OutW*p.OutH)
					if err := warm.decodeFast(img.data, &hd, &p, layout, a); err != nil {
						t.Fatalf("%s %+v: with index: %v", img.name, p, err)
					}
					st := warm.fast.stats()
					if err := cold.decodeFast(img.data, &hd, &p, layout, b); err != nil {
						t.Fatalf("%s %+v: without: %v", img.name, p, err)
					}
					if !bytes.Equal(a, b) {
						t.Fatalf("%s crop %d,%d %dx%d -> %dx%d flip=%v scale %d/8: index decode differs from a decode without (MAD %.3f; %+v)",
							img.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, p.Flip, st.scaleM, fastMAD(a, b), st)
					}
					if st.huff != !hd.progressive {
						t.Fatalf("%s: huff.c used %v, progressive %v", img.name, st.huff, hd.progressive)
					}
					if st.ixState == 2 {
						indexed++
						decoded += int64(st.decoded)
						total += int64(st.mcus)
					}
					seeks += st.ckSeeks
					rst += st.rstSeeks
					n++
				}
			}
			s := ix.Stats()
			t.Logf("%d decodes identical; %d with an index: %.1f%% of their MCUs entropy-decoded; %d checkpoint seeks, %d restart seeks; %d entries, %d bytes",
				n, indexed, 100*float64(decoded)/float64(max(total, 1)), seeks, rst, s.Entries, s.Bytes)
			if seeks == 0 || indexed == 0 || decoded*10 > total*9 {
				t.Errorf("the index was not used: %d checkpoint seeks, %d decodes with an index, %d of %d MCUs decoded", seeks, indexed, decoded, total)
			}
			if rst == 0 {
				t.Errorf("no restart marker seek in files with restart markers")
			}
			if s.Stale != 0 || s.Bad != 0 {
				t.Errorf("%d stale, %d bad indexes of unchanged files", s.Stale, s.Bad)
			}
		})
	}
}

// TestIndexRestartCold: a file with restart markers needs no index to
// skip: the first decode of a crop at its bottom finds the interval by its
// marker (no Huffman decoding above it), with the same bytes as libjpeg's
// own decoder.
func TestIndexRestartCold(t *testing.T) {
	_, photos := fastPhotos(t, 0)
	names, _ := fastPhotos(t, 0)
	var file []byte
	for i, n := range names {
		if n == "coldripple/000002-restart-row.jpg" {
			file = photos[i]
		}
	}
	if file == nil {
		t.Fatal("no coldripple/000002-restart-row.jpg among the photos")
	}
	hd, err := parseHeader(file)
	if err != nil {
		t.Fatal(err)
	}
	p := transform.SamplePlan{Geom: transform.CropResize, SrcW: hd.w, SrcH: hd.h, CX: hd.w / 2, CY: hd.h - 40, CW: 60, CH: 40, OutW: 60, OutH: 40, Antialias: true}
	ours, theirs := NewDecoder(), NewDecoder()
	defer ours.Close()
	defer theirs.Close()
	knobsOf(theirs).LibHuff = true
	a, b := make([]byte, 3*60*40), make([]byte, 3*60*40)
	if err := ours.decodeFast(file, &hd, &p, transform.CHW, a); err != nil {
		t.Fatal(err)
	}
	st := ours.fast.stats()
	if err := theirs.decodeFast(file, &hd, &p, transform.CHW, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("restart seek decode differs from libjpeg's (MAD %.3f)", fastMAD(a, b))
	}
	if st.rstSeeks == 0 || st.decoded*4 > st.mcus {
		t.Errorf("a crop of the bottom rows: %d restart seeks, %d of %d MCUs decoded", st.rstSeeks, st.decoded, st.mcus)
	}
	t.Logf("%+v", st)
}

// TestIndexConcurrent: decoders on several goroutines sharing one Index,
// half of them a CoefCache too (under -race in make test), make the bytes
// a decoder without either makes.
func TestIndexConcurrent(t *testing.T) {
	_, files := fastPhotos(t, 0)
	tr := fastTransforms(t)[0].t
	want := make([][][]byte, 3)
	cold := NewDecoder()
	defer cold.Close()
	for e := range want {
		want[e] = make([][]byte, len(files))
		for i, data := range files {
			want[e][i] = make([]byte, tr.SampleBytes())
			if err := cold.Decode(data, tr, det.Key{Seed: 5, Epoch: uint64(e), Index: uint64(i)}, want[e][i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	ix := index.New(64 << 20)
	cc := codec.NewCoefCache(1 << 30)
	defer cc.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := []Option{WithIndex(ix)}
			if g%2 == 1 {
				opts = append(opts, WithCoefCache(cc))
			}
			d := NewDecoder(opts...)
			defer d.Close()
			got := make([]byte, tr.SampleBytes())
			for e := range want {
				for n := range files {
					i := (n + 11*g) % len(files)
					if err := d.Decode(files[i], tr, det.Key{Seed: 5, Epoch: uint64(e), Index: uint64(i)}, got); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, want[e][i]) {
						errs <- fmt.Errorf("goroutine %d, epoch %d, photo %d: differs from the decode without an index", g, e, i)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := ix.Stats(); s.Hits == 0 {
		t.Errorf("no index hits: %+v", s)
	}
	if s := cc.Stats(); s.MCUsHit == 0 {
		t.Errorf("nothing from the coefficient cache: %+v", s)
	}
}

// warmIndex returns an Index that has seen each file through a few crops.
func warmIndex(t testing.TB, files [][]byte, budget int64) *index.Index {
	t.Helper()
	ix := index.New(budget)
	d := NewDecoder(WithIndex(ix))
	defer d.Close()
	tr := fastTransforms(t)[0].t
	out := make([]byte, tr.SampleBytes())
	for e := range 3 {
		for i, data := range files {
			if err := d.Decode(data, tr, det.Key{Seed: 9, Epoch: uint64(e), Index: uint64(i)}, out); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ix
}

// TestIndexBudget: the index stays within its budget, dropping the least
// recently used files first, and a decode of a dropped file is a miss that
// decodes as before.
func TestIndexBudget(t *testing.T) {
	_, files := fastPhotos(t, 0)
	big := warmIndex(t, files, 1<<30)
	per := big.Stats().Bytes / int64(big.Stats().Entries)
	budget := 10 * per
	ix := warmIndex(t, files, budget)
	s := ix.Stats()
	if s.Bytes > budget || s.Entries < 5 || s.Entries > 12 || s.Evicted == 0 {
		t.Fatalf("budget %d (about 10 files): %+v", budget, s)
	}
	// The most recently used are the ones kept: the last files decoded.
	last := files[len(files)-1]
	if ixGet(ix, keyOf(last)) == nil {
		t.Errorf("the last file decoded was evicted")
	}
	if ixGet(ix, keyOf(files[0])) != nil {
		t.Errorf("the first file decoded is still there")
	}
	// A budget below one entry keeps nothing, and decodes work.
	tiny := warmIndex(t, files[:3], 64)
	if s := tiny.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Errorf("64-byte budget: %+v", s)
	}
}

// TestIndexChangedFile: an index is keyed by the file's bytes: a file
// changed after its index was made (same name, same size, any mtime) is a
// miss, and decodes as it would without an index, error or pixels.
func TestIndexChangedFile(t *testing.T) {
	_, files := fastPhotos(t, 6)
	ix := warmIndex(t, files, 1<<30)
	tr := fastTransforms(t)[0].t
	warm, cold := NewDecoder(WithIndex(ix)), NewDecoder()
	defer warm.Close()
	defer cold.Close()
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 60 {
		data := bytes.Clone(files[n%len(files)])
		sos := bytes.Index(data, []byte{0xFF, 0xDA})
		p := sos + 20 + r.IntN(len(data)-sos-30)
		data[p] ^= byte(1 + r.IntN(255))
		misses := ix.Stats().Misses
		a, b := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
		k := det.Key{Seed: 1, Index: uint64(n)}
		errA, errB := warm.Decode(data, tr, k, a), cold.Decode(data, tr, k, b)
		if (errA == nil) != (errB == nil) || errA == nil && !bytes.Equal(a, b) {
			t.Fatalf("changed file %d: with index %v, without %v, same bytes %v", n, errA, errB, bytes.Equal(a, b))
		}
		if ix.Stats().Misses != misses+1 {
			t.Fatalf("changed file %d: not a miss", n)
		}
	}
}

// TestIndexZeroAllocs: once a file's index is complete (a whole-image
// decode records every checkpoint), later decodes of it allocate nothing.
func TestIndexZeroAllocs(t *testing.T) {
	allocTest(t)
	_, files := fastPhotos(t, 8)
	ix := index.New(1 << 30)
	d := NewDecoder(WithIndex(ix))
	defer d.Close()
	whole, err := transform.NewTransform(transform.CHW, ops.Op{Kind: transform.OpResize, Size: [2]int{64, 64}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, whole.SampleBytes())
	for i, data := range files {
		if err := d.Decode(data, whole, det.Key{Index: uint64(i)}, out); err != nil {
			t.Fatal(err)
		}
	}
	tr := fastTransforms(t)[0].t
	out = make([]byte, tr.SampleBytes())
	i := 0
	allocs := testing.AllocsPerRun(50, func() {
		if err := d.Decode(files[i%len(files)], tr, det.Key{Epoch: 1, Index: uint64(i)}, out); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per decode with a complete index, want 0", allocs)
	}
}

// TestIndexForeign: an index made for one file and given to another (what
// a hash collision would do) is either refused by its header (the other
// file's geometry) and replaced, or caught by a checkpoint that disagrees,
// or leads to corrupt data and the decode is done again from the file's
// start: never an error for a good file, never a panic, and the Decoder
// keeps working.
func TestIndexForeign(t *testing.T) {
	_, files := fastPhotos(t, 0)
	ix := warmIndex(t, files, 1<<30)
	tr := fastTransforms(t)[1].t // imagenet-eval: the centre, needs a seek
	d := NewDecoder()
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	states := map[int]int{}
	for i, data := range files {
		other := ixGet(ix, keyOf(files[(i+1)%len(files)]))
		if other == nil {
			continue
		}
		knobsOf(d).ForceIndex = other
		if err := d.Decode(data, tr, det.Key{Index: uint64(i)}, out); err != nil {
			t.Fatalf("%d: a good file failed for a foreign index: %v", i, err)
		}
		states[d.fast.stats().ixState]++
	}
	t.Logf("index states (0 none, 1 fresh, 2 used, 3 stale): %v", states)
	if states[3] == 0 {
		t.Errorf("no foreign index refused by its header")
	}
	knobsOf(d).ForceIndex = nil
	if err := d.Decode(files[0], tr, det.Key{}, out); err != nil {
		t.Fatalf("after foreign indexes: %v", err)
	}
}

// TestExactCoefCacheExact: decodes that copy coefficients from a CoefCache, or
// store them there, make the bytes a decoder without one makes, epoch after
// epoch, with the index and without it; and the cache fills: by the third
// epoch most MCUs come from it. The SSSE3 packing and the scalar code make
// and read the same form: the first two epochs run with one, the last two
// with the other.
func TestExactCoefCacheExact(t *testing.T) {
	exactTest(t)
	_, files := fastPhotos(t, 0)
	t.Logf("SSSE3 packing available: %v", simdBest() >= 2)
	for _, withIx := range []bool{true, false} {
		t.Run(fmt.Sprintf("index=%v", withIx), func(t *testing.T) {
			cc := codec.NewCoefCache(1 << 30)
			defer cc.Close()
			opts := []Option{WithCoefCache(cc)}
			if withIx {
				opts = append(opts, WithIndex(index.New(1<<30)))
			}
			d, cold := NewDecoder(opts...), NewDecoder()
			defer d.Close()
			defer cold.Close()
			var last codec.CoefStats
			for e := range 4 {
				// SIMD level 5: the best up to VBMI2's compress and expand
				// (else SSSE3's shuffles); 2: SSSE3; 1: SSE2, no SIMD
				// packing; 0: the default (AVX2 on Intel: SSSE3's
				// shuffles). Entries stored at one level are read at the
				// others.
				levels := []int{2, 5, 1, 0} // with an index, the second epoch stores
				if !withIx {
					levels = []int{5, 2, 1, 0}
				}
				knobsOf(d).SIMDMax = levels[e]
				for _, tc := range fastTransforms(t) {
					for i, data := range files {
						a, b := make([]byte, tc.t.SampleBytes()), make([]byte, tc.t.SampleBytes())
						k := det.Key{Seed: 3, Epoch: uint64(e), Index: uint64(i)}
						if err := d.Decode(data, tc.t, k, a); err != nil {
							t.Fatal(err)
						}
						if err := cold.Decode(data, tc.t, k, b); err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(a, b) {
							t.Fatalf("%s file %d epoch %d: the coefficient cache changes the bytes (MAD %.3f)", tc.name, i, e, fastMAD(a, b))
						}
					}
				}
				s := cc.Stats()
				hit := float64(s.MCUsHit-last.MCUsHit) / float64(max(s.MCUsWanted-last.MCUsWanted, 1))
				t.Logf("epoch %d: %d entries, %d bytes, %.0f%% of wanted MCUs from the cache, %d stored", e, s.Entries, s.Bytes, 100*hit, s.MCUsStored-last.MCUsStored)
				if e == 3 && hit < 0.8 {
					t.Fatalf("epoch 3: only %.0f%% of MCUs from the cache", 100*hit)
				}
				last = s
			}
			if last.Entries != len(files) { // the progressive file's: its transcode's
				t.Fatalf("%d entries for %d files (one progressive)", last.Entries, len(files))
			}
		})
	}
}

// TestIndexClear: Clear empties the index and its memory, and it fills
// again.
func TestIndexClear(t *testing.T) {
	_, files := fastPhotos(t, 4)
	ix := warmIndex(t, files, 1<<30)
	ix.Clear()
	if s := ix.Stats(); s.Entries != 0 || s.Bytes != 0 || ixGet(ix, keyOf(files[0])) != nil {
		t.Fatalf("after Clear: %+v", s)
	}
	d := NewDecoder(WithIndex(ix))
	defer d.Close()
	tr := fastTransforms(t)[0].t
	if err := d.Decode(files[0], tr, det.Key{}, make([]byte, tr.SampleBytes())); err != nil {
		t.Fatal(err)
	}
	if s := ix.Stats(); s.Entries != 1 {
		t.Fatalf("after a decode: %+v", s)
	}
}

// TestCoefCacheBudget: a CoefCache never holds more than its budget; files
// past it are refused (decoded without the cache, counted) while those
// admitted keep serving; and the bytes stay what a decoder without a cache
// makes.
func TestCoefCacheBudget(t *testing.T) {
	_, files := fastPhotos(t, 0)
	const budget = 400 << 10
	cc := codec.NewCoefCache(budget)
	defer cc.Close()
	d, cold := NewDecoder(WithCoefCache(cc)), NewDecoder()
	defer d.Close()
	defer cold.Close()
	tr := fastTransforms(t)[0].t
	a, b := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
	var first codec.CoefStats
	for e := range 3 {
		for i, data := range files {
			k := det.Key{Seed: 5, Epoch: uint64(e), Index: uint64(i)}
			if err := d.Decode(data, tr, k, a); err != nil {
				t.Fatal(err)
			}
			if err := cold.Decode(data, tr, k, b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Fatalf("file %d epoch %d: bytes differ", i, e)
			}
			if s := cc.Stats(); s.Bytes > budget {
				t.Fatalf("file %d epoch %d: %d bytes held, budget %d", i, e, s.Bytes, budget)
			}
		}
		if e == 0 {
			first = cc.Stats()
		}
	}
	s := cc.Stats()
	t.Logf("%+v", s)
	if s.Entries == 0 || s.Entries >= len(files)-1 || s.Refused == 0 {
		t.Fatalf("a %d-byte budget over %d files: %d admitted, %d refusals", budget, len(files), s.Entries, s.Refused)
	}
	if s.Entries != first.Entries {
		t.Fatalf("entries changed after the first epoch: %d, then %d (none is dropped for another)", first.Entries, s.Entries)
	}
	if s.MCUsHit == 0 {
		t.Fatalf("the files admitted served nothing: %+v", s)
	}
	cc.Clear()
	if s := cc.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("after Clear: %+v", s)
	}
}
