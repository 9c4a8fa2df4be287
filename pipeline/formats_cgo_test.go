//go:build cgo

package pipeline

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// The fast path of PNG (pngrows.c, libpng) and WebP (libwebp): formats.c.
// python/tests/test_parity_formats.py holds it to torchvision's
// decode_image over every PNG kind and crops; these tests hold it to the
// reference path, to torchvision's pixels of committed WebP files, and to
// bad input.

const formatsDir = "testdata/formats"

// rawPNG is a PNG of w x h pixels of bpp bytes with color type ct, 8 bits,
// each row's filter byte ft, rows from px: a PNG Go's encoder would not
// write (a filter type of our choosing).
func rawPNG(w, h, ct, bpp int, ft byte, px func(x, y, c int) byte) []byte {
	var raw bytes.Buffer
	for y := range h {
		raw.WriteByte(ft)
		for x := range w {
			for c := range bpp {
				raw.WriteByte(px(x, y, c))
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
	ihdr = append(ihdr, 8, byte(ct), 0, 0, 0)
	return slices.Concat([]byte("\x89PNG\r\n\x1a\n"), chunk("IHDR", ihdr), chunk("IDAT", z.Bytes()), chunk("IEND", nil))
}

// decodeBoth decodes data with tr through the fast path and the reference
// path and returns both samples.
func decodeBoth(t *testing.T, data []byte, tr *transform.Transform) (fast, ref []byte) {
	t.Helper()
	fast, ref = make([]byte, tr.SampleBytes()), make([]byte, tr.SampleBytes())
	df, dr := NewDecoder(), NewDecoder(WithReference(true))
	defer df.Close()
	defer dr.Close()
	if err := df.Decode(data, tr, det.Key{Seed: 1}, fast); err != nil {
		t.Fatalf("fast: %v", err)
	}
	if err := dr.Decode(data, tr, det.Key{Seed: 1}, ref); err != nil {
		t.Fatalf("reference: %v", err)
	}
	return fast, ref
}

// TestPNGFastMatchesReference: the decoded pixels of every PNG kind Go
// writes (RGB, RGBA, gray, 16-bit, palette: pngrows.c's and libpng's)
// equal the reference path's (Go's image/png), and a crop that stops high
// decodes only the rows it needs.
func TestPNGFastMatchesReference(t *testing.T) {
	rgb16, _ := testRGB16(40, 24)
	alpha, _ := testAlpha(40, 24)
	for name, img := range map[string]image.Image{
		"rgb": testPicture(64, 48), "rgba": alpha, "gray": testGray(40, 24), "rgb16": rgb16, "paletted": testPaletted(40, 24),
	} {
		t.Run(name, func(t *testing.T) {
			data := encodePNG(img)
			b := img.Bounds()
			fast, ref := decodeBoth(t, data, identity(t, b.Dx(), b.Dy()))
			if !bytes.Equal(fast, ref) {
				m, mean := diffStats(fast, ref)
				t.Errorf("fast path differs from the reference: max %v, mean %v", m, mean)
			}
		})
	}
	// Every filter type, RGB and gray+alpha (SSE2 and scalar unfiltering).
	for _, c := range []struct{ ct, bpp int }{{2, 3}, {6, 4}, {0, 1}, {4, 2}} {
		for ft := range byte(5) {
			data := rawPNG(37, 21, c.ct, c.bpp, ft, func(x, y, ch int) byte { return byte(x*7 + y*13 + ch*61 + x*y) })
			fast, ref := decodeBoth(t, data, identity(t, 37, 21))
			if !bytes.Equal(fast, ref) {
				m, mean := diffStats(fast, ref)
				t.Errorf("color type %d, filter %d: fast path differs from the reference: max %v, mean %v", c.ct, ft, m, mean)
			}
		}
	}
	// The top 10 rows of 48: rows below them are never decompressed.
	d := NewDecoder()
	defer d.Close()
	tr := mustTransform(t, transform.HWC, ops.Op{Kind: transform.OpCenterCrop, Size: [2]int{10, 64}})
	out := make([]byte, tr.SampleBytes())
	if err := d.Decode(encodePNG(testPicture(64, 48)), tr, det.Key{}, out); err != nil {
		t.Fatal(err)
	}
	if rows := d.fast.stats().rows; rows >= 48 || rows < 29 {
		t.Errorf("a center crop of rows 19..28 decoded %d rows; want 29 (the rows down to the crop's last)", rows)
	}
}

// TestWebPMatchesTorchvision: lossy, lossy with alpha and lossless with
// alpha WebPs decode to the pixels torchvision's decode_image gave for
// them (the .rgb files beside them, made with the .webp by PIL and
// torchvision 0.29), whole and cropped.
func TestWebPMatchesTorchvision(t *testing.T) {
	for _, name := range []string{"lossy", "lossy-alpha", "lossless-alpha"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(formatsDir, name+".webp"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(formatsDir, name+".rgb"))
			if err != nil {
				t.Fatal(err)
			}
			const w, h = 67, 45
			d := NewDecoder()
			defer d.Close()
			// The whole image, then crops (CenterCrop: rows and columns
			// inside, so that libwebp's crop has edges there).
			for _, s := range [][2]int{{h, w}, {9, 11}, {20, 31}} {
				tr := mustTransform(t, transform.HWC, ops.Op{Kind: transform.OpCenterCrop, Size: s})
				got := make([]byte, tr.SampleBytes())
				if err := d.Decode(data, tr, det.Key{}, got); err != nil {
					t.Fatal(err)
				}
				y0, x0 := d.plan.Views[0].Geom.CY, d.plan.Views[0].Geom.CX
				var exp []byte
				for y := y0; y < y0+s[0]; y++ {
					exp = append(exp, want[3*(y*w+x0):3*(y*w+x0+s[1])]...)
				}
				if !bytes.Equal(got, exp) {
					m, mean := diffStats(got, exp)
					t.Errorf("crop %v: differs from torchvision's pixels: max %v, mean %v", s, m, mean)
				}
			}
		})
	}
}

// TestFormatsBadInput: each bad PNG or WebP is one sample's error, wrapping
// the sentinel and saying what, and the Decoder decodes a good file after.
func TestFormatsBadInput(t *testing.T) {
	good := encodePNG(testPicture(64, 48))
	idat, idatLen := pngChunk(good, "IDAT")
	iend, _ := pngChunk(good, "IEND")
	lossy, err := os.ReadFile(filepath.Join(formatsDir, "lossy.webp"))
	if err != nil {
		t.Fatal(err)
	}
	animated, err := os.ReadFile(filepath.Join(formatsDir, "animated.webp"))
	if err != nil {
		t.Fatal(err)
	}
	badFilter := rawPNG(16, 8, 2, 3, 5, func(x, y, c int) byte { return byte(x + y + c) })
	badZ := slices.Clone(good)
	for i := idat + 8 + idatLen/3; i < idat+8+idatLen/3+8; i++ {
		badZ[i] ^= 0x5A
	}
	binary.BigEndian.PutUint32(badZ[idat+8+idatLen:], crc32.ChecksumIEEE(badZ[idat+4:idat+8+idatLen]))
	cases := []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"png without IEND", good[:iend], errs.Corrupt, "IEND"},
		{"png cut in its data", good[:idat+8+idatLen/2], errs.Corrupt, "png"},
		{"png bad filter type", badFilter, errs.Corrupt, "filter"},
		{"png corrupt deflate stream", badZ, errs.Corrupt, "png"},
		{"webp cut in half", lossy[:len(lossy)/2], errs.Corrupt, "webp"},
		{"webp animated", animated, errs.Unsupported, "animated"},
	}
	d := NewDecoder()
	defer d.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hd, err := parseHeader(c.data)
			if err == nil {
				tr := identity(t, hd.w, hd.h)
				err = d.Decode(c.data, tr, det.Key{}, make([]byte, tr.SampleBytes()))
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v; want %v saying %q", err, c.want, c.msg)
			}
			tr := identity(t, 64, 48)
			if err := d.Decode(good, tr, det.Key{}, make([]byte, tr.SampleBytes())); err != nil {
				t.Fatalf("a good PNG after it: %v", err)
			}
		})
	}
}

// TestFormatsSniffed: the bytes say what a file is, not its name: a PNG
// and a WebP named .JPEG in an ImageFolder make the same samples as under
// their own names.
func TestFormatsSniffed(t *testing.T) {
	lossy, err := os.ReadFile(filepath.Join(formatsDir, "lossy.webp"))
	if err != nil {
		t.Fatal(err)
	}
	pngData := encodePNG(testPicture(64, 48))
	named, honest := t.TempDir(), t.TempDir()
	writeTree(t, named, map[string][]byte{"a/0.JPEG": pngData, "a/1.JPEG": lossy})
	writeTree(t, honest, map[string][]byte{"a/0.png": pngData, "a/1.webp": lossy})
	tr := mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{24, 32}})
	var got [2]Batch
	for i, root := range []string{named, honest} {
		ds, err := dataset.OpenImageFolder(root)
		if err != nil {
			t.Fatal(err)
		}
		e := NewExecutor(1)
		if err := e.Fill(context.Background(), ds, tr, 5, 0, []int64{0, 1}, PadFromBatch, &got[i]); err != nil {
			t.Fatal(err)
		}
		if len(got[i].Errors) > 0 {
			t.Fatalf("%s: %v", root, got[i].Errors)
		}
		e.Close()
		ds.Close()
	}
	if !bytes.Equal(got[0].Data, got[1].Data) {
		t.Error("a PNG and a WebP named .JPEG made other samples than under their own names")
	}
}

// TestExactWholeDecodeIdentity: an image decoded whole at its own size into
// planes (a Mosaic's load_image of a photo already imgsz a side), where
// the resampler's axes are the identity and it copies instead
// (passes.c's axis_identity), is the bytes of the same decode into HWC
// (whose horizontal pass still resamples, at weight one), with and
// without SIMD, on JPEG photos and PNGs of odd sizes; the PNGs are the
// reference path's bytes too.
func TestExactWholeDecodeIdentity(t *testing.T) {
	exactTest(t)
	names, files := fastPhotos(t, 8)
	npng := 0
	for _, wh := range [][2]int{{37, 23}, {1, 1}, {16, 3}, {17, 40}} {
		w, h := wh[0], wh[1]
		files = append(files, rawPNG(w, h, 2, 3, 0, func(x, y, c int) byte { return byte(x*7 + y*13 + c*50) }))
		names = append(names, fmt.Sprintf("rgb %dx%d.png", w, h))
		npng++
	}
	simd, scalar, ref := NewDecoder(), NewDecoder(), NewDecoder(WithReference(true))
	defer simd.Close()
	defer scalar.Close()
	defer ref.Close()
	knobsOf(scalar).SIMDMax = -1
	whole := func(d *Decoder, data []byte, layout transform.Layout) []byte {
		hd, err := d.wholeHeader(data)
		if err != nil {
			t.Fatalf("%v", err)
		}
		out := make([]byte, 3*hd.w*hd.h)
		if layout == transform.CHW {
			if _, err := d.decodeWholeInto(data, &hd, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		d.multi.plan[0] = transform.SamplePlan{Geom: transform.CropResize, SrcW: hd.w, SrcH: hd.h, CW: hd.w, CH: hd.h, OutW: hd.w, OutH: hd.h,
			Interp: transform.InterpBilinear, Antialias: true, Exact: true}
		if err := d.decodeGuarded(data, &hd, d.multi.plan[:], transform.HWC, out, d.multi.off[:]); err != nil {
			t.Fatal(err)
		}
		chw := make([]byte, len(out))
		n := hd.w * hd.h
		for i := range n {
			for c := range 3 {
				chw[c*n+i] = out[3*i+c]
			}
		}
		return chw
	}
	for i, data := range files {
		want := whole(simd, data, transform.HWC)
		for _, d := range []*Decoder{simd, scalar} {
			if got := whole(d, data, transform.CHW); !bytes.Equal(got, want) {
				t.Errorf("%s: planes other than HWC's (MAD %.3f)", names[i], fastMAD(got, want))
			}
		}
		if i >= len(files)-npng {
			if got := whole(ref, data, transform.CHW); !bytes.Equal(got, want) {
				t.Errorf("%s: other bytes than the reference path's (MAD %.3f)", names[i], fastMAD(got, want))
			}
		}
	}
}
