//go:build linux && cgo

package heappeak_test

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/internal/heappeak"
	"github.com/stoker-dev/stoker/pipeline/internal/testkit"
	_ "golang.org/x/image/webp" // ParseHeader reads a WebP's size through image.DecodeConfig
)

// exactTest skips t under -race: a test that makes its files in Go
// (image/png's deflate, pixel loops: most of its time, ten times slower
// under -race) and counts the C heap on one goroutine, where the race
// detector has nothing to find. make test-go runs it once more without
// -race (-run '^TestExact').
func exactTest(t *testing.T) {
	t.Helper()
	testkit.Exact(t)
}

// photos are the committed photos decoded (RGB), and a 2000x1500
// picture of them scaled, so that the bound is held at a large size too.
func photos(t *testing.T) (names []string, imgs []*image.RGBA) {
	t.Helper()
	paths, err := filepath.Glob("../../../testdata/photos/*/0000[0-9][0-9].jpg")
	if err != nil || len(paths) < 10 {
		t.Fatalf("committed photos: %d found, %v", len(paths), err)
	}
	for _, p := range paths[:6] {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := jpeg.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		b := img.Bounds()
		rgba := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
		draw.Draw(rgba, rgba.Bounds(), img, b.Min, draw.Src)
		names, imgs = append(names, filepath.Base(filepath.Dir(p))), append(imgs, rgba)
	}
	src := imgs[0]
	big := image.NewRGBA(image.Rect(0, 0, 2000, 1500))
	sw, sh := src.Bounds().Dx(), src.Bounds().Dy()
	for y := range 1500 {
		row := src.Pix[(y*sh/1500)*src.Stride:]
		out := big.Pix[y*big.Stride:]
		for x := range 2000 {
			copy(out[4*x:4*x+4], row[4*(x*sw/2000):])
		}
	}
	return append(names, "2000x1500"), append(imgs, big)
}

// adam7PNG is img as an 8-bit RGB PNG, Adam7-interlaced (Go's encoder
// writes none), every row unfiltered.
func adam7PNG(img *image.RGBA) []byte {
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	var raw bytes.Buffer
	for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		if p[0] >= w || p[1] >= h {
			continue
		}
		for y := p[1]; y < h; y += p[3] {
			raw.WriteByte(0)
			for x := p[0]; x < w; x += p[2] {
				o := img.PixOffset(x, y)
				raw.Write(img.Pix[o : o+3])
			}
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(raw.Bytes())
	zw.Close()
	chunk := func(typ string, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		b = append(append(b, typ...), body...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 2, 0, 0, 1)
	return slices.Concat([]byte("\x89PNG\r\n\x1a\n"), chunk("IHDR", ihdr), chunk("IDAT", z.Bytes()), chunk("IEND", nil))
}

// kinds are the files each photo is written as: PNGs of every kind
// (pngrows.c's and libpng's) and WebPs lossy and lossless, with and
// without alpha.
func kinds(t *testing.T, img *image.RGBA) (names []string, files [][]byte) {
	t.Helper()
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	add := func(name string, data []byte, err error) {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		names, files = append(names, name), append(files, data)
	}
	enc := func(m image.Image) ([]byte, error) {
		var b bytes.Buffer
		err := png.Encode(&b, m)
		return b.Bytes(), err
	}
	rgb := image.NewRGBA(img.Bounds()) // opaque: Go writes RGB
	copy(rgb.Pix, img.Pix)
	alpha := image.NewNRGBA(img.Bounds())
	gray := image.NewGray(img.Bounds())
	rgb16 := image.NewRGBA64(img.Bounds())
	pal := image.NewPaletted(img.Bounds(), color.Palette{})
	for i := range 256 {
		pal.Palette = append(pal.Palette, color.RGBA{uint8(i), uint8(255 - i), uint8(i * 7), 255})
	}
	pix3, pix4 := make([]byte, 3*w*h), make([]byte, 4*w*h)
	for y := range h {
		for x := range w {
			i := y*w + x
			c := img.Pix[y*img.Stride+4*x : y*img.Stride+4*x+3]
			a := uint8(x*255/max(w-1, 1)) | 1
			copy(alpha.Pix[4*i:], c)
			alpha.Pix[4*i+3] = a
			gray.Pix[i] = c[1]
			for k := range 3 {
				rgb16.Pix[8*i+2*k], rgb16.Pix[8*i+2*k+1] = c[k], c[k]^0x5a
			}
			rgb16.Pix[8*i+6], rgb16.Pix[8*i+7] = 0xff, 0xff
			pal.Pix[i] = c[0]
			copy(pix3[3*i:], c)
			copy(pix4[4*i:], c)
			pix4[4*i+3] = a
		}
	}
	for _, m := range []struct {
		name string
		img  image.Image
	}{{"png rgb", rgb}, {"png rgba", alpha}, {"png gray", gray}, {"png rgb16", rgb16}, {"png paletted", pal}} {
		data, err := enc(m.img)
		add(m.name, data, err)
	}
	add("png interlaced", adam7PNG(img), nil)
	for _, c := range []struct {
		name     string
		pix      []byte
		nc       int
		lossless bool
	}{{"webp lossy", pix3, 3, false}, {"webp lossy alpha", pix4, 4, false}, {"webp lossless", pix3, 3, true}, {"webp lossless alpha", pix4, 4, true}} {
		data, err := heappeak.EncodeWebP(c.pix, w, h, c.nc, 85, c.lossless)
		add(c.name, data, err)
	}
	return names, files
}

// whole is the geometry of a view of the whole w x h source at outW x
// outH pixels (antialiased bilinear).
func whole(w, h, outW, outH int) codec.Geometry {
	return codec.Geometry{
		Box:  codec.Box{W: float64(w), H: float64(h)},
		Clip: codec.Clip{X1: w, Y1: h},
		SX:   codec.Span{In: w, Out: outW}, SY: codec.Span{In: h, Out: outH},
		OutW: outW, OutH: outH, Interp: 1, Antialias: true,
	}
}

// TestExactLibBytesBoundFormats: what libpng (and pngrows.c with zlib) and
// libwebp took of the C heap while they decoded each photo as every PNG
// and WebP kind, whole, at a third of its size and at 1/50 (the
// resampler's widest taps: each row's slack), is within
// Header.LibBytes, the bound the memory budget reserves: measured by
// glibc's malloc replaced in this test binary (heap.c), the resampler's
// own buffers grown by a first decode of the same job beforehand. For a
// PNG, the decode's own count (Stats.LibPeak, which the decode is capped
// at) is within the bound too and within what the heap saw. The ratios
// are logged.
func TestExactLibBytesBoundFormats(t *testing.T) {
	exactTest(t)
	pnames, imgs := photos(t)
	s, err := codec.NewScratch()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Free()
	worst := map[string]float64{}
	for i, img := range imgs {
		names, files := kinds(t, img)
		for k, data := range files {
			name := pnames[i] + " " + names[k]
			hd, err := codec.ParseHeader(data)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			bound := hd.LibBytes()
			var peak, counted int64
			for _, div := range []int{3, 50} {
				ow, oh := max(hd.W/div, 1), max(hd.H/div, 1)
				out := make([]byte, 3*ow*oh)
				s.Set(&codec.Job{SrcW: hd.W, SrcH: hd.H, Comps: 3, Scaling: codec.ScaleOff, MaxMemory: bound},
					[]codec.Geometry{whole(hd.W, hd.H, ow, oh)}, []int{0}, len(out))
				decode := func() codec.Code {
					if hd.Format == codec.FormatPNG {
						return s.DecodePNG(data, out, nil)
					}
					return s.DecodeWebP(data, out, nil)
				}
				if err := s.Err(decode()); err != nil { // the resampler's buffers grown
					t.Fatalf("%s at 1/%d: %v (bound %d)", name, div, err, bound)
				}
				var rc codec.Code
				p, _ := heappeak.Peak(func() { rc = decode() })
				if err := s.Err(rc); err != nil {
					t.Fatalf("%s at 1/%d: %v", name, div, err)
				}
				peak = max(peak, p)
				if hd.Format == codec.FormatPNG {
					lp := s.Stats().LibPeak
					if lp <= 0 || lp > bound {
						t.Errorf("%s at 1/%d: the decode counted %d bytes at most, bound %d", name, div, lp, bound)
					}
					counted = max(counted, lp)
				}
			}
			if peak <= 0 || peak > bound {
				t.Errorf("%s %dx%d: the C heap held %d bytes at most, over its bound %d", name, hd.W, hd.H, peak, bound)
			}
			ratio := float64(bound) / float64(peak)
			kind := names[k]
			if hd.W*hd.H >= 1<<20 {
				kind += " (large)"
				// Where the image's own bytes are most of it, the bound
				// is not absurdly more than was held.
				if lim := map[string]float64{"png interlaced": 1.1, "webp lossy alpha": 1.3, "webp lossless": 1.6}[names[k]]; lim > 0 && ratio > lim {
					t.Errorf("%s: bound %d is %.2fx what the C heap held (%d)", name, bound, ratio, peak)
				}
			}
			worst[kind] = max(worst[kind], ratio)
			t.Logf("%-32s %5dx%-5d heap peak %10d counted %10d bound %10d ratio %.2f", name, hd.W, hd.H, peak, counted, bound, ratio)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(worst)) {
		t.Logf("%-28s bound/peak at most %.2f", k, worst[k])
	}
}

// TestPeakCounts: the replaced malloc counts what a thread takes and
// gives back, and nothing on other threads.
func TestPeakCounts(t *testing.T) {
	p, n := heappeak.Peak(func() { _, _ = heappeak.EncodeWebP(make([]byte, 3*64*64), 64, 64, 3, 80, false) })
	if p < 64*64 || n == 0 {
		t.Fatalf("libwebp's encode of 64x64 took %d bytes in %d blocks: the count is not working", p, n)
	}
	p, n = heappeak.Peak(func() {})
	if p != 0 || n != 0 {
		t.Fatalf("nothing run: %d bytes in %d blocks", p, n)
	}
}
