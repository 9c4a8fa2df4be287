//go:build cgo

package cv

import (
	"bytes"
	"image"
	"image/jpeg"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/testfiles"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// cTestImages are the sources the C paths are compared on: noise at odd
// and tiny sizes, smooth noise, and the repository's photos.
func cTestImages(t *testing.T) []kernels.Planes {
	t.Helper()
	var ims []kernels.Planes
	for i, wh := range [][2]int{{1, 1}, {2, 1}, {1, 3}, {2, 2}, {3, 5}, {17, 9}, {31, 33}, {64, 48}, {127, 129}, {333, 250}} {
		ims = append(ims, kernels.Planes{Pix: testfiles.Noise(wh[0], wh[1], uint64(i)), W: wh[0], H: wh[1]})
	}
	ims = append(ims, kernels.Planes{Pix: testfiles.SmoothNoise(160, 120, 7), W: 160, H: 120})
	paths, _ := filepath.Glob(filepath.Join("..", "..", "..", "testdata", "photos", "*", "*.jpg"))
	if len(paths) == 0 {
		t.Fatal("no photos in testdata/photos")
	}
	for _, p := range paths[:min(len(paths), 4)] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		ims = append(ims, planesOf(img))
	}
	return ims
}

// planesOf is img as three planes, R, G, B.
func planesOf(img image.Image) kernels.Planes {
	r := img.Bounds()
	w, h := r.Dx(), r.Dy()
	p := kernels.Planes{Pix: make([]byte, 3*w*h), W: w, H: h}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			cr, cg, cb, _ := img.At(r.Min.X+x, r.Min.Y+y).RGBA()
			i := y*w + x
			p.Pix[i], p.Pix[w*h+i], p.Pix[2*w*h+i] = byte(cr>>8), byte(cg>>8), byte(cb>>8)
		}
	}
	return p
}

// randomWarp is a matrix of the kinds the YOLO ops draw (rotation, scale,
// shear, translation, perspective) and some they never draw (singular,
// huge, mirrored), for a w x h source.
func randomWarp(r *rand.Rand, w, h int) (m [9]float64, persp bool) {
	a := (r.Float64()*2 - 1) * math.Pi
	s := 0.25 + r.Float64()*2
	if r.IntN(8) == 0 {
		s = -s
	}
	sh := (r.Float64()*2 - 1) * 0.5
	m = [9]float64{s * math.Cos(a), s*math.Sin(a) + sh, (r.Float64()*2 - 0.5) * float64(w),
		-s * math.Sin(a), s * math.Cos(a), (r.Float64()*2 - 0.5) * float64(h), 0, 0, 1}
	switch r.IntN(10) {
	case 0:
		m = [9]float64{1, 0, 0, 0, 1, 0, 0, 0, 1}
	case 3, 4:
		m[1], m[3] = 0, 0 // axis-aligned: the yolo preset's (no rotation or shear)
	case 1:
		m[0], m[1], m[3], m[4] = 0, 0, 0, 0 // singular
	case 2:
		m[0] *= 1e6
		m[4] *= 1e-6
	}
	if r.IntN(2) == 0 {
		persp = true
		m[6], m[7] = (r.Float64()*2-1)*0.002, (r.Float64()*2-1)*0.002
		if r.IntN(6) == 0 {
			m[6], m[7] = (r.Float64()*2-1)*0.5, (r.Float64()*2-1)*0.5 // the horizon inside the image
		}
	}
	return m, persp
}

// TestExactWarpCMatchesGo: cv.c's warp, each of its paths the CPU has (scalar,
// AVX2, AVX-512), gives warpGo's bytes for random matrices, affine and
// perspective, odd output sizes (tails of every length), borders, on noise
// and photos.
func TestExactWarpCMatchesGo(t *testing.T) {
	exactTest(t)
	if cSIMD < 3 {
		t.Logf("vector paths up to %d here (2: AVX-512F, 3: and VBMI): the others are not compared", cSIMD)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i, src := range cTestImages(t) {
		for k := 0; k < 24; k++ {
			m, persp := randomWarp(r, src.W, src.H)
			dw, dh := 1+r.IntN(2*src.W+40), 1+r.IntN(2*src.H+10)
			if k%4 == 0 {
				dw, dh = src.W, src.H
			}
			border := uint8(r.IntN(256))
			var f [9]float32
			if persp {
				inv := InvertPerspective(m)
				for j := range inv {
					f[j] = float32(inv[j])
				}
			} else {
				inv := InvertAffine([6]float64(m[:6]))
				for j := range inv {
					f[j] = float32(inv[j])
				}
				f[8] = 1
			}
			want := kernels.Planes{Pix: make([]byte, 3*dw*dh), W: dw, H: dh}
			warpGo(want, src, f, persp, border)
			for simd := 0; simd <= cSIMD; simd++ {
				got := kernels.Planes{Pix: make([]byte, 3*dw*dh), W: dw, H: dh}
				warpC(got, src, f, persp, border, simd)
				if j := firstDiff(got.Pix, want.Pix); j >= 0 {
					t.Fatalf("image %d (%dx%d), case %d, %dx%d, persp %v, simd %d, m %v: byte %d (plane %d, x %d, y %d) is %d, Go's %d",
						i, src.W, src.H, k, dw, dh, persp, simd, f, j, j/(dw*dh), j%(dw*dh)%dw, j%(dw*dh)/dw, got.Pix[j], want.Pix[j])
				}
			}
		}
	}
}

// firstDiff is the first index where a and b differ, -1 if none.
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestExactHSVCMatchesGo: cv.c's HSV loop, scalar, AVX2 and AVX-512 VBMI (those
// the CPU has), gives hsvPixelsGo's bytes on every 24-bit colour, for gains of
// each sign, none, and ones that saturate and wrap the hue, and for tables
// of random bytes (hues past 179 too); and on noise of odd and tiny sizes
// (the vector loop's tail) and photos.
func TestExactHSVCMatchesGo(t *testing.T) {
	exactTest(t)
	all := kernels.Planes{Pix: make([]byte, 3<<24), W: 4096, H: 4096}
	n := 1 << 24
	for i := 0; i < n; i++ {
		all.Pix[i], all.Pix[n+i], all.Pix[2*n+i] = byte(i>>16), byte(i>>8), byte(i)
	}
	ims := append([]kernels.Planes{all}, cTestImages(t)...)
	var luts [][3][256]uint8
	for _, r := range [][3]float64{{0, 0, 0}, {0.015, 0.7, 0.4}, {-0.015, -0.7, -0.4}, {0.5, 1, -1}, {-0.99, 3, 2}, {0.3, -1, 0.01}} {
		hue, sat, val := HSVLUTs(r)
		luts = append(luts, [3][256]uint8{hue, sat, val})
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for k := 0; k < 2; k++ {
		var l [3][256]uint8
		for i := range l {
			for j := range l[i] {
				l[i][j] = uint8(rng.Uint32())
			}
		}
		luts = append(luts, l)
	}
	for li, l := range luts {
		for i, src := range ims {
			want := kernels.Planes{Pix: append([]byte(nil), src.Pix...), W: src.W, H: src.H}
			got := kernels.Planes{Pix: make([]byte, len(src.Pix)), W: src.W, H: src.H}
			hsvPixelsGo(want, &l[0], &l[1], &l[2])
			for simd := 0; simd <= cSIMD; simd++ {
				copy(got.Pix, src.Pix)
				hsvC(got, &l[0], &l[1], &l[2], simd)
				if j := firstDiff(got.Pix, want.Pix); j >= 0 {
					k := j % (src.W * src.H)
					t.Fatalf("tables %d, image %d, simd %d: byte %d (plane %d) is %d, Go's %d; the pixel was %d,%d,%d",
						li, i, simd, j, j/(src.W*src.H), got.Pix[j], want.Pix[j], src.Pix[k], src.Pix[src.W*src.H+k], src.Pix[2*src.W*src.H+k])
				}
			}
		}
	}
}

// TestExactResizeCMatchesGo: cv.c's resize gives resizeLinearGo's bytes,
// shrinking and growing each side by odd factors, to and from one pixel,
// on noise and photos.
func TestExactResizeCMatchesGo(t *testing.T) {
	exactTest(t)
	r := rand.New(rand.NewPCG(3, 4))
	for i, src := range cTestImages(t) {
		for k := 0; k < 16; k++ {
			dw, dh := 1+r.IntN(2*src.W+7), 1+r.IntN(2*src.H+7)
			switch k {
			case 0:
				dw, dh = 1, 1
			case 1:
				dw, dh = src.W+1, max(src.H-1, 1)
			case 2:
				dw, dh = (src.W*2+2)/3, (src.H*2+2)/3
			}
			if dw == src.W && dh == src.H || dw*2 == src.W && dh*2 == src.H {
				continue // ResizeLinear's copy and halving, in Go in every build
			}
			tx, ty := resizeTaps(dw, src.W, true), resizeTaps(dh, src.H, false)
			want := kernels.Planes{Pix: make([]byte, 3*dw*dh), W: dw, H: dh}
			got := kernels.Planes{Pix: make([]byte, 3*dw*dh), W: dw, H: dh}
			resizeLinearGo(want, src, tx, ty)
			for simd := 0; simd <= min(cSIMD, 1); simd++ {
				resizeC(got, src, tx, ty, simd)
				if j := firstDiff(got.Pix, want.Pix); j >= 0 {
					t.Fatalf("image %d (%dx%d) to %dx%d, simd %d: byte %d is %d, Go's %d", i, src.W, src.H, dw, dh, simd, j, got.Pix[j], want.Pix[j])
				}
			}
		}
	}
}

// TestExactWarpCSmallFractions: the warp where the fractions of the source
// coordinates are tiny, near a half or near one (the vector paths blend
// in float where the coordinates are >= 1, in double where not: both
// must round as warpGo's fma32), on noise, every path the CPU has.
func TestExactWarpCSmallFractions(t *testing.T) {
	exactTest(t)
	src := cTestImages(t)[8]
	r := rand.New(rand.NewPCG(3, 4))
	for k := 0; k < 64; k++ {
		s := float32(1 + (r.Float64()-0.5)*1e-5)
		f := [9]float32{s, float32((r.Float64() - 0.5) * 1e-6), float32(r.Float64()*2 - 0.5),
			float32((r.Float64() - 0.5) * 1e-6), s, float32(r.Float64()*2 - 0.5), 0, 0, 1}
		switch k % 4 {
		case 1:
			f[2], f[5] = float32(math.Ldexp(1, -10-r.IntN(40))), float32(math.Ldexp(1, -10-r.IntN(40)))
		case 2:
			f[2], f[5] = 0.5+float32(math.Ldexp(1, -10-r.IntN(14))), 0.5-float32(math.Ldexp(1, -10-r.IntN(14)))
		case 3:
			f[2], f[5] = 1-float32(math.Ldexp(1, -10-r.IntN(14))), float32(r.IntN(3))
		}
		dw, dh := src.W+r.IntN(9), src.H
		want := kernels.Planes{Pix: make([]byte, 3*dw*dh), W: dw, H: dh}
		warpGo(want, src, f, false, 114)
		for simd := 0; simd <= cSIMD; simd++ {
			got := kernels.Planes{Pix: make([]byte, 3*dw*dh), W: dw, H: dh}
			warpC(got, src, f, false, 114, simd)
			if j := firstDiff(got.Pix, want.Pix); j >= 0 {
				t.Fatalf("case %d, simd %d, m %v: byte %d is %d, Go's %d", k, simd, f, j, got.Pix[j], want.Pix[j])
			}
		}
	}
}

// TestExactFMAExact: where stoker_cv_fma_exact says a*x + c is a float64 for
// every integer x in [0, n] (the vector warp then computes its
// coordinates as one float fused multiply-add where warp.go's fma32 fuses
// in double and rounds to float), it is, checked exactly (math/big) at
// x = 0, n and random x between, for a and c of every exponent, zeros and
// subnormals; and it says so for the matrices the YOLO ops draw (the
// float path is taken).
func TestExactFMAExact(t *testing.T) {
	exactTest(t)
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func() float32 {
		switch r.IntN(12) {
		case 0:
			return 0
		case 1:
			return math.Float32frombits(uint32(1 + r.IntN(1<<23))) // subnormal
		}
		v := float32(math.Ldexp(1+r.Float64(), r.IntN(100)-60))
		if r.IntN(2) == 0 {
			v = -v
		}
		return v
	}
	yes := 0
	for k := 0; k < 200000; k++ {
		a, c, n := rnd(), rnd(), r.IntN(5000)
		if !fmaExactC(a, n, c) {
			continue
		}
		yes++
		for _, x := range []int{0, n, r.IntN(n + 1), r.IntN(n + 1)} {
			e := new(big.Float).SetPrec(600).SetFloat64(float64(a))
			e.Mul(e, new(big.Float).SetPrec(600).SetInt64(int64(x)))
			e.Add(e, new(big.Float).SetPrec(600).SetFloat64(float64(c)))
			f, acc := e.Float64()
			if acc != big.Exact {
				t.Fatalf("a %g (%#x), c %g (%#x), n %d: said exact, but a*%d + c is %s, not a float64 (%g)",
					a, math.Float32bits(a), c, math.Float32bits(c), n, x, e.Text('g', 40), f)
			}
		}
	}
	if yes < 10000 {
		t.Fatalf("only %d of 200000 draws exact: the test checks little", yes)
	}
	// The yolo preset's: a scale's inverse and a translation of the 1280
	// canvas to 640, no rotation (ultralytics' default), and some rotated.
	for _, m := range [][3]float32{{1 / 1.37, -233.7, 0}, {1 / 0.53, 311.25, 0}, {0.7 * 0.8, -0.9 * 0.6, 402.1}} {
		for y := 0; y < 640; y++ {
			if c := float32(float32(y)*m[1]) + m[2]; !fmaExactC(m[0], 640, c) {
				t.Fatalf("m %v, row %d: not taken as exact", m, y)
			}
		}
	}
}

// TestExactWarpYLerpExact: the y-lerp fma32(ay, v1 - v0, v0) of the vector
// warp's interior is exactly a float64 before its rounding to float32
// (so that the float fused multiply-add gives the same float) where its
// source coordinates are x >= 1 and y >= 1, checked exactly (math/big)
// for random coordinates of every binade the warp reads and random taps,
// smooth ones too; and it is not always so for y < 1 (ay then with bits
// under 2^-23), which the vector path leaves to double.
func TestExactWarpYLerpExact(t *testing.T) {
	exactTest(t)
	r := rand.New(rand.NewPCG(7, 8))
	coord := func(lo float64) float32 { // a float >= lo, of a binade up to 2^12
		return float32(lo + r.Float64()*math.Ldexp(1, r.IntN(13)))
	}
	exact := func(ay, dv, v0 float32) bool {
		e := new(big.Float).SetPrec(200).SetFloat64(float64(ay))
		e.Mul(e, new(big.Float).SetPrec(200).SetFloat64(float64(dv)))
		e.Add(e, new(big.Float).SetPrec(200).SetFloat64(float64(v0)))
		_, acc := e.Float64()
		return acc == big.Exact
	}
	taps := func() (p [4]float32) {
		base := r.IntN(256)
		for i := range p {
			if r.IntN(2) == 0 { // smooth: close to base
				p[i] = float32(min(255, max(0, base+r.IntN(5)-2)))
			} else {
				p[i] = float32(r.IntN(256))
			}
		}
		return p
	}
	inexact := 0
	for k := 0; k < 400000; k++ {
		sx, sy := coord(1), coord(1)
		if k%2 == 1 {
			sy = float32(r.Float64()) // [0, 1): finer bits
		}
		ax := sx - float32(math.Floor(float64(sx)))
		ay := sy - float32(math.Floor(float64(sy)))
		p := taps()
		v0, v1 := fma32(ax, p[1]-p[0], p[0]), fma32(ax, p[3]-p[2], p[2])
		if exact(ay, v1-v0, v0) {
			continue
		}
		if sy >= 1 {
			t.Fatalf("sx %v, sy %v, taps %v: ay*dv + v0 (%v*%v + %v) is not a float64", sx, sy, p, ay, v1-v0, v0)
		}
		inexact++
	}
	if inexact == 0 {
		t.Error("no inexact y-lerp for y < 1: the bound is not shown to matter")
	}
	t.Logf("%d of 200000 y-lerps with y < 1 not a float64", inexact)
}

// BenchmarkCPaths: the C kernels' scalar path (simd 0), AVX2's (1) and
// AVX-512's (2, where the CPU has it) on BenchmarkKernels' image, beside
// its cases (the best path here).
func BenchmarkCPaths(b *testing.B) {
	src := benchPlanes(640, 640)
	for simd, name := range []string{"scalar", "avx2", "avx512", "avx512vbmi"}[:cSIMD+1] {
		b.Run(name+"/warpaffine/640", func(b *testing.B) {
			dst := benchPlanes(640, 640)
			f := warpMatrix(func(m [6]float64) []float64 { return m[:] }(InvertAffine([6]float64{0.9, 0.1, 20, -0.1, 0.95, 10})))
			for i := 0; i < b.N; i++ {
				warpC(dst, src, f, false, 114, simd)
			}
		})
		b.Run(name+"/hsv/640", func(b *testing.B) {
			im := benchPlanes(640, 640)
			for i := 0; i < b.N; i++ {
				copy(im.Pix, src.Pix)
				hue, sat, val := HSVLUTs([3]float64{0.01, 0.3, -0.2})
				hsvC(im, &hue, &sat, &val, simd)
			}
		})
	}
}
