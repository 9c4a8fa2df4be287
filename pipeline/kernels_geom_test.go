package pipeline

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/det"
)

// geomNoise is a w x h image (three planes) of pseudo-random bytes from
// seed: the same on every machine.
func geomNoise(w, h int, seed uint64) []byte {
	r := det.Seeded(seed)
	pix := make([]byte, 3*w*h)
	for i := range pix {
		pix[i] = byte(r.Uint64() >> 56)
	}
	return pix
}

// geomSizes are image sizes for the kernels' tests: single rows and
// columns, odd sizes, widths around the C version's groups of eight.
var geomSizes = [][2]int{{1, 1}, {1, 7}, {7, 1}, {2, 2}, {3, 5}, {8, 3}, {9, 4}, {17, 16}, {31, 33}, {97, 131}}

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
			horizontalFlip(planes{pix: hf, w: w, h: h})
			vf := append([]byte(nil), src...)
			verticalFlip(planes{pix: vf, w: w, h: h})
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
	verticalFlip(planes{pix: vf, w: 1500, h: 3})
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
		erase(planes{pix: got, w: w, h: h}, b.i, b.j, b.h, b.w, v)
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
	var s opScratch
	run := func(seed uint64, b [4]int) []byte {
		pix := geomNoise(w, h, 4)
		eraseRandom(planes{pix: pix, w: w, h: h}, b[0], b[1], b[2], b[3], seed, mean, std, &s)
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

// geomRun applies one step to a copy of pix.
func geomRun(pix []byte, w, h int, st Step) []byte {
	out := append([]byte(nil), pix...)
	var s opScratch
	applyStep(planes{pix: out, w: w, h: h}, &st, &s)
	return out
}

// TestGeomIdentity: parameters that move nothing give the input back.
func TestGeomIdentity(t *testing.T) {
	for _, sz := range append(geomSizes, [2]int{224, 224}) {
		w, h := sz[0], sz[1]
		src := geomNoise(w, h, 7)
		for _, interp := range []Interpolation{InterpNearest, InterpBilinear, InterpBicubic} {
			for _, st := range []Step{
				{Fn: FnRotate, F: [6]float64{0}},
				{Fn: FnRotate, F: [6]float64{360}},
				{Fn: FnRotate, F: [6]float64{-720}},
				{Fn: FnRotate, F: [6]float64{0}, HasCenter: true, Center: [2]float64{float64(w) / 2, float64(h) / 2}},
				{Fn: FnAffine, F: [6]float64{0, 0, 0, 1, 0, 0}},
				{Fn: FnAffine, F: [6]float64{0, 0, 0, 1, 0, 0}, FillNone: true},
				{Fn: FnAffine, F: [6]float64{0, 0, 0, 1, 0, 0}, Fill: [3]float64{255, 0, 128}},
				{Fn: FnAffine, F: [6]float64{0, 0, 0, 1, 0, 0}, HasCenter: true, Center: [2]float64{3, -5}},
			} {
				st.Interp = interp
				if got := geomRun(src, w, h, st); !bytes.Equal(got, src) {
					t.Errorf("%dx%d %s %+v: not the identity", w, h, interp, st)
				}
			}
		}
		for _, st := range []Step{{Fn: FnErase, I: [6]int{0, 0, 0, 0}}, {Fn: FnErase, I: [6]int{0, 0, h, 0}}} {
			if got := geomRun(src, w, h, st); !bytes.Equal(got, src) {
				t.Errorf("%dx%d: an empty erase changed the image", w, h)
			}
		}
	}
}

// TestGeomInverses: flips twice, rotations that add up to a turn.
func TestGeomInverses(t *testing.T) {
	for _, sz := range append(geomSizes, [2]int{224, 224}) {
		w, h := sz[0], sz[1]
		src := geomNoise(w, h, 8)
		seqs := [][]Step{
			{{Fn: FnHorizontalFlip}, {Fn: FnHorizontalFlip}},
			{{Fn: FnVerticalFlip}, {Fn: FnVerticalFlip}},
			{{Fn: FnRotate, F: [6]float64{180}}, {Fn: FnRotate, F: [6]float64{-180}}},
			{{Fn: FnRotate, F: [6]float64{180}}, {Fn: FnHorizontalFlip}, {Fn: FnVerticalFlip}},
		}
		if w == h {
			seqs = append(seqs, []Step{{Fn: FnRotate, F: [6]float64{90}}, {Fn: FnRotate, F: [6]float64{270}}},
				[]Step{{Fn: FnRotate, F: [6]float64{-90}}, {Fn: FnRotate, F: [6]float64{450}}})
		}
		for _, seq := range seqs {
			got := append([]byte(nil), src...)
			if err := ApplyTrace(got, w, h, seq); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, src) {
				t.Errorf("%dx%d %v: not the identity", w, h, seq)
			}
		}
	}
}

// TestRotateFastPathsMatchResampling: rotate's exact paths for 90, 180
// and 270 degrees (taken with no center) give what resampling gives with
// the image's center given explicitly.
func TestRotateFastPathsMatchResampling(t *testing.T) {
	for _, n := range []int{1, 2, 5, 8, 17, 224} {
		src := geomNoise(n, n, 9)
		for _, angle := range []float64{90, 180, 270, -90} {
			for _, interp := range []Interpolation{InterpNearest, InterpBilinear, InterpBicubic} {
				fast := geomRun(src, n, n, Step{Fn: FnRotate, F: [6]float64{angle}, Interp: interp})
				slow := geomRun(src, n, n, Step{Fn: FnRotate, F: [6]float64{angle}, Interp: interp,
					HasCenter: true, Center: [2]float64{float64(n) / 2, float64(n) / 2}})
				if !bytes.Equal(fast, slow) {
					t.Errorf("%dx%d rotate %v %s: the fast path differs from resampling", n, n, angle, interp)
				}
			}
		}
	}
}

// TestAffineTranslate: a translation by whole pixels moves the image and
// fills what it uncovers, in both interpolations.
func TestAffineTranslate(t *testing.T) {
	for _, sz := range geomSizes {
		w, h := sz[0], sz[1]
		src := geomNoise(w, h, 10)
		for _, d := range [][2]int{{1, 0}, {-2, 3}, {0, -1}, {w, 0}, {-w - 1, h}} {
			for _, interp := range []Interpolation{InterpNearest, InterpBilinear, InterpBicubic} {
				fill := [3]float64{255, 0, 128}
				got := geomRun(src, w, h, Step{Fn: FnAffine, F: [6]float64{0, float64(d[0]), float64(d[1]), 1, 0, 0}, Interp: interp, Fill: fill})
				for c := range 3 {
					for y := range h {
						for x := range w {
							sx, sy := x-d[0], y-d[1]
							want := byte(fill[c])
							if sx >= 0 && sx < w && sy >= 0 && sy < h {
								want = at(src, w, h, c, sx, sy)
							}
							if g := at(got, w, h, c, x, y); g != want {
								t.Fatalf("%dx%d translate %v %s: c%d (%d,%d) = %d, want %d", w, h, d, interp, c, x, y, g, want)
							}
						}
					}
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

// geomGoldenSteps are the steps TestGeomGolden hashes the results of.
func geomGoldenSteps() []Step {
	var steps []Step
	for _, interp := range []Interpolation{InterpNearest, InterpBilinear, InterpBicubic} {
		for _, angle := range []float64{-180, -45, 12.25, 30.5, 90, 179.9} {
			steps = append(steps, Step{Fn: FnRotate, F: [6]float64{angle}, Interp: interp, Fill: [3]float64{255, 0, 128}},
				Step{Fn: FnRotate, F: [6]float64{angle}, Interp: interp, FillNone: true})
		}
		for _, f := range [][6]float64{{10, 5, 3, 1.1, 8, 2}, {0, 0, 0, 0.5, 0, 0}, {-170, -7.5, 0.5, 1.5, -20, 30}, {0, 0.5, 0.5, 1, 0, 0}} {
			steps = append(steps, Step{Fn: FnAffine, F: f, Interp: interp, Fill: [3]float64{0, 127.5, 128.5}},
				Step{Fn: FnAffine, F: f, Interp: interp, FillNone: true, HasCenter: true})
		}
	}
	return append(steps, Step{Fn: FnHorizontalFlip}, Step{Fn: FnVerticalFlip},
		Step{Fn: FnErase, I: [6]int{1, 2, 5, 6}, Fill: [3]float64{1, 2, 3}},
		Step{Fn: FnErase, I: [6]int{0, 1, 6, 5}, Random: true, Seed: 3, F: [6]float64{0.485, 0.456, 0.406, 0.229, 0.224, 0.225}})
}

// TestGeomGolden pins the kernels' bytes: the same hash on every machine,
// with and without cgo (the C resampling and the Go one).
func TestGeomGolden(t *testing.T) {
	h := sha256.New()
	for _, sz := range [][2]int{{1, 7}, {7, 1}, {31, 33}, {64, 48}} {
		src := geomNoise(sz[0], sz[1], 12)
		for _, st := range geomGoldenSteps() {
			h.Write(geomRun(src, sz[0], sz[1], st))
		}
	}
	const want = "c5c4ec19e7e51cb7e4f53c095a418b75d14d78c536c440525c8b70ca0d845b36"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("kernels' hash %s, want %s", got, want)
	}
}

// TestGeomNoAlloc: once the scratch is warm, no kernel allocates.
func TestGeomNoAlloc(t *testing.T) {
	allocTest(t)
	const w, h = 61, 47
	pix := geomNoise(w, h, 13)
	p := planes{pix: pix, w: w, h: h}
	var s opScratch
	for _, st := range geomGoldenSteps() {
		applyStep(p, &st, &s)
		if n := testing.AllocsPerRun(10, func() { applyStep(p, &st, &s) }); n != 0 {
			t.Errorf("%s %+v: %v allocations per run", st.Fn, st, n)
		}
	}
}

// TestGeomTrace: the parsed trace's arguments reach the kernels, and bad
// ones are refused with the op and the argument named.
func TestGeomTrace(t *testing.T) {
	const w, h = 5, 4
	src := geomNoise(w, h, 14)
	run := func(trace string) ([]byte, error) {
		steps, err := ParseTrace([]byte(trace))
		if err != nil {
			return nil, err
		}
		out := append([]byte(nil), src...)
		return out, ApplyTrace(out, w, h, steps)
	}
	// fill null is None, and round-trips as null
	steps, err := ParseTrace([]byte(`[["rotate",{"angle":30.0,"interpolation":"bilinear","expand":false,"center":null,"fill":null}]]`))
	if err != nil || !steps[0].FillNone {
		t.Fatalf("fill null: %+v, %v", steps, err)
	}
	if tr := string(AppendTrace(nil, steps)); !strings.Contains(tr, `"fill":null`) {
		t.Errorf("fill None traced as %s", tr)
	}
	none, err := run(`[["rotate",{"angle":30.0,"interpolation":"bilinear","fill":null}]]`)
	if err != nil {
		t.Fatal(err)
	}
	zero, err := run(`[["rotate",{"angle":30.0,"interpolation":"bilinear","fill":[0,0,0]}]]`)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(none, zero) {
		t.Error("bilinear rotate with fill None and with fill 0 are the same: the border must differ")
	}
	for _, c := range []struct{ trace, want string }{
		{`[["rotate",{"angle":30.0,"interpolation":"lanczos"}]]`, "interpolation \"lanczos\""},
		{`[["affine",{"angle":0.0,"translate":[0,0],"scale":0.0,"shear":[0,0]}]]`, "scale 0"},
		{`[["affine",{"angle":0.0,"translate":[0,0],"scale":-1.0,"shear":[0,0]}]]`, "scale -1"},
		{`[["rotate",{"angle":30.0,"fill":[0,256,0]}]]`, "fill"},
		{`[["erase",{"i":0,"j":0,"h":1,"w":1,"v":[-1]}]]`, "fill"},
		{`[["erase",{"i":0,"j":0,"h":5,"w":1,"v":[1]}]]`, "outside"},
		{`[["rotate",{"angle":1e12}]]`, "out of range"},
	} {
		_, err := run(c.trace)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.trace, err, c.want)
		}
	}
	if _, err := run(`[["erase",{"i":0,"j":0,"h":1,"w":1,"v":"random"}]]`); err != nil {
		t.Errorf("erase random: %v", err)
	}
}

func ExampleApplyTrace_rotate() {
	pix := []byte{ // 2x2, three planes
		1, 2, 3, 4,
		5, 6, 7, 8,
		9, 10, 11, 12,
	}
	steps, _ := ParseTrace([]byte(`[["rotate",{"angle":90.0,"interpolation":"nearest"}]]`))
	if err := ApplyTrace(pix, 2, 2, steps); err != nil {
		fmt.Println(err)
	}
	fmt.Println(pix)
	// Output: [2 4 1 3 6 8 5 7 10 12 9 11]
}
