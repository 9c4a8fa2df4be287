package kernels

import (
	"bytes"
	"math"
	"math/big"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/internal/testfiles"
)

// geomNoise and geomSizes are the geometric kernels' test images and
// sizes (pipeline/internal/testfiles').
var (
	geomNoise = testfiles.Noise
	geomSizes = testfiles.GeomSizes
)

// at is pixel (x, y) of channel c of a w x h image.
func at(pix []byte, w, h, c, x, y int) byte { return pix[c*w*h+y*w+x] }

func TestFlips(t *testing.T) {
	widths := []int{47, 63, 64, 65, 100, 224, 333}
	for w := 1; w <= 40; w++ {
		widths = append(widths, w)
	}
	for _, w := range widths {
		for _, h := range []int{1, 2, 3, 6} {
			src := geomNoise(w, h, uint64(w*100+h))
			hf := append([]byte(nil), src...)
			HorizontalFlip(Planes{Pix: hf, W: w, H: h})
			vf := append([]byte(nil), src...)
			VerticalFlip(Planes{Pix: vf, W: w, H: h})
			for c := range 3 {
				for y := range h {
					for x := range w {
						if at(hf, w, h, c, x, y) != at(src, w, h, c, w-1-x, y) {
							t.Fatalf("%dx%d: horizontal_flip wrong at c%d (%d,%d)", w, h, c, x, y)
						}
						if at(vf, w, h, c, x, y) != at(src, w, h, c, x, h-1-y) {
							t.Fatalf("%dx%d: vertical_flip wrong at c%d (%d,%d)", w, h, c, x, y)
						}
					}
				}
			}
		}
	}
	// rows longer than verticalFlip's swap buffer
	src := geomNoise(1500, 3, 5)
	vf := append([]byte(nil), src...)
	VerticalFlip(Planes{Pix: vf, W: 1500, H: 3})
	if !bytes.Equal(vf[:1500], src[3000:4500]) || !bytes.Equal(vf[1500:3000], src[1500:3000]) {
		t.Fatal("vertical_flip of 1500-pixel rows is wrong")
	}
}

func TestErase(t *testing.T) {
	const w, h = 9, 7
	for _, b := range []struct{ i, j, h, w int }{{0, 0, 0, 0}, {2, 3, 0, 4}, {0, 0, h, w}, {1, 2, 3, 4}, {6, 8, 1, 1}, {5, 7, 10, 10}} {
		src := geomNoise(w, h, 3)
		got := append([]byte(nil), src...)
		v := [3]float64{0.5, 127.9, 255}
		Erase(Planes{Pix: got, W: w, H: h}, b.i, b.j, b.h, b.w, v)
		want := [3]byte{0, 127, 255} // torch truncates a float32 assigned to uint8
		for c := range 3 {
			for y := range h {
				for x := range w {
					in := y >= b.i && y < b.i+b.h && x >= b.j && x < b.j+b.w
					e := at(src, w, h, c, x, y)
					if in {
						e = want[c]
					}
					if g := at(got, w, h, c, x, y); g != e {
						t.Fatalf("box %+v: c%d (%d,%d) = %d, want %d", b, c, x, y, g, e)
					}
				}
			}
		}
	}
	for _, c := range []struct {
		f    float32
		want uint8
	}{{0, 0}, {0.999, 0}, {1, 1}, {255.9, 255}, {-1, 255}, {256, 0}, {300, 44}, {float32(math.NaN()), 0}, {1e20, 0}} {
		if got := castU8(c.f); got != c.want {
			t.Errorf("castU8(%v) = %d, want %d", c.f, got, c.want)
		}
	}
}

// TestEraseRandom: the noise is a pure function of the seed, stays in its
// box, and its pixels have the mean and spread of round(255 * (mean + std *
// z)), clamped, for z standard normal.
func TestEraseRandom(t *testing.T) {
	const w, h = 97, 89
	mean, std := [3]float64{0.485, 0.456, 0.406}, [3]float64{0.229, 0.224, 0.225}
	var s Scratch
	run := func(seed uint64, b [4]int) []byte {
		pix := geomNoise(w, h, 4)
		EraseRandom(Planes{Pix: pix, W: w, H: h}, b[0], b[1], b[2], b[3], seed, mean, std, &s)
		return pix
	}
	whole := [4]int{0, 0, h, w}
	a, again, other := run(42, whole), run(42, whole), run(43, whole)
	if !bytes.Equal(a, again) || bytes.Equal(a, other) {
		t.Fatalf("the noise is not a function of its seed alone")
	}
	for c := range 3 {
		var want, want2 float64 // the clamped, rounded normal's mean and second moment
		prev := 0.0
		for v := range 256 {
			cdf := 1.0
			if v < 255 {
				cdf = normalCDF(((float64(v)+0.5)/255 - mean[c]) / std[c])
			}
			pv := cdf - prev
			prev = cdf
			want += pv * float64(v)
			want2 += pv * float64(v*v)
		}
		var sum, sum2 float64
		pl := a[c*w*h : (c+1)*w*h]
		for _, v := range pl {
			sum += float64(v)
			sum2 += float64(v) * float64(v)
		}
		n := float64(len(pl))
		m, sd, wsd := sum/n, math.Sqrt(sum2/n-(sum/n)*(sum/n)), math.Sqrt(want2-want*want)
		// 8633 pixels: the mean's standard error is about 0.6.
		if math.Abs(m-want) > 3 || math.Abs(sd-wsd) > 3 {
			t.Errorf("channel %d: noise mean %.2f sd %.2f, want %.2f and %.2f", c, m, sd, want, wsd)
		}
	}
	src := geomNoise(w, h, 4)
	box := run(7, [4]int{10, 20, 30, 40})
	for c := range 3 {
		for y := range h {
			for x := range w {
				in := y >= 10 && y < 40 && x >= 20 && x < 60
				if !in && at(box, w, h, c, x, y) != at(src, w, h, c, x, y) {
					t.Fatalf("c%d (%d,%d) outside the box changed", c, x, y)
				}
			}
		}
	}
}

// TestFma32 checks fma32 against exact arithmetic, including sums whose
// float64 rounding lands halfway between two float32s (where rounding
// twice would be wrong).
func TestFma32(t *testing.T) {
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	r := det.Seeded(11)
	f32 := func() float32 { return float32(r.Float64()*512 - 256) }
	type abc struct{ a, b, c float32 }
	// (1+2^-23) + (1+2^-23)(1-2^-23)2^-24 is 1 + 3*2^-24 - 2^-70: just
	// below the float32 tie 1 + 3*2^-24, so it rounds down to 1+2^-23; its
	// float64 rounding is the tie itself, which would round up to 1+2^-22.
	one, ulp := float32(1), float32(math.Ldexp(1, -23))
	cases := []abc{{one + ulp, (one - ulp) * float32(math.Ldexp(1, -24)), one + ulp}, {-(one + ulp), (one - ulp) * float32(math.Ldexp(1, -24)), -(one + ulp)}}
	if p, c := float64(cases[0].a)*float64(cases[0].b), float64(cases[0].c); float32(p+c) == exact(cases[0].a, cases[0].b, cases[0].c) {
		t.Fatal("the crafted case does not round twice wrong")
	}
	for range 200000 {
		cases = append(cases, abc{f32(), f32(), f32()}, abc{float32(r.Intn(256)), float32(r.Float64()), f32() / 256})
	}
	for _, c := range cases {
		if got, want := fma32(c.a, c.b, c.c), exact(c.a, c.b, c.c); got != want {
			t.Fatalf("fma32(%v, %v, %v) = %v, want %v", c.a, c.b, c.c, got, want)
		}
	}
}

// TestDegToRad: CPython's math.radians multiplies by Py_MATH_PI / 180.0,
// rounded once.
func TestDegToRad(t *testing.T) {
	pi := math.Pi
	if degToRad != 0.017453292519943295 || degToRad != pi/180 {
		t.Fatalf("degToRad = %v", degToRad)
	}
}

// TestAffineGridTorchOrder: the grid is torch's, bit for bit, at points
// where its two orders of summing differ (recorded from torchvision
// 0.29.2's _affine_grid on torch 2.15, x86-64, MKL on its AVX-512 path):
// below 67 points torch's own loop, unfused; from 67 on MKL's sgemm,
// fma(Y, r1, X*r0) + r2 (python/tests/test_rotate_large.py checks the
// whole grids and the pixels against torchvision).
func TestAffineGridTorchOrder(t *testing.T) {
	m := [6]float64{0.8730000257492065, -0.4876999855041504, 0.1234000027179718, 0.4876999855041504, 0.8730000257492065, -0.056699998676776886}
	for _, c := range []struct {
		w, h   int
		points [][4]uint32 // x, y, torch's grid x and y (float32 bits)
	}{
		{300, 300, [][4]uint32{{2, 0, 0xbebe3c32, 0xbfacce1a}, {258, 65, 0x3f683324, 0xbe0ebe70}, {152, 151, 0x3c2bf605, 0x3c8701c4}, {49, 234, 0xbf5bdbf5, 0x3e289ace}}},
		{8, 8, [][4]uint32{{1, 0, 0xbdb44d07, 0xbf8a9b3d}, {7, 1, 0x3f8cbda5, 0xbe08418c}}}, // 64 points: unfused
		{6, 11, [][4]uint32{{4, 0, 0x3fa52e03, 0xbf2bc27d}, {1, 2, 0x3dbd193e, 0xbf1e978d}}},
		{4, 17, [][4]uint32{{2, 2, 0x3fdf1c43, 0xbf181ea7}, {0, 5, 0x3e0dd2f1, 0xbecd3c9a}}}, // 68 points: fused
		{9, 8, [][4]uint32{{1, 0, 0xbe337633, 0xbf9268dc}, {2, 0, 0x3c998dec, 0xbf82cd9f}}},
	} {
		g := newAffineGrid(&m, c.w, c.h)
		for _, p := range c.points {
			x, y := int(p[0]), int(p[1])
			ix, iy := g.at(x, g.row(y))
			wx := unnormalize(math.Float32frombits(p[2]), g.halfW)
			wy := unnormalize(math.Float32frombits(p[3]), g.halfH)
			if ix != wx || iy != wy {
				t.Errorf("%dx%d (%d, %d): point (%v, %v), torch's (%v, %v)", c.w, c.h, x, y, ix, iy, wx, wy)
			}
		}
	}
}
