// Package testfiles writes the files the pipeline's tests and its rooms'
// tests decode: synthetic pictures, their JPEG and PNG bytes, directory
// trees and WebDataset tar shards. One copy, so the packages' tests write
// the same bytes.
package testfiles

import (
	"archive/tar"
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// Member is a tar shard's member: a file, or a directory when Data is nil.
type Member struct {
	Name string
	Data []byte
}

// WriteShard writes a tar shard; a member with nil data is a directory.
func WriteShard(t testing.TB, path string, members []Member, format ...tar.Format) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		hd := &tar.Header{Name: m.Name, Mode: 0o644, Size: int64(len(m.Data)), Typeflag: tar.TypeReg}
		if len(format) > 0 {
			hd.Format = format[0]
		}
		if m.Data == nil {
			hd.Typeflag, hd.Mode, hd.Name = tar.TypeDir, 0o755, m.Name+"/"
		}
		if err := tw.WriteHeader(hd); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(m.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteTree writes files (slash-separated paths relative to root) under root.
func WriteTree(t testing.TB, root string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Picture is a smooth synthetic RGB picture (gradients and a disc):
// every pixel differs from its neighbours.
func Picture(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			dx, dy := x-w/2, y-h/2
			disc := byte(0)
			if dx*dx+dy*dy < w*h/8 {
				disc = 60
			}
			img.SetNRGBA(x, y, color.NRGBA{
				R: byte(20 + 200*x/max(w-1, 1)),
				G: byte(20 + 160*y/max(h-1, 1) + int(disc)/2),
				B: byte(200 - 150*x/max(w-1, 1) + int(disc)/3),
				A: 255,
			})
		}
	}
	return img
}

// Gray is a gray ramp picture.
func Gray(w, h int) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetGray(x, y, color.Gray{Y: byte(16 + 3*x + 2*y)})
		}
	}
	return img
}

// Paletted is a 16-colour paletted picture of 4x4 tiles.
func Paletted(w, h int) *image.Paletted {
	pal := color.Palette{}
	for i := range 16 {
		pal = append(pal, color.NRGBA{R: byte(i * 16), G: byte(255 - i*15), B: byte(i * i), A: 255})
	}
	img := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	for y := range h {
		for x := range w {
			img.SetColorIndex(x, y, uint8((x/4+y/4)%16))
		}
	}
	return img
}

// JPEG is img in Go's baseline JPEG encoder at quality.
func JPEG(img image.Image, quality int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: quality}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// PNG is img in Go's PNG encoder.
func PNG(img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// Noise is a w x h image (three planes, CHW) of pseudo-random bytes from
// seed (pipeline/det's generator): the same on every machine.
func Noise(w, h int, seed uint64) []byte {
	r := det.Seeded(seed)
	pix := make([]byte, 3*w*h)
	for i := range pix {
		pix[i] = byte(r.Uint64() >> 56)
	}
	return pix
}

// SmoothNoise is w x h smooth-ish noise, CHW: a gradient plus noise, so
// that every photometric op changes something.
func SmoothNoise(w, h int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 35))
	pix := make([]byte, 3*w*h)
	for c := range 3 {
		for y := range h {
			for x := range w {
				v := 40 + 50*c + (x*97+y*61)%120 + r.IntN(40)
				pix[(c*h+y)*w+x] = byte(v)
			}
		}
	}
	return pix
}

// GeomSizes are image sizes for the geometric kernels' tests: single rows
// and columns, odd sizes, widths around the C version's groups of eight.
var GeomSizes = [][2]int{{1, 1}, {1, 7}, {7, 1}, {2, 2}, {3, 5}, {8, 3}, {9, 4}, {17, 16}, {31, 33}, {97, 131}}
