package cv

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// TestExactPerspectiveFootprint: the warp of a source whose pixels outside
// PerspectiveFootprint's rectangle are noise is byte for byte the warp of
// the source, for random draws of every parameter (perspective, large
// rotations and shears, scales down to 0.01 and up, translations that
// leave the source), on sources small enough that the border matters and
// of a mosaic's size; and the rectangle is smaller than the source for
// most of ultralytics' default draws.
func TestExactPerspectiveFootprint(t *testing.T) {
	exactTest(t)
	r := rand.New(rand.NewPCG(3, 4))
	u := func(a, b float64) float64 { return a + (b-a)*r.Float64() }
	clipped, fallback, tight := 0, 0, 0
	for i := range 600 {
		sw, sh := 1+r.IntN(90), 1+r.IntN(90)
		dw, dh := 1+r.IntN(70), 1+r.IntN(70)
		if i%5 == 0 {
			sw, sh, dw, dh = 320, 320, 160, 160
		}
		var p PerspectiveParams
		persp := i%2 == 1
		wild := i%3 == 0
		if persp {
			p.PX, p.PY = u(-0.001, 0.001), u(-0.001, 0.001)
			if wild {
				p.PX, p.PY = u(-0.01, 0.01), u(-0.01, 0.01)
			}
		}
		p.Scale = u(0.5, 1.5)
		p.TX, p.TY = u(0.4, 0.6), u(0.4, 0.6)
		if wild {
			p.Angle, p.Scale = u(-360, 360), u(0.01, 1.99)
			p.ShearX, p.ShearY = u(-80, 80), u(-80, 80)
			p.TX, p.TY = u(-1, 2), u(-1, 2)
		} else if i%4 == 0 {
			p.Angle, p.ShearX, p.ShearY = u(-10, 10), u(-5, 5), u(-5, 5)
		}
		m := PerspectiveMatrix(p, sw, sh, dw, dh)
		src := kernels.Planes{Pix: make([]byte, 3*sw*sh), W: sw, H: sh}
		for j := range src.Pix {
			src.Pix[j] = uint8(r.Uint32())
		}
		want := kernels.Planes{Pix: make([]byte, 3*dw*dh), W: dw, H: dh}
		PerspectiveImage(want, src, m, persp)
		rc, ok := PerspectiveFootprint(m, persp, sw, sh, dw, dh)
		if !ok {
			fallback++
			continue
		}
		if rc.X0 < 0 || rc.Y0 < 0 || rc.X1 > sw || rc.Y1 > sh || rc.X0 > rc.X1 || rc.Y0 > rc.Y1 {
			t.Fatalf("draw %d: %+v outside %dx%d", i, rc, sw, sh)
		}
		if (rc.X1-rc.X0)*(rc.Y1-rc.Y0) < sw*sh {
			clipped++
			if !wild && sw == 320 {
				tight++
			}
		}
		noisy := kernels.Planes{Pix: append([]byte{}, src.Pix...), W: sw, H: sh}
		for c := range 3 {
			for y := range sh {
				for x := range sw {
					if x < rc.X0 || x >= rc.X1 || y < rc.Y0 || y >= rc.Y1 {
						noisy.Pix[(c*sh+y)*sw+x] ^= uint8(1 + r.IntN(255))
					}
				}
			}
		}
		got := kernels.Planes{Pix: make([]byte, 3*dw*dh), W: dw, H: dh}
		PerspectiveImage(got, noisy, m, persp)
		if !bytes.Equal(got.Pix, want.Pix) {
			t.Fatalf("draw %d (%+v, %dx%d to %dx%d, perspective %v): the warp reads outside %+v", i, p, sw, sh, dw, dh, persp, rc)
		}
	}
	t.Logf("%d of 600 clipped, %d not bounded, %d of the mosaic-sized default draws clipped", clipped, fallback, tight)
	if fallback > 150 || tight < 40 {
		t.Errorf("%d draws not bounded, %d mosaic-sized default draws clipped", fallback, tight)
	}
}

// naiveMosaic is Mosaic.apply_image pixel by pixel: a cs x cs canvas of
// 114, then each tile's pixels in order, those outside the canvas left out.
func naiveMosaic(imgs []kernels.Planes, tiles []Tile, cs int) kernels.Planes {
	dst := kernels.Planes{Pix: bytes.Repeat([]byte{114}, 3*cs*cs), W: cs, H: cs}
	for i, t := range tiles {
		src := imgs[i]
		for c := range 3 {
			for y := range t.H {
				for x := range t.W {
					dx, dy := t.X1a+x, t.Y1a+y
					if dx >= 0 && dy >= 0 && dx < cs && dy < cs {
						dst.Pix[(c*cs+dy)*cs+dx] = src.Pix[(c*src.H+t.Y1b+y)*src.W+t.X1b+x]
					}
				}
			}
		}
	}
	return dst
}

// TestExactMosaicImageIn: MosaicImage is the canvas of 114 with the tiles
// copied in, in order; within its rectangle MosaicImageIn is that canvas
// and outside it leaves the canvas as it was, for layouts of 4 and 9.
func TestExactMosaicImageIn(t *testing.T) {
	exactTest(t)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 200 {
		n, s := 4, 8+r.IntN(40)
		if i%2 == 1 {
			n = 9
		}
		imgs := make([]kernels.Planes, n)
		sizes := make([][2]int, n)
		for j := range imgs {
			w, h := 1+r.IntN(s), 1+r.IntN(s)
			if r.IntN(2) == 0 {
				w = s
			} else {
				h = s
			}
			imgs[j] = kernels.Planes{Pix: make([]byte, 3*w*h), W: w, H: h}
			for k := range imgs[j].Pix {
				imgs[j].Pix[k] = uint8(r.Uint32())
			}
			sizes[j] = [2]int{w, h}
		}
		xc, yc := s/2+r.IntN(s+1), s/2+r.IntN(s+1)
		tiles, err := MosaicLayout(n, s, xc, yc, sizes)
		if err != nil {
			t.Fatal(err)
		}
		cs := MosaicSize(s)
		full := naiveMosaic(imgs, tiles, cs)
		whole := kernels.Planes{Pix: make([]byte, 3*cs*cs), W: cs, H: cs}
		MosaicImage(whole, imgs, tiles)
		if !bytes.Equal(whole.Pix, full.Pix) {
			t.Fatalf("layout %d (n %d, s %d): MosaicImage differs from the canvas of 114 with the tiles copied in", i, n, s)
		}
		rc := Rect{r.IntN(cs+4) - 2, r.IntN(cs+4) - 2, r.IntN(cs+4) - 2, r.IntN(cs+4) - 2}
		if i%10 == 0 {
			rc = Rect{-5, -5, cs + 5, cs + 5}
		}
		part := kernels.Planes{Pix: make([]byte, 3*cs*cs), W: cs, H: cs}
		for k := range part.Pix {
			part.Pix[k] = uint8(r.Uint32())
		}
		before := append([]byte{}, part.Pix...)
		MosaicImageIn(part, imgs, tiles, rc)
		for c := range 3 {
			for y := range cs {
				for x := range cs {
					o := (c*cs+y)*cs + x
					in := x >= rc.X0 && x < rc.X1 && y >= rc.Y0 && y < rc.Y1
					if in && part.Pix[o] != full.Pix[o] || !in && part.Pix[o] != before[o] {
						t.Fatalf("layout %d (n %d, s %d, %+v): pixel (%d, %d, %d) in %v", i, n, s, rc, x, y, c, in)
					}
				}
			}
		}
	}
}
