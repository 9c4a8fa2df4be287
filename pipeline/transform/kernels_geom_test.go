package transform

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/testfiles"
	"github.com/stoker-dev/stoker/pipeline/kernels"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// geomNoise and geomSizes are the geometric kernels' test images and
// sizes (pipeline/internal/testfiles').
var (
	geomNoise = testfiles.Noise
	geomSizes = testfiles.GeomSizes
)

// at is pixel (x, y) of channel c of a w x h image.
func at(pix []byte, w, h, c, x, y int) byte { return pix[c*w*h+y*w+x] }

// geomRun applies one step to a copy of pix.
func geomRun(pix []byte, w, h int, st fn.Step) []byte {
	out := append([]byte(nil), pix...)
	var s kernels.Scratch
	fn.Apply(kernels.Planes{Pix: out, W: w, H: h}, &st, &s)
	return out
}

// TestGeomIdentity: parameters that move nothing give the input back.
func TestGeomIdentity(t *testing.T) {
	for _, sz := range append(geomSizes, [2]int{224, 224}) {
		w, h := sz[0], sz[1]
		src := geomNoise(w, h, 7)
		for _, interp := range []Interpolation{InterpNearest, InterpBilinear, InterpBicubic} {
			for _, st := range []fn.Step{
				{Fn: fn.Rotate, F: [6]float64{0}},
				{Fn: fn.Rotate, F: [6]float64{360}},
				{Fn: fn.Rotate, F: [6]float64{-720}},
				{Fn: fn.Rotate, F: [6]float64{0}, HasCenter: true, Center: [2]float64{float64(w) / 2, float64(h) / 2}},
				{Fn: fn.Affine, F: [6]float64{0, 0, 0, 1, 0, 0}},
				{Fn: fn.Affine, F: [6]float64{0, 0, 0, 1, 0, 0}, FillNone: true},
				{Fn: fn.Affine, F: [6]float64{0, 0, 0, 1, 0, 0}, Fill: [3]float64{255, 0, 128}},
				{Fn: fn.Affine, F: [6]float64{0, 0, 0, 1, 0, 0}, HasCenter: true, Center: [2]float64{3, -5}},
			} {
				st.Interp = interp
				if got := geomRun(src, w, h, st); !bytes.Equal(got, src) {
					t.Errorf("%dx%d %s %+v: not the identity", w, h, interp, st)
				}
			}
		}
		for _, st := range []fn.Step{{Fn: fn.Erase, I: [6]int{0, 0, 0, 0}}, {Fn: fn.Erase, I: [6]int{0, 0, h, 0}}} {
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
		seqs := [][]fn.Step{
			{{Fn: fn.HorizontalFlip}, {Fn: fn.HorizontalFlip}},
			{{Fn: fn.VerticalFlip}, {Fn: fn.VerticalFlip}},
			{{Fn: fn.Rotate, F: [6]float64{180}}, {Fn: fn.Rotate, F: [6]float64{-180}}},
			{{Fn: fn.Rotate, F: [6]float64{180}}, {Fn: fn.HorizontalFlip}, {Fn: fn.VerticalFlip}},
		}
		if w == h {
			seqs = append(seqs, []fn.Step{{Fn: fn.Rotate, F: [6]float64{90}}, {Fn: fn.Rotate, F: [6]float64{270}}},
				[]fn.Step{{Fn: fn.Rotate, F: [6]float64{-90}}, {Fn: fn.Rotate, F: [6]float64{450}}})
		}
		for _, seq := range seqs {
			got := append([]byte(nil), src...)
			if err := optab.ApplyTrace(got, w, h, seq); err != nil {
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
				fast := geomRun(src, n, n, fn.Step{Fn: fn.Rotate, F: [6]float64{angle}, Interp: interp})
				slow := geomRun(src, n, n, fn.Step{Fn: fn.Rotate, F: [6]float64{angle}, Interp: interp,
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
				got := geomRun(src, w, h, fn.Step{Fn: fn.Affine, F: [6]float64{0, float64(d[0]), float64(d[1]), 1, 0, 0}, Interp: interp, Fill: fill})
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

// geomGoldenSteps are the steps TestGeomGolden hashes the results of.
func geomGoldenSteps() []fn.Step {
	var steps []fn.Step
	for _, interp := range []Interpolation{InterpNearest, InterpBilinear, InterpBicubic} {
		for _, angle := range []float64{-180, -45, 12.25, 30.5, 90, 179.9} {
			steps = append(steps, fn.Step{Fn: fn.Rotate, F: [6]float64{angle}, Interp: interp, Fill: [3]float64{255, 0, 128}},
				fn.Step{Fn: fn.Rotate, F: [6]float64{angle}, Interp: interp, FillNone: true})
		}
		for _, f := range [][6]float64{{10, 5, 3, 1.1, 8, 2}, {0, 0, 0, 0.5, 0, 0}, {-170, -7.5, 0.5, 1.5, -20, 30}, {0, 0.5, 0.5, 1, 0, 0}} {
			steps = append(steps, fn.Step{Fn: fn.Affine, F: f, Interp: interp, Fill: [3]float64{0, 127.5, 128.5}},
				fn.Step{Fn: fn.Affine, F: f, Interp: interp, FillNone: true, HasCenter: true})
		}
	}
	return append(steps, fn.Step{Fn: fn.HorizontalFlip}, fn.Step{Fn: fn.VerticalFlip},
		fn.Step{Fn: fn.Erase, I: [6]int{1, 2, 5, 6}, Fill: [3]float64{1, 2, 3}},
		fn.Step{Fn: fn.Erase, I: [6]int{0, 1, 6, 5}, Random: true, Seed: 3, F: [6]float64{0.485, 0.456, 0.406, 0.229, 0.224, 0.225}})
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
	const want = "49978c5e830789cd8f8f040fcd144c57350273b3f49fe1b9f6b5cf78ebfb8043"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("kernels' hash %s, want %s", got, want)
	}
}

// TestGeomNoAlloc: once the scratch is warm, no kernel allocates.
func TestGeomNoAlloc(t *testing.T) {
	allocTest(t)
	const w, h = 61, 47
	pix := geomNoise(w, h, 13)
	p := kernels.Planes{Pix: pix, W: w, H: h}
	var s kernels.Scratch
	for _, st := range geomGoldenSteps() {
		fn.Apply(p, &st, &s)
		if n := testing.AllocsPerRun(10, func() { fn.Apply(p, &st, &s) }); n != 0 {
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
		return out, optab.ApplyTrace(out, w, h, steps)
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

func ExampleParseTrace_rotate() {
	pix := []byte{ // 2x2, three planes
		1, 2, 3, 4,
		5, 6, 7, 8,
		9, 10, 11, 12,
	}
	steps, _ := ParseTrace([]byte(`[["rotate",{"angle":90.0,"interpolation":"nearest"}]]`))
	if err := optab.ApplyTrace(pix, 2, 2, steps); err != nil {
		fmt.Println(err)
	}
	fmt.Println(pix)
	// Output: [2 4 1 3 6 8 5 7 10 12 9 11]
}
