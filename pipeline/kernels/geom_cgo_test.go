//go:build cgo

package kernels

import (
	"bytes"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// TestAffineCMatchesGo: the C resampling (AVX2 and FMA) and the Go one
// give the same bytes, over random matrices and images of every shape,
// both interpolations, fills and None; the scales by 0.5 and 2 and the
// half-pixel translations put many points exactly halfway between pixels
// and many sums exactly on half-integers, where the Go version's exact
// path must agree with the C version's fused arithmetic.
func TestAffineCMatchesGo(t *testing.T) {
	if !affineCAvailable() {
		t.Skip("this CPU has no AVX2 and FMA: the C resampling never runs here")
	}
	r := det.Seeded(15)
	sizes := append(append([][2]int(nil), geomSizes...), [2]int{224, 224}, [2]int{100, 1}, [2]int{1, 100},
		[2]int{6, 11}, [2]int{4, 17}, [2]int{9, 8}) // 66, 68 and 72 points: the grid's two orders (affineGrid)
	var sc, sg Scratch
	cases := 0
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		imgs := [][]byte{geomNoise(w, h, uint64(w*h)), make([]byte, 3*w*h), bytes.Repeat([]byte{255}, 3*w*h)}
		iters := 60
		if w*h > 10000 { // the Go bicubic is slow: fewer of the large ones
			iters = 10
		}
		for k := range iters {
			a := AffineParams{
				Angle: r.Uniform(-180, 180), TX: r.Uniform(-5, 5), TY: r.Uniform(-5, 5),
				Scale: r.Uniform(0.5, 1.5), ShearX: r.Uniform(-40, 40), ShearY: r.Uniform(-40, 40),
				Fill: [3]float64{float64(r.Intn(256)), r.Uniform(0, 255), 128.5}, NoFill: k%3 == 0,
			}
			switch k % 5 {
			case 1: // points halfway between pixels, sums on half-integers
				a.Angle, a.ShearX, a.ShearY, a.Scale = 0, 0, 0, []float64{0.5, 2, 1}[r.Intn(3)]
				a.TX, a.TY = float64(r.Intn(9)-4)/2, float64(r.Intn(9)-4)/2
			case 2: // right angles
				a.Angle, a.ShearX, a.ShearY, a.Scale = float64(90*r.Intn(4)), 0, 0, 1
			case 3:
				a.HasCenter, a.Center = true, [2]float64{r.Uniform(-3, float64(w)+3), r.Uniform(-3, float64(h)+3)}
			}
			for _, interp := range []Interpolation{Nearest, Bilinear, Bicubic} {
				a.Interp = interp
				m := inverseAffine(w, h, a.Center, a.HasCenter, a.Angle, [2]float64{a.TX, a.TY}, a.Scale, [2]float64{a.ShearX, a.ShearY})
				g := newAffineGrid(&m, w, h)
				var f [3]float32
				if !a.NoFill {
					f = [3]float32{float32(a.Fill[0]), float32(a.Fill[1]), float32(a.Fill[2])}
				}
				for _, img := range imgs {
					pc, pg := append([]byte(nil), img...), append([]byte(nil), img...)
					if !affineC(Planes{Pix: pc, W: w, H: h}, &g, interp, f, a.NoFill, &sc) {
						t.Fatal("affineC did nothing where the CPU has AVX2 and FMA")
					}
					resampleAffineGo(Planes{Pix: pg, W: w, H: h}, &g, interp, f, a.NoFill, &sg)
					if !bytes.Equal(pc, pg) {
						i := 0
						for pc[i] == pg[i] {
							i++
						}
						t.Fatalf("%dx%d %+v: C and Go differ first at byte %d (%d, %d)", w, h, a, i, pc[i], pg[i])
					}
					cases++
				}
			}
		}
	}
	t.Logf("%d cases", cases)
}

// TestFlipsCMatchesGo: the C row reversal and swap give the Go versions'
// bytes, for every width up to 100 and some heights.
func TestFlipsCMatchesGo(t *testing.T) {
	for w := 1; w <= 100; w++ {
		for _, h := range []int{1, 2, 5} {
			src := geomNoise(w, h, uint64(w+h))
			c, g := append([]byte(nil), src...), append([]byte(nil), src...)
			reverseRows(c, w, 3*h)
			reverseRowsGo(g, w, 3*h)
			if !bytes.Equal(c, g) {
				t.Fatalf("%dx%d: reverseRows differs from reverseRowsGo", w, h)
			}
			flipRows(c, w, h)
			flipRowsGo(g, w, h)
			if !bytes.Equal(c, g) {
				t.Fatalf("%dx%d: flipRows differs from flipRowsGo", w, h)
			}
		}
	}
}

// TestRotateExpandCMatchesGo: rotate(expand=True)'s C resampling (into
// an output of its own size) and the Go one give the same bytes, over
// random angles, centres, fills and shapes, nearest and bilinear.
func TestRotateExpandCMatchesGo(t *testing.T) {
	if !affineCAvailable() {
		t.Skip("this CPU has no AVX2 and FMA: the C resampling never runs here")
	}
	r := det.Seeded(16)
	sizes := append(append([][2]int(nil), geomSizes...), [2]int{97, 131}, [2]int{100, 1}, [2]int{1, 100})
	var sc, sg Scratch
	cases := 0
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		img := geomNoise(w, h, uint64(w*h+1))
		for k := range 30 {
			angle := r.Uniform(-360, 360)
			center, has := [2]float64{r.Uniform(-3, float64(w)+3), r.Uniform(-3, float64(h)+3)}, k%3 == 1
			fill, noFill := [3]float64{float64(r.Intn(256)), r.Uniform(0, 255), 128.5}, k%4 == 0
			ow, oh := RotatedSize(w, h, angle, center, has)
			if ow == w && oh == h {
				continue
			}
			for _, interp := range []Interpolation{Nearest, Bilinear} {
				a := pyMod(angle, 360)
				m := inverseAffine(w, h, center, has, -a, [2]float64{}, 1, [2]float64{})
				g := newAffineGridTo(&m, w, h, ow, oh)
				var f [3]float32
				var fb [3]uint8
				if !noFill {
					for c := range 3 {
						f[c] = float32(fill[c])
						fb[c] = roundCast(f[c])
					}
				}
				oc, og := make([]byte, 3*ow*oh), make([]byte, 3*ow*oh)
				if !affineCTo(Planes{Pix: img, W: w, H: h}, Planes{Pix: oc, W: ow, H: oh}, &g, interp, f, noFill, &sc) {
					t.Fatal("affineCTo did nothing where the CPU has AVX2 and FMA")
				}
				src := append(sg.bytes(0, 0)[:0], img...)
				if interp == Nearest {
					nearestAffine(Planes{Pix: og, W: ow, H: oh}, src, w, h, &g, fb)
				} else {
					bilinearAffineFrom(Planes{Pix: og, W: ow, H: oh}, src, w, h, &g, f, fb, noFill)
				}
				if !bytes.Equal(oc, og) {
					t.Fatalf("%dx%d rotated by %v (center %v %v, fill %v %v, %v) to %dx%d: C and Go differ", w, h, angle, center, has, fill, noFill, interp, ow, oh)
				}
				cases++
			}
		}
	}
	if cases < 200 {
		t.Fatalf("%d cases", cases)
	}
}
