//go:build cgo

package kernels

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestExactBlurCgoSameBytes checks the C blur (kernels.c) against its Go twin,
// at every SIMD level this CPU has (scalar, SSE2, AVX2, AVX-512, whose
// rows end in the AVX2 pass): the same bytes on sizes around the vector
// widths, thin images, and kernels narrower and
// wider than the image.
func TestExactBlurCgoSameBytes(t *testing.T) {
	exactTest(t)
	r := rand.New(rand.NewPCG(35, 1))
	sizes := [][2]int{{1, 1}, {1, 9}, {9, 1}, {7, 3}, {8, 8}, {15, 4}, {16, 16}, {17, 5}, {31, 2}, {32, 7},
		{33, 33}, {47, 13}, {49, 5}, {63, 3}, {64, 1}, {96, 96}, {97, 131}, {224, 224}}
	kernels := [][2]int{{1, 3}, {3, 3}, {5, 9}, {9, 9}, {23, 23}, {23, 1}, {41, 7}, {101, 3}}
	sigmas := [][2]float64{{0.1, 0.1}, {1, 1}, {2.5, 0.7}, {5, 5}, {40, 1e6}}
	n := 0
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		src := noiseImage(w, h, uint64(n))
		for i := range src {
			if r.IntN(7) == 0 { // extremes, for the sums' bounds
				src[i] = byte(255 * r.IntN(2))
			}
		}
		for _, k := range kernels {
			for _, sg := range sigmas {
				n++
				var s Scratch
				var bx, by blurTaps
				wts := make([]int32, k[0]/2+1+k[1]/2+1)
				blurWeights(wts[:k[0]/2+1], sg[0], &bx)
				blurWeights(wts[k[0]/2+1:], sg[1], &by)
				want := bytes.Clone(src)
				blurPlanesGo(Planes{Pix: want, W: w, H: h}, &bx, &by, &s)
				for simd := 0; simd <= kernelsSIMD; simd++ {
					got := bytes.Clone(src)
					blurPlanesC(Planes{Pix: got, W: w, H: h}, &bx, &by, &s, simd)
					if i := firstDiff(got, want); i >= 0 {
						t.Errorf("%dx%d %v %v, SIMD level %d: byte %d is %d, Go's is %d", w, h, k, sg,
							simd, i, got[i], want[i])
					}
				}
			}
		}
	}
	t.Logf("%d blurs compared at SIMD levels 0..%d", n, kernelsSIMD)
}

// everyColour is the 2**24 colours as three planes (r, g, b the index's
// bytes), 4096x4096.
func everyColour() []byte {
	const n = 1 << 24
	pix := make([]byte, 3*n)
	for c := range n {
		pix[c], pix[n+c], pix[2*n+c] = byte(c>>16), byte(c>>8), byte(c)
	}
	return pix
}

// TestExactColourKernelsCgoSameBytes checks the colour kernels in C with AVX2
// (kernels_color.c) against their Go versions: on every colour for those
// that read a pixel (gray, and saturation and hue at some arguments; a
// million colours at others), on every byte for those that read one byte,
// and on images of many sizes for sharpness.
func TestExactColourKernelsCgoSameBytes(t *testing.T) {
	exactTest(t)
	if kernelsSIMD < 2 {
		t.Skip("this CPU has no AVX2: the colour kernels run in Go here, and there is no C version to compare")
	}
	// cmp runs c and g on copies of src (three Planes) and compares.
	cmp := func(what string, src []byte, c, g func(r, g, b []byte)) {
		t.Helper()
		n := len(src) / 3
		got, want := bytes.Clone(src), bytes.Clone(src)
		c(got[:n], got[n:2*n], got[2*n:])
		g(want[:n], want[n:2*n], want[2*n:])
		if i := firstDiff(got, want); i >= 0 {
			t.Errorf("%s: pixel %d (%d, %d, %d), plane %d: C %d, Go %d", what, i%n, src[i%n], src[n+i%n],
				src[2*n+i%n], i/n, got[i], want[i])
		}
	}
	all := everyColour()
	const n = 1 << 24
	// some is 2**20 colours drawn from all, for the other arguments.
	some := make([]byte, 3<<20)
	r := rand.New(rand.NewPCG(35, 3))
	for i := range 1 << 20 {
		c := r.IntN(n)
		some[i], some[1<<20+i], some[2<<20+i] = all[c], all[n+c], all[2*n+c]
	}
	cmp("rgb_to_grayscale", all, grayPlanes, grayPlanesGo)
	if a, b := graySum(all[:n], all[n:2*n], all[2*n:]), graySumGo(all[:n], all[n:2*n], all[2*n:]); a != b {
		t.Errorf("gray sum: C %d, Go %d", a, b)
	}
	// Saturation and hue at each level this CPU has: AVX2, and AVX-512.
	levels := []int{2}
	if kernelsSIMD >= 3 {
		levels = append(levels, 3)
	} else {
		t.Log("no AVX-512 on this CPU: saturation and hue compared at the AVX2 level alone")
	}
	for _, level := range levels {
		for i, f := range []float64{0.6, 0, 1.4, 5, -3} {
			ratio, alpha := float32(f), float64(float32(1-f))
			cmp(fmt.Sprintf("saturation %v (level %d)", f, level), [][]byte{all, some}[min(i, 1)],
				func(r, g, b []byte) { saturateC(level, r, g, b, ratio, alpha) },
				func(r, g, b []byte) { saturateGo(r, g, b, ratio, alpha) })
		}
		for i, sh := range []int32{hueShiftOf(0.1), -3 << hueFrac, 1, -1, 3<<hueFrac - 1, hueShiftOf(0.5),
			hueShiftOf(-0.3), hueShiftOf(1.0 / 6)} {
			cmp(fmt.Sprintf("hue shift %d (level %d)", sh, level), [][]byte{all, some}[min(i/2, 1)],
				func(r, g, b []byte) { hueRotateC(level, r, g, b, sh) },
				func(r, g, b []byte) { hueRotateGo(r, g, b, sh) })
		}
	}
	// The byte ops, on every byte value at every position mod 32 (3 planes
	// of 256*33+7 bytes).
	few := make([]byte, 3*(256*33+7))
	for i := range few {
		few[i] = byte(i)
	}
	r = rand.New(rand.NewPCG(35, 2))
	wide := 0
	for i := range 200 {
		f := []float64{0, 0.3, 1.3, 1.5, 255, 1e9, -1, 0.999999}[i%8]
		if i >= 16 {
			f = r.Float64() * 3
		}
		mean := []float64{0, 12.5, 100.07, -37.2}[i%4]
		if i >= 16 {
			mean = r.Float64() * 255
		}
		c := float64(float64(float32(mean)) * float64(float32(1-f)))
		var lut [256]byte
		blendConstLUT(&lut, float32(f), c)
		c32, ok := blendConst32(&lut, float32(f), c)
		if !ok {
			wide++
		}
		cmp(fmt.Sprintf("blend %v with %v (float64)", f, c), few,
			func(r, _, _ []byte) { blendConstC64(r, float32(f), c) },
			func(r, _, _ []byte) { blendConstGo(r, float32(f), c) })
		cmp(fmt.Sprintf("blend %v with %v (as dispatched)", f, c), few,
			func(r, _, _ []byte) { blendConst(r, float32(f), c) },
			func(r, _, _ []byte) { blendConstGo(r, float32(f), c) })
		if ok {
			cmp(fmt.Sprintf("blend %v with %v (float32 %v)", f, c, c32), few,
				func(r, _, _ []byte) { blendConstC32(r, float32(f), c32) },
				func(r, _, _ []byte) { blendConstGo(r, float32(f), c) })
		}
	}
	t.Logf("blends: %d of 200 need the float64 sum", wide)
	for _, m := range []byte{0, 0x80, 0xf0, 0xfe, 0xff} {
		cmp(fmt.Sprintf("and %#x", m), few, func(r, _, _ []byte) { andBytes(r, m) },
			func(r, _, _ []byte) { andBytesGo(r, m) })
		cmp(fmt.Sprintf("xor %#x", m), few, func(r, _, _ []byte) { xorBytes(r, m) },
			func(r, _, _ []byte) { xorBytesGo(r, m) })
	}
	for _, k := range []int{0, 1, 2, 127, 128, 254, 255, 256} {
		cmp(fmt.Sprintf("solarize from %d", k), few, func(r, _, _ []byte) { solarizeBytes(r, k) },
			func(r, _, _ []byte) { solarizeBytesGo(r, k) })
		for _, a := range []int{-255, -100, -1, 0, 1, 30, 110, 255} {
			cmp(fmt.Sprintf("add %d below %d", a, k), few, func(r, _, _ []byte) { addBelow(r, k, a) },
				func(r, _, _ []byte) { addBelowGo(r, k, a) })
		}
	}
	for _, k := range []int{1, 31, 32, 33, 100, len(few)} {
		for _, fill := range []byte{0, 9, 255} {
			pl := bytes.Repeat([]byte{fill}, k)
			pl[k/2] = byte(k)
			l1, h1 := minMax(pl)
			if l2, h2 := minMaxGo(pl); l1 != l2 || h1 != h2 {
				t.Errorf("minMax of %d bytes: C %d %d, Go %d %d", k, l1, h1, l2, h2)
			}
		}
	}
	// Sharpness, plane by plane, on sizes around the vector width.
	for _, sz := range [][2]int{{3, 3}, {4, 7}, {9, 3}, {10, 10}, {11, 5}, {17, 17}, {18, 4}, {33, 9}, {224, 224}} {
		w, h := sz[0], sz[1]
		img := noiseImage(w, h, uint64(w*h))
		for i := range img {
			if i%5 == 0 {
				img[i] = byte(255 * (i / 5 % 2))
			}
		}
		for _, f := range []float64{0, 0.5, 1.7, 5, 1e9, -2} {
			var dl [511]float64
			alpha := float64(float32(1 - f))
			for d := range dl {
				dl[d] = float64(float64(d-255) * alpha)
			}
			a, b := bytes.Clone(img[:w*h]), bytes.Clone(img[:w*h])
			sharpenPlane(a, w, h, alpha, make([]byte, w), make([]byte, w), &dl)
			sharpenPlaneGo(b, w, h, make([]byte, w), make([]byte, w), &dl)
			if i := firstDiff(a, b); i >= 0 {
				t.Errorf("sharpness %v on %dx%d: pixel %d: C %d, Go %d", f, w, h, i, a[i], b[i])
			}
		}
	}
}

// firstDiff is the index of the first byte where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// BenchmarkBlurLevels times the blur's versions on a 224x224 crop: the Go
// twin and the C one at each SIMD level (0 scalar, 1 SSE2, 2 AVX2).
func BenchmarkBlurLevels(b *testing.B) {
	src := benchCrop(b, 224, 224)
	pix := make([]byte, len(src))
	p := Planes{Pix: pix, W: 224, H: 224}
	for _, k := range []struct {
		name  string
		k     int
		sigma float64
	}{{"k9", 9, 1}, {"k23", 23, 1.5}, {"k23s5", 23, 5}} {
		var bx, by blurTaps
		wts := make([]int32, 2*(k.k/2+1))
		blurWeights(wts[:k.k/2+1], k.sigma, &bx)
		blurWeights(wts[k.k/2+1:], k.sigma, &by)
		var s Scratch
		run := func(name string, blur func()) {
			b.Run(k.name+"/"+name, func(b *testing.B) {
				blur()
				b.ReportAllocs()
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					copy(pix, src)
					blur()
				}
			})
		}
		run("go", func() { blurPlanesGo(p, &bx, &by, &s) })
		for simd := 0; simd <= kernelsSIMD; simd++ {
			run(fmt.Sprintf("c%d", simd), func() { blurPlanesC(p, &bx, &by, &s, simd) })
		}
	}
}

// TestLookupVBMI: the AVX-512 VBMI table lookup gives applyLUT's bytes, at
// every length around its 64-byte steps and its masked tail, with tables
// of every kind (random, identity, constant, reversed).
func TestLookupVBMI(t *testing.T) {
	if !lutVBMI {
		t.Skip("this CPU has no AVX-512 VBMI: lookup is applyLUT here, and stoker_lut_vbmi cannot run")
	}
	r := rand.New(rand.NewPCG(7, 8))
	var luts [4][256]byte
	for v := range 256 {
		luts[0][v] = byte(r.IntN(256))
		luts[1][v] = byte(v)
		luts[2][v] = 77
		luts[3][v] = byte(255 - v)
	}
	n := 0
	for _, size := range []int{1, 2, 63, 64, 65, 127, 128, 129, 191, 200, 4096 + 17, 96 * 96} {
		for k := range luts {
			pix := make([]byte, size)
			for i := range pix {
				pix[i] = byte(r.IntN(256))
			}
			want := bytes.Clone(pix)
			applyLUT(want, &luts[k])
			// a guard byte past the end: the masked tail must not write it
			buf := append(bytes.Clone(pix), 0xA5)
			lookupVBMI(buf[:size], &luts[k])
			if !bytes.Equal(buf[:size], want) || buf[size] != 0xA5 {
				t.Fatalf("table %d, %d bytes: VBMI lookup differs from applyLUT (or wrote past the end: %#x)", k, size, buf[size])
			}
			n++
		}
	}
	t.Logf("%d lookups the same as applyLUT", n)
}
