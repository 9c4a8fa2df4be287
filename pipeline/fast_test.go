//go:build cgo

package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/internal/jpegenc"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// fastPhotoDir holds the repository's small set of real photos (ImageFolder,
// 300-500 px JPEGs: 4:2:0 baseline and a few 4:4:4, 4:2:2, gray,
// progressive and restart-marker files; see its NOTICE.md), relative to
// this package's directory. It is committed, so the tests that use it run
// in every clone.
const fastPhotoDir = "../testdata/photos"

// benchPhotoDir is the larger shared benchmark set (1,000 photos), which a
// clone of the repository alone does not have; benchmarks use it where it is
// and fastPhotoDir otherwise.
const benchPhotoDir = "../../shared/data/photos/train"

// fastPhotos returns n photos of fastPhotoDir spread evenly over the sorted
// file list (all of them when n <= 0). The set is part of the repository:
// its absence fails the test.
func fastPhotos(tb testing.TB, n int) (names []string, files [][]byte) {
	tb.Helper()
	return photosIn(tb, fastPhotoDir, n)
}

// benchPhotos is fastPhotos over benchPhotoDir where it exists.
func benchPhotos(tb testing.TB, n int) (dir string, names []string, files [][]byte) {
	tb.Helper()
	dir = fastPhotoDir
	if st, err := os.Stat(benchPhotoDir); err == nil && st.IsDir() {
		dir = benchPhotoDir
	} else {
		tb.Logf("no shared photo set at %s: benchmarking the %s set", benchPhotoDir, fastPhotoDir)
	}
	names, files = photosIn(tb, dir, n)
	return dir, names, files
}

func photosIn(tb testing.TB, dir string, n int) (names []string, files [][]byte) {
	tb.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*", "*.jpg"))
	sort.Strings(paths)
	if len(paths) == 0 {
		tb.Fatalf("no photos under %s", dir)
	}
	if n <= 0 || n > len(paths) {
		n = len(paths)
	}
	for i := range n {
		p := paths[i*len(paths)/n]
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		names = append(names, filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p))
		files = append(files, b)
	}
	return names, files
}

// fastSynthPixels is a test pattern: color sinusoids, hard edges a few
// pixels apart and noise, so that resampling and chroma differences show.
func fastSynthPixels(w, h, nc int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	fx, fy := 0.05+0.2*r.Float64(), 0.05+0.2*r.Float64()
	pix := make([]byte, w*h*nc)
	for y := range h {
		for x := range w {
			for c := range nc {
				v := 128 + 80*math.Sin(float64(x)*fx+float64(c))*math.Cos(float64(y)*fy-float64(c))
				if (x/7+y/5)%4 == 0 {
					v = 255 - v // hard edges
				}
				v += 12 * r.NormFloat64()
				pix[(y*w+x)*nc+c] = byte(min(max(v, 0), 255))
			}
		}
	}
	return pix
}

// encodeTurbo encodes pixels with libjpeg through the test-only jpegenc
// package (so no compressor is linked into the stoker binary): luma sampling
// hs x vs, optionally progressive, with restart markers every restartRows
// MCU rows, optionally in the RGB color space. Tests use it for the files
// that image/jpeg cannot write.
func encodeTurbo(pix []byte, w, h, nc, quality, hs, vs int, progressive bool, restartRows int, rgb bool) ([]byte, error) {
	return jpegenc.Encode(pix, w, h, nc, jpegenc.Options{Quality: quality, HS: hs, VS: vs, Progressive: progressive, RestartRows: restartRows, RGB: rgb})
}

type fastSynthJPEG struct {
	name string
	data []byte
}

// fastSynthJPEGs returns generated JPEGs: image/jpeg's 4:2:0 and gray, and
// libjpeg's (through encodeTurbo, in-process: no cjpeg needed) 4:4:4,
// 4:2:2, 4:2:0, 4:4:0, 4:1:1, progressive, restart markers, RGB color space,
// gray progressive and gray with a 2x2 declared sampling, at odd and tiny
// sizes (down to 1x1).
func fastSynthJPEGs(tb testing.TB) []fastSynthJPEG {
	tb.Helper()
	var out []fastSynthJPEG
	for i, sz := range [][2]int{{333, 251}, {37, 53}, {17, 9}, {256, 256}, {501, 97}, {1, 1}, {3, 2}} {
		w, h := sz[0], sz[1]
		rgb := fastSynthPixels(w, h, 3, uint64(i))
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		gray := image.NewGray(image.Rect(0, 0, w, h))
		for p := range w * h {
			img.Pix[4*p], img.Pix[4*p+1], img.Pix[4*p+2], img.Pix[4*p+3] = rgb[3*p], rgb[3*p+1], rgb[3*p+2], 255
			gray.Pix[p] = rgb[3*p+1]
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
			tb.Fatal(err)
		}
		out = append(out, fastSynthJPEG{fmt.Sprintf("go-420-%dx%d", w, h), bytes.Clone(b.Bytes())})
		b.Reset()
		if err := jpeg.Encode(&b, gray, &jpeg.Options{Quality: 90}); err != nil {
			tb.Fatal(err)
		}
		out = append(out, fastSynthJPEG{fmt.Sprintf("go-gray-%dx%d", w, h), bytes.Clone(b.Bytes())})
		for _, c := range []struct {
			name        string
			nc, hs, vs  int
			prog        bool
			restartRows int
			rgb         bool
		}{
			{"444", 3, 1, 1, false, 0, false},
			{"422", 3, 2, 1, false, 0, false},
			{"420", 3, 2, 2, false, 0, false},
			{"440", 3, 1, 2, false, 0, false},
			{"411", 3, 4, 1, false, 0, false},
			{"420-prog", 3, 2, 2, true, 0, false},
			{"444-prog", 3, 1, 1, true, 0, false},
			{"422-restart", 3, 2, 1, false, 1, false},
			{"rgb", 3, 1, 1, false, 0, true},
			{"gray-prog", 1, 1, 1, true, 0, false},
			{"gray-2x2", 1, 2, 2, false, 0, false},
		} {
			pix := rgb
			if c.nc == 1 {
				pix = gray.Pix
			}
			data, err := encodeTurbo(pix, w, h, c.nc, 90, c.hs, c.vs, c.prog, c.restartRows, c.rgb)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, fastSynthJPEG{fmt.Sprintf("turbo-%s-%dx%d", c.name, w, h), data})
		}
	}
	return out
}

func fastMAD(a, b []byte) float64 {
	var s int
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		s += d
	}
	return float64(s) / float64(len(a))
}

func fastTransforms(tb testing.TB) []struct {
	name string
	t    *transform.Transform
} {
	tb.Helper()
	train, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		tb.Fatal(err)
	}
	eval, err := transform.ParseTransform("imagenet-eval", transform.CHW)
	if err != nil {
		tb.Fatal(err)
	}
	odd, err := transform.NewTransform(transform.HWC,
		ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{97, 131}},
		ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5})
	if err != nil {
		tb.Fatal(err)
	}
	return []struct {
		name string
		t    *transform.Transform
	}{{"imagenet-train", train}, {"imagenet-eval", eval}, {"rrc97x131-flip-hwc", odd}}
}

// Mean absolute difference bounds, fast path vs reference, per image, in
// 8-bit levels. Both paths resample with the same filter and both round the
// first pass to 8 bits (as PIL does). The fast path upsamples chroma as
// libjpeg does by default ("fancy", triangle), which is what PIL and so
// torchvision get (stoker matches torchvision's Resize+CenterCrop within
// 0.02 levels on the photos: python/tests); image/jpeg, under the reference
// path, replicates chroma pixels, which differs at color edges: up to ~3 on
// photos and ~7 on the synthetic images (noise over hard color edges a few
// pixels apart, the worst case).
//
// With replication on both sides (merged, a knob) what is left is IDCT
// rounding (libjpeg's islow vs image/jpeg's, +-1 on some pixels) and
// fixed-point vs float coefficients: observed at most ~0.4.
//
// Decoding at a DCT scale replaces part of the triangle filter's low-pass by
// the scaled IDCT's, a different filter: observed up to ~2.5 on photos, ~7
// on the synthetic images.
const (
	fastMADMerged      = 1.0
	fastMADScaledPhoto = 3.5
	fastMADScaledSynth = 9.0
	fastMADFancyPhoto  = 3.5
	fastMADFancySynth  = 9.0
)

// TestExactFastMatchesReference decodes photos and generated JPEGs through both
// paths with the same keys and bounds their per-image difference.
func TestExactFastMatchesReference(t *testing.T) {
	exactTest(t)
	n := 48
	if testing.Short() {
		n = 12
	}
	names, files := fastPhotos(t, n)
	photos := len(files)
	for _, s := range fastSynthJPEGs(t) {
		names, files = append(names, s.name), append(files, s.data)
	}
	ref := NewDecoder(WithReference(true))
	for _, tc := range fastTransforms(t) {
		// Reference outputs, shared by all variants.
		refs := make([][]byte, len(files))
		for i, data := range files {
			refs[i] = make([]byte, tc.t.SampleBytes())
			if err := ref.Decode(data, tc.t, det.Key{Seed: 1, Index: uint64(i)}, refs[i]); err != nil {
				t.Fatalf("%s: ref %s: %v", tc.name, names[i], err)
			}
		}
		for _, v := range []struct {
			name   string
			s      DCTScaling
			merged bool
		}{{"pow2", ScalePow2, false}, {"any", ScaleAny, false}, {"off", ScaleOff, false}, {"pow2-merged", ScalePow2, true}, {"off-merged", ScaleOff, true}} {
			t.Run(tc.name+"/"+v.name, func(t *testing.T) {
				d := NewDecoder(WithDCTScaling(v.s))
				defer d.Close()
				knobsOf(d).Merged = v.merged
				// The DCT scalings apply to transforms that ask for them.
				tr := tc.t.WithDecode(transform.DecodeFast)
				got := make([]byte, tc.t.SampleBytes())
				var maxMAD, sumMAD [2]float64 // photos, synthetic
				var worst [2]string
				scaled := 0
				for i, data := range files {
					if err := d.Decode(data, tr, det.Key{Seed: 1, Index: uint64(i)}, got); err != nil {
						t.Fatalf("fast %s: %v", names[i], err)
					}
					synth := i >= photos
					g := 0
					if synth {
						g = 1
					}
					bound := fastMADMerged
					if st := d.fast.stats(); st.scaleM != 8 {
						scaled++
						bound = max(bound, map[bool]float64{false: fastMADScaledPhoto, true: fastMADScaledSynth}[synth])
					}
					if !v.merged {
						bound = max(bound, map[bool]float64{false: fastMADFancyPhoto, true: fastMADFancySynth}[synth])
					}
					m := fastMAD(got, refs[i])
					sumMAD[g] += m
					if m > maxMAD[g] {
						maxMAD[g], worst[g] = m, names[i]
					}
					if m > bound {
						t.Errorf("%s: MAD %.3f over the bound %.1f", names[i], m, bound)
					}
				}
				t.Logf("%d photos: MAD mean %.3f max %.3f (%s); %d synthetic: mean %.3f max %.3f (%s); %d DCT-scaled",
					photos, sumMAD[0]/float64(photos), maxMAD[0], worst[0],
					len(files)-photos, sumMAD[1]/float64(len(files)-photos), maxMAD[1], worst[1], scaled)
			})
		}
	}
}

// TestExactFastRegionExact checks the region decode (crop to the filter's
// columns, skip to its rows, stop after them) against decoding whole rows
// from the top: the output must be the same bytes, for every subsampling,
// progressive files, DCT scales, both upsamplers, and crops touching every
// edge.
func TestExactFastRegionExact(t *testing.T) {
	exactTest(t)
	imgs := fastSynthAndPhotos(t, 4)
	for _, knobs := range []struct {
		name          string
		merged, ifast bool
		scaling       DCTScaling
	}{
		{"merged-any", true, false, ScaleAny},
		{"merged-pow2", true, false, ScalePow2},
		{"fancy-any", false, false, ScaleAny},
		{"fancy-ifast-off", false, true, ScaleOff},
	} {
		t.Run(knobs.name, func(t *testing.T) {
			region := NewDecoder(WithDCTScaling(knobs.scaling))
			whole := NewDecoder(WithDCTScaling(knobs.scaling))
			defer region.Close()
			defer whole.Close()
			for _, d := range []*Decoder{region, whole} {
				knobsOf(d).Merged, knobsOf(d).IFast = knobs.merged, knobs.ifast
			}
			knobsOf(whole).NoRegion = true
			checked := 0
			for _, img := range imgs {
				hd, err := parseHeader(img.data)
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range fastEdgePlans(hd.w, hd.h) {
					layout := transform.Layout(i / 2 % 2) // flip alternates with i % 2
					a := make([]byte, 3*p.OutW*p.OutH)
					b := make([]byte, len(a))
					if err := region.decodeFast(img.data, &hd, &p, layout, a); err != nil {
						t.Fatalf("%s %+v: %v", img.name, p, err)
					}
					st := region.fast.stats()
					if err := whole.decodeFast(img.data, &hd, &p, layout, b); err != nil {
						t.Fatalf("%s %+v: whole: %v", img.name, p, err)
					}
					if !bytes.Equal(a, b) {
						t.Errorf("%s crop %d,%d %dx%d -> %dx%d flip=%v scale %d/8 %s: region decode differs from whole-row decode (MAD %.3f)",
							img.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, p.Flip, st.scaleM, layout, fastMAD(a, b))
					}
					checked++
				}
			}
			t.Logf("%d region decodes identical to whole-row decodes", checked)
		})
	}
}

// fastSynthAndPhotos is fastSynthJPEGs and n photos, named photo0 ... .
func fastSynthAndPhotos(t *testing.T, n int) []fastSynthJPEG {
	t.Helper()
	imgs := fastSynthJPEGs(t)
	_, photos := fastPhotos(t, n)
	for i, p := range photos {
		imgs = append(imgs, fastSynthJPEG{fmt.Sprintf("photo%d", i), p})
	}
	return imgs
}

// TestExactFastSIMDSame: the AVX-512, AVX2, SSSE3, SSE2 and scalar resamplers
// give the same bytes (other architectures run the scalar code).
func TestExactFastSIMDSame(t *testing.T) {
	exactTest(t)
	imgs := fastSynthAndPhotos(t, 4)
	levels := []int{0, 5, 4, 3, 2, 1, -1} // the default, the best the CPU has (at most VBMI), at most AVX-512 (without VBMI), AVX2, SSSE3, SSE2, none
	decs := make([]*Decoder, len(levels))
	for i, l := range levels {
		decs[i] = NewDecoder()
		knobsOf(decs[i]).SIMDMax = l
		defer decs[i].Close()
	}
	n := 0
	used := map[int]bool{}
	for _, img := range imgs {
		hd, err := parseHeader(img.data)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range fastEdgePlans(hd.w, hd.h) {
			layout := transform.Layout(i / 2 % 2)
			var outs [][]byte
			for _, d := range decs {
				out := make([]byte, 3*p.OutW*p.OutH)
				if err := d.decodeFast(img.data, &hd, &p, layout, out); err != nil {
					t.Fatal(err)
				}
				used[d.fast.stats().simd] = true
				outs = append(outs, out)
			}
			for k := 1; k < len(outs); k++ {
				if !bytes.Equal(outs[0], outs[k]) {
					t.Errorf("%s crop %d,%d %dx%d -> %dx%d %s: SIMD level %d and %d differ (MAD %.3f)", img.name, p.CX, p.CY, p.CW, p.CH, p.OutW, p.OutH, layout, levels[0], levels[k], fastMAD(outs[0], outs[k]))
				}
			}
			n++
		}
	}
	t.Logf("%d decodes identical at every SIMD level (levels run: %v; 1 is SSE2, 2 SSSE3, 3 AVX2, 4 AVX-512, 5 AVX-512 VBMI)", n, used)
	// Every x86-64 has SSE2, and all but the oldest SSSE3, so the SIMD code
	// must have run there; otherwise this test compares the scalar code
	// with itself.
	if runtime.GOARCH == "amd64" && !used[1] {
		t.Errorf("SSE2 code never ran on amd64 (levels run: %v)", used)
	}
	if simdBest() >= 2 && !used[2] {
		t.Errorf("SSSE3 code never ran on a CPU that has it (levels run: %v)", used)
	}
	if simdBest() >= 3 && !used[3] {
		t.Errorf("AVX2 code never ran on a CPU that has it (levels run: %v)", used)
	}
	if simdBest() >= 4 && !used[4] {
		t.Errorf("AVX-512 code never ran on a CPU that has it (levels run: %v)", used)
	}
	if simdBest() >= 5 && !used[5] {
		t.Errorf("AVX-512 VBMI code never ran on a CPU that has it (levels run: %v)", used)
	}
	if !used[0] {
		t.Errorf("scalar code never ran (levels run: %v)", used)
	}
}

// TestExactFastRowsSkewed: the rows libjpeg-turbo decodes into are never 16-byte
// aligned. Its SIMD color conversion stores an aligned row with
// non-temporal stores, which send it to memory just before the horizontal
// pass reads it: the same bytes, about 12% slower (BENCHMARKS.md). Nothing
// but this test would notice the skew being lost.
func TestExactFastRowsSkewed(t *testing.T) {
	exactTest(t)
	imgs := fastSynthAndPhotos(t, 4)
	d := NewDecoder()
	defer d.Close()
	n := 0
	for _, img := range imgs {
		hd, err := parseHeader(img.data)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range fastEdgePlans(hd.w, hd.h) {
			out := make([]byte, 3*p.OutW*p.OutH)
			if err := d.decodeFast(img.data, &hd, &p, transform.Layout(i/2%2), out); err != nil {
				t.Fatal(err)
			}
			if s := d.fast.stats().rowSkew; s%16 == 0 {
				t.Fatalf("%s plan %d: decoded rows start %d bytes past a 64-byte boundary: libjpeg-turbo would store them non-temporally", img.name, i, s)
			}
			n++
		}
	}
	t.Logf("%d decodes, rows skewed in every one", n)
}

// TestExactFastSIMDSamePhotos: the SIMD (SSSE3 where the CPU has it) and scalar
// resamplers give the same bytes on the plans training and evaluation make,
// over many photos, at every DCT scaling mode (so at full size, 1/2 and the
// other eighths ScaleAny picks), in both layouts. Other architectures run
// the scalar code: this is what keeps their batches the same bytes as
// x86-64's.
func TestExactFastSIMDSamePhotos(t *testing.T) {
	exactTest(t)
	names, photos := fastPhotos(t, 32)
	trs := fastTransforms(t)
	n := 0
	for _, sc := range []struct {
		name    string
		scaling DCTScaling
	}{{"pow2", ScalePow2}, {"any", ScaleAny}, {"off", ScaleOff}} {
		simd, scalar := NewDecoder(WithDCTScaling(sc.scaling)), NewDecoder(WithDCTScaling(sc.scaling))
		knobsOf(scalar).SIMDMax = -1
		scales := map[int]bool{}
		for i, data := range photos {
			for j, tc := range trs {
				for _, layout := range []transform.Layout{transform.CHW, transform.HWC} {
					tr, err := transform.NewTransform(layout, tc.t.Ops()...)
					if err != nil {
						t.Fatal(err)
					}
					tr = tr.WithDecode(transform.DecodeFast) // the scalings apply to DecodeFast alone
					k := det.Key{Seed: 11, Epoch: uint64(j), Index: uint64(i)}
					a, b := make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
					if err := simd.Decode(data, tr, k, a); err != nil {
						t.Fatalf("%s: %v", names[i], err)
					}
					if err := scalar.Decode(data, tr, k, b); err != nil {
						t.Fatalf("%s: %v", names[i], err)
					}
					if st := scalar.fast.stats(); st.simd != 0 {
						t.Fatalf("scalar decoder used SIMD level %d", st.simd)
					}
					scales[simd.fast.stats().scaleM] = true
					if !bytes.Equal(a, b) {
						t.Errorf("%s %s %s scaling %s: SIMD and scalar differ (MAD %.3f)", names[i], tc.name, layout, sc.name, fastMAD(a, b))
					}
					n++
				}
			}
		}
		simd.Close()
		scalar.Close()
		t.Logf("scaling %s: DCT scales used (eighths) %v", sc.name, scales)
	}
	t.Logf("%d samples identical with and without SIMD", n)
}

// fastEdgePlans returns crop-then-resize plans whose crops touch each edge and
// corner, span the whole image, or are one pixel thin, with outputs that
// copy, upscale, downscale a little and downscale past the DCT scales.
func fastEdgePlans(w, h int) []transform.SamplePlan {
	var ps []transform.SamplePlan
	add := func(cx, cy, cw, ch int) {
		cx, cy = min(max(cx, 0), w-1), min(max(cy, 0), h-1)
		cw, ch = max(1, min(cw, w-cx)), max(1, min(ch, h-cy))
		for i, o := range [][2]int{{cw, ch}, {max(1, cw*5/2), max(1, ch*3/2)}, {max(1, cw*2/3), max(1, ch*3/4)}, {max(1, cw/9), max(1, ch/9)}, {24, 24}} {
			ps = append(ps, transform.SamplePlan{Geom: transform.CropResize, SrcW: w, SrcH: h, CX: cx, CY: cy, CW: cw, CH: ch, OutW: o[0], OutH: o[1], Flip: i%2 == 1, Antialias: true})
		}
	}
	hw, hh := max(1, w/2), max(1, h/2)
	add(0, 0, w, h)         // everything
	add(0, 0, hw, hh)       // top left
	add(w-hw, 0, hw, hh)    // top right
	add(0, h-hh, hw, hh)    // bottom left
	add(w-hw, h-hh, hw, hh) // bottom right
	add(w/3, h/3, hw, hh)   // middle, unaligned
	add(w-1, 0, 1, h)       // last column
	add(0, 0, 1, h)         // first column (a one-chroma-sample-wide region)
	add(0, h-1, w, 1)       // last row
	add(w/2+1, h/2+3, 3, 5) // a few pixels, unaligned
	add(17%w, 33%h, w, h)   // to the bottom right edge from an odd offset
	// Resize-then-crop plans (the filter reaches past the crop).
	for _, size := range []int{max(1, min(w, h)/2), 256} {
		rw, rh := transform.ResizedSize(w, h, [2]int{size, 0})
		cw, ch := min(rw, 224), min(rh, 224)
		ps = append(ps, transform.SamplePlan{Geom: transform.ResizeCrop, SrcW: w, SrcH: h, RW: rw, RH: rh, Antialias: true,
			CX: transform.CenterOffset(rw, cw), CY: transform.CenterOffset(rh, ch), CW: cw, CH: ch, OutW: cw, OutH: ch})
	}
	return ps
}

// TestFastDeterministic: the same key gives the same bytes from two
// Decoders and from Decoders on several goroutines.
func TestFastDeterministic(t *testing.T) {
	_, files := fastPhotos(t, 24)
	tr := fastTransforms(t)[0].t
	serial := make([][]byte, len(files))
	d1, d2 := NewDecoder(), NewDecoder()
	defer d1.Close()
	defer d2.Close()
	for i, data := range files {
		k := det.Key{Seed: 42, Epoch: 3, Index: uint64(i)}
		serial[i] = make([]byte, tr.SampleBytes())
		other := make([]byte, tr.SampleBytes())
		if err := d1.Decode(data, tr, k, serial[i]); err != nil {
			t.Fatal(err)
		}
		if err := d2.Decode(data, tr, k, other); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(serial[i], other) {
			t.Fatalf("photo %d: two decoders disagree", i)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := NewDecoder()
			defer d.Close()
			got := make([]byte, tr.SampleBytes())
			for n := range len(files) {
				i := (n + g*7) % len(files) // each goroutine in its own order
				if err := d.Decode(files[i], tr, det.Key{Seed: 42, Epoch: 3, Index: uint64(i)}, got); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, serial[i]) {
					errs <- fmt.Errorf("goroutine %d, photo %d: differs from the serial decode", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestFastZeroAllocs: a JPEG decode on the fast path allocates nothing in
// Go once the Decoder's scratch exists.
func TestFastZeroAllocs(t *testing.T) {
	allocTest(t)
	_, files := fastPhotos(t, 8)
	for _, tc := range fastTransforms(t) {
		d := NewDecoder()
		out := make([]byte, tc.t.SampleBytes())
		i := 0
		allocs := testing.AllocsPerRun(50, func() {
			if err := d.Decode(files[i%len(files)], tc.t, det.Key{Index: uint64(i)}, out); err != nil {
				t.Fatal(err)
			}
			i++
		})
		d.Close()
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per decode, want 0", tc.name, allocs)
		}
	}
}

// TestFastErrors: broken JPEGs are errors wrapping the right sentinel, with
// libjpeg's message, and the Decoder keeps working after them.
func TestFastErrors(t *testing.T) {
	_, files := fastPhotos(t, 3)
	good := files[0]
	tr := fastTransforms(t)[0].t
	d := NewDecoder()
	defer d.Close()
	out := make([]byte, tr.SampleBytes())
	sofEnd := fastEndOfSOF(t, good)
	prog, err := encodeTurbo(fastSynthPixels(64, 48, 3, 1), 64, 48, 3, 90, 2, 2, true, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	// libjpeg's own Huffman decoder, for the garbage-scan cases.
	lib := NewDecoder()
	defer lib.Close()
	knobsOf(lib).LibHuff = true
	type errCase struct {
		name string
		data []byte
		d    *Decoder
		want error
		msg  string // a substring the error must contain, when set
		// orNil: decoding without error is also an accepted outcome.
		orNil bool
	}
	cases := []errCase{
		{name: "truncated at 30%", data: good[:len(good)*3/10], d: d, want: errs.Corrupt, msg: "truncated"},
		{name: "truncated at 90%", data: good[:len(good)*9/10], d: d, want: errs.Corrupt, msg: "truncated"},
		{name: "progressive truncated at 50%", data: prog[:len(prog)/2], d: d, want: errs.Corrupt, msg: "truncated"},
		{name: "progressive over the scan cap", data: prog, d: NewDecoder(WithMaxScans(3)), want: errs.TooLarge, msg: "scans"},
	}
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 1))
		junk := make([]byte, 1000+r.IntN(20000))
		for i := range junk {
			junk[i] = byte(r.Uint32())
		}
		cases = append(cases, errCase{name: fmt.Sprintf("garbage after SOF #%d", seed), data: append(bytes.Clone(good[:sofEnd]), junk...), d: d, want: errs.Corrupt})
		// Garbage in place of the entropy-coded data, with a proper EOI.
		sos := bytes.Index(good, []byte{0xFF, 0xDA})
		scan := append(bytes.Clone(good[:sos+14]), junk...)
		for i := sos + 14; i < len(scan); i++ {
			if scan[i] == 0xFF {
				scan[i] = 0xFE // no markers inside: only bad Huffman codes
			}
		}
		scan = append(scan, 0xFF, 0xD9)
		// huff.c (the default) refuses entropy-coded data that is not a
		// valid coding of the crop's rows (a run past a block's end, a code
		// no table has, data that ends before the last row needed): never
		// a silent success with made-up pixels. libjpeg's own decoder
		// skips over some of that, so garbage it decodes without a warning
		// is accepted from it; a crash or another sentinel is not.
		cases = append(cases,
			errCase{name: fmt.Sprintf("garbage scan data #%d", seed), data: scan, d: d, want: errs.Corrupt, msg: "entropy-coded"},
			errCase{name: fmt.Sprintf("garbage scan data, libjpeg huffman #%d", seed), data: scan, d: lib, want: errs.Corrupt, orNil: true})
	}
	for _, c := range cases {
		err := c.d.Decode(c.data, tr, det.Key{Index: 5}, out)
		switch {
		case err == nil && c.orNil:
			t.Logf("%s: decoded without error (accepted)", c.name)
		case !errors.Is(err, c.want):
			t.Errorf("%s: got %v, want an error wrapping %v", c.name, err, c.want)
		case strings.Contains(err.Error(), "panicked"):
			t.Errorf("%s: %v", c.name, err)
		case !strings.Contains(err.Error(), c.msg):
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.msg)
		default:
			t.Logf("%s: %v", c.name, err)
		}
	}
	if used := d.fast.stats().huff; !used {
		t.Errorf("the last garbage-scan decode did not go through huff.c: the cases test libjpeg's decoder twice")
	}
	// Cut short but ending in an EOI marker: libjpeg itself must notice when
	// the rows the crop needs are missing.
	hd, err := parseHeader(good)
	if err != nil {
		t.Fatal(err)
	}
	whole := transform.SamplePlan{Geom: transform.CropResize, SrcW: hd.w, SrcH: hd.h, CW: hd.w, CH: hd.h, OutW: 64, OutH: 64, Antialias: true}
	cut := append(bytes.Clone(good[:len(good)*3/10]), 0xFF, 0xD9)
	if err := d.decodeFast(cut, &hd, &whole, transform.CHW, make([]byte, 3*64*64)); !errors.Is(err, errs.Corrupt) {
		t.Errorf("truncated with an EOI: got %v, want an error wrapping %v", err, errs.Corrupt)
	} else {
		t.Logf("truncated with an EOI: %v", err)
	}
	// Still works.
	if err := d.Decode(good, tr, det.Key{Index: 5}, out); err != nil {
		t.Fatalf("decode after errors: %v", err)
	}
}

// fastEndOfSOF returns the offset just past a JPEG's frame header segment.
func fastEndOfSOF(t *testing.T, data []byte) int {
	t.Helper()
	for p := 2; p+4 <= len(data); {
		if data[p] != 0xFF {
			t.Fatalf("no marker at %d", p)
		}
		m := data[p+1]
		n := int(data[p+2])<<8 | int(data[p+3])
		if m >= 0xC0 && m <= 0xC2 {
			return p + 2 + n
		}
		p += 2 + n
	}
	t.Fatal("no SOF")
	return 0
}

// TestFastDCTScaleChoice checks which DCT scale each mode picks.
func TestFastDCTScaleChoice(t *testing.T) {
	data, err := encodeTurbo(fastSynthPixels(800, 640, 3, 3), 800, 640, 3, 85, 2, 2, false, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	hd, err := parseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		crop  [2]int // w, h of a centered crop to 100x100
		s     DCTScaling
		wantM int
	}{
		{[2]int{800, 640}, ScalePow2, 2}, // 1/8 would leave 80 rows < 100
		{[2]int{199, 400}, ScalePow2, 8},
		{[2]int{200, 400}, ScalePow2, 4},
		{[2]int{450, 400}, ScalePow2, 2},
		{[2]int{250, 300}, ScaleAny, 4},
		{[2]int{130, 300}, ScaleAny, 7},
		{[2]int{800, 640}, ScaleAny, 2},
		{[2]int{800, 640}, ScaleOff, 8},
	} {
		d := NewDecoder(WithDCTScaling(c.s))
		cw, ch := c.crop[0], c.crop[1]
		p := transform.SamplePlan{Geom: transform.CropResize, SrcW: hd.w, SrcH: hd.h, CX: (hd.w - cw) / 2, CY: (hd.h - ch) / 2, CW: cw, CH: ch, OutW: 100, OutH: 100, Antialias: true}
		if err := d.decodeFast(data, &hd, &p, transform.CHW, make([]byte, 3*100*100)); err != nil {
			t.Fatal(err)
		}
		if st := d.fast.stats(); st.scaleM != c.wantM {
			t.Errorf("crop %v mode %d: scale %d/8, want %d/8", c.crop, c.s, st.scaleM, c.wantM)
		}
		d.Close()
	}
}

// TestFastDecodeMode: a transform decodes at full scale unless it asks for
// DecodeFast, whatever the Decoder's DCT scaling; with DecodeFast the same
// samples take a DCT scale where the crop is at least twice the output
// (dino-local's 96 px crops of the photos), and the draws are the same.
// (The Python parity test test_parity_geometry_exact.py checks the default's
// pixels against torchvision's on photos of 1080p and more.)
func TestFastDecodeMode(t *testing.T) {
	names, photos := fastPhotos(t, 8)
	for _, preset := range []string{"dino-local", "imagenet-eval", "dinov2"} {
		exact, err := transform.ParseTransform(preset, transform.CHW)
		if err != nil {
			t.Fatal(err)
		}
		if exact.DecodeMode() != transform.DecodeExact {
			t.Fatalf("%s: a new transform decodes %s, want exact", preset, exact.DecodeMode())
		}
		fast := exact.WithDecode(transform.DecodeFast)
		if exact.DecodeMode() != transform.DecodeExact || fast.DecodeMode() != transform.DecodeFast {
			t.Fatalf("WithDecode changed its receiver or did not take: %s, %s", exact.DecodeMode(), fast.DecodeMode())
		}
		for _, s := range []DCTScaling{ScalePow2, ScaleAny} {
			d := NewDecoder(WithDCTScaling(s))
			a, b := make([]byte, exact.SampleBytes()), make([]byte, exact.SampleBytes())
			scaled := 0
			for i, data := range photos {
				k := det.Key{Seed: 3, Index: uint64(i)}
				if err := d.Decode(data, exact, k, a); err != nil {
					t.Fatal(err)
				}
				if m := d.fast.stats().scaleM; m != 8 {
					t.Errorf("%s %s: decode exact took a DCT scale of %d/8", preset, names[i], m)
				}
				ta := d.AppendTrace(nil)
				if err := d.Decode(data, fast, k, b); err != nil {
					t.Fatal(err)
				}
				if d.fast.stats().scaleM != 8 {
					scaled++
					if bytes.Equal(a, b) {
						t.Errorf("%s %s: DCT-scaled and full-scale decodes gave the same bytes", preset, names[i])
					}
				}
				if tb := d.AppendTrace(nil); !bytes.Equal(ta, tb) {
					t.Errorf("%s %s: the decode mode changed the draws:\n%s\n%s", preset, names[i], ta, tb)
				}
			}
			// dinov2's global views need more than half of these small
			// photos: its decode of every view's union stays at full scale.
			if preset == "dino-local" && scaled == 0 {
				t.Errorf("%s, scaling %d: no photo was DCT-scaled with DecodeFast", preset, s)
			}
			d.Close()
		}
	}
}
