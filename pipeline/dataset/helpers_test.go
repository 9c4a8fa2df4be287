package dataset

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// The datasets' test helpers: the files they write (the pipeline's tests
// have their own copies, which write the same bytes).

// writeTree writes files (slash-separated paths relative to root) under root.
func writeTree(t testing.TB, root string, files map[string][]byte) {
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

// testPicture is a smooth synthetic RGB picture (gradients and a disc):
// every pixel differs from its neighbours.
func testPicture(w, h int) *image.NRGBA {
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

func encodeJPEG(img image.Image, quality int) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: quality}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func encodePNG(img image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func testGray(w, h int) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetGray(x, y, color.Gray{Y: byte(16 + 3*x + 2*y)})
		}
	}
	return img
}

func testPaletted(w, h int) *image.Paletted {
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
