//go:build cgo

package codec

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/internal/jpegenc"
	_ "golang.org/x/image/webp" // ParseHeader reads a WebP's size through image.DecodeConfig
)

// libFiles are JPEGs to bound libjpeg's memory over: the committed photos
// and odd files, and libjpeg's own of every sampling, baseline and
// progressive, small and 2000x1500 (a progressive one's coefficients
// whole: 18 MB at 4:4:4).
func libFiles(t *testing.T) (names []string, files [][]byte) {
	t.Helper()
	for _, glob := range []string{"../../testdata/photos/*/*.jpg", "../../testdata/odd/*.jpg"} {
		paths, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			names, files = append(names, strings.TrimPrefix(p, "../../")), append(files, data)
		}
	}
	if len(files) < 10 {
		t.Fatalf("only %d committed JPEGs found", len(files))
	}
	for _, sz := range [][2]int{{333, 251}, {17, 9}, {2000, 1500}} {
		for _, s := range [][2]int{{1, 1}, {2, 1}, {2, 2}, {1, 2}, {4, 1}} {
			for _, prog := range []bool{false, true} {
				names = append(names, fmt.Sprintf("libjpeg %dx%d %dx%d progressive=%v", sz[0], sz[1], s[0], s[1], prog))
				files = append(files, encodePicture(t, sz[0], sz[1], jpegenc.Options{Quality: 90, HS: s[0], VS: s[1], Progressive: prog}))
			}
		}
	}
	return names, files
}

// TestLibBytesBound: what libjpeg's own allocations held at most (counted
// by memlim.c's wrapped memory manager), decoding each of libFiles whole
// at full scale (its most: no DCT scaling, every row) with fancy and with
// merged upsampling, and transcoding the progressive ones, is within
// Header.LibBytes, the decode capped at it; and for the large
// progressive files not absurdly less (within 1.25x: the coefficients
// are most of it). The ratios are logged.
func TestLibBytesBound(t *testing.T) {
	names, files := libFiles(t)
	s := newScratch(t)
	for i, data := range files {
		hd, err := ParseHeader(data)
		if err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
		if hd.Format != FormatJPEG {
			continue
		}
		if hd.Samp[0] == 0 {
			t.Fatalf("%s: sampling factors not read", names[i])
		}
		bound := hd.LibBytes()
		var peak int64
		for _, merged := range []bool{false, true} {
			ow, oh := max(hd.W/3, 1), max(hd.H/3, 1)
			out := make([]byte, 3*ow*oh)
			s.Set(&Job{SrcW: hd.W, SrcH: hd.H, Comps: hd.Comps, Scaling: ScaleOff, MaxScans: 1000, MaxMemory: bound,
				Knobs: Knobs{Merged: merged}}, []Geometry{whole(hd.W, hd.H, ow, oh, 0, true)}, []int{0}, len(out))
			if err := s.Err(s.Decode(data, out, nil, nil)); err != nil {
				if hd.Comps == 4 && strings.Contains(err.Error(), "olor") { // CMYK: libjpeg refuses the conversion
					continue
				}
				t.Fatalf("%s (merged %v): %v (bound %d)", names[i], merged, err, bound)
			}
			st := s.Stats()
			if st.LibPeak <= 0 || st.LibPeak > bound {
				t.Fatalf("%s (merged %v): libjpeg held %d bytes at most, bound %d", names[i], merged, st.LibPeak, bound)
			}
			peak = max(peak, st.LibPeak)
		}
		if hd.Progressive {
			p := coefsNew()
			rc, why, tp := transcodeToCoefs(data, 1000, bound, nil, p, 1<<30)
			coefsFree(p)
			if rc != tcOK && !strings.Contains(why, "precision") {
				t.Fatalf("%s: transcode: %d %s", names[i], rc, why)
			}
			if tp <= 0 || tp > bound {
				t.Fatalf("%s: the transcode's libjpeg held %d bytes at most, bound %d", names[i], tp, bound)
			}
			peak = max(peak, tp)
		}
		if peak == 0 { // not decoded (CMYK)
			continue
		}
		ratio := float64(bound) / float64(peak)
		t.Logf("%-48s %5dx%-5d prog=%-5v peak %10d bound %10d ratio %.2f", names[i], hd.W, hd.H, hd.Progressive, peak, bound, ratio)
		if hd.Progressive && int64(hd.W)*int64(hd.H) >= 1<<20 && ratio > 1.25 {
			t.Errorf("%s: bound %d is %.2fx what libjpeg held (%d)", names[i], bound, ratio, peak)
		}
	}
}

// TestLibBytesCapped: a progressive file decoded (and transcoded) with
// less than its bound for libjpeg's own memory fails ErrTooLarge before
// libjpeg allocates its coefficients, saying so with the sizes; the
// Scratch decodes the next file as before.
func TestLibBytesCapped(t *testing.T) {
	data := encodePicture(t, 2000, 1500, jpegenc.Options{Quality: 90, HS: 2, VS: 2, Progressive: true})
	hd, err := ParseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	bound := hd.LibBytes()
	s := newScratch(t)
	out := make([]byte, 3*100*75)
	decode := func(limit int64) (error, Stats) {
		s.Set(&Job{SrcW: hd.W, SrcH: hd.H, Comps: hd.Comps, Scaling: ScalePow2, MaxScans: 1000, MaxMemory: limit},
			[]Geometry{whole(hd.W, hd.H, 100, 75, 0, true)}, []int{0}, len(out))
		return s.Err(s.Decode(data, out, nil, nil)), s.Stats()
	}
	err, st := decode(bound / 2)
	if !errors.Is(err, errs.TooLarge) {
		t.Fatalf("capped at %d of its bound %d: %v, want ErrTooLarge", bound/2, bound, err)
	}
	for _, want := range []string{"libjpeg's own scratch", fmt.Sprintf("over the %d reserved", bound/2)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if st.LibPeak > bound/2 {
		t.Errorf("libjpeg held %d bytes, over its cap %d", st.LibPeak, bound/2)
	}
	p := coefsNew()
	rc, why, tp := transcodeToCoefs(data, 1000, bound/2, nil, p, 1<<30)
	coefsFree(p)
	if rc == tcOK || !strings.Contains(why, "libjpeg's own scratch") || tp > bound/2 {
		t.Errorf("transcode capped at %d: %d %q, held %d", bound/2, rc, why, tp)
	}
	if err, st := decode(bound); err != nil || st.LibPeak > bound {
		t.Fatalf("at its bound %d: %v, held %d", bound, err, st.LibPeak)
	}
}

// TestLibBytesCappedFormats: a PNG's decode (pngrows.c with zlib, or
// libpng) and a WebP's decoded rows are capped at the job's MaxMemory:
// given less than they need (an interlaced header claiming 3000x2000,
// whose rows libpng would hold whole; a common RGB PNG, a paletted one
// and a WebP with a few KB), each fails ErrTooLarge naming the bytes it
// would reach and the cap, having held no more than the cap (Stats.LibPeak,
// the decode's own count), and the Scratch then decodes each at its bound
// (Header.LibBytes) as before.
func TestLibBytesCappedFormats(t *testing.T) {
	chunk := func(typ string, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		b = append(append(b, typ...), body...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(make([]byte, 64))
	zw.Close()
	ihdr := binary.BigEndian.AppendUint32(nil, 3000)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 2000)
	ihdr = append(ihdr, 8, 2, 0, 0, 1) // RGB, Adam7
	interlaced := slices.Concat([]byte("\x89PNG\r\n\x1a\n"), chunk("IHDR", ihdr), chunk("IDAT", z.Bytes()), chunk("IEND", nil))
	img := picture(96, 64)
	var rgb, pal bytes.Buffer
	if err := png.Encode(&rgb, img); err != nil {
		t.Fatal(err)
	}
	p := image.NewPaletted(img.Bounds(), color.Palette{color.Black, color.White, color.RGBA{200, 10, 10, 255}})
	draw.Draw(p, p.Bounds(), img, image.Point{}, draw.Src)
	if err := png.Encode(&pal, p); err != nil {
		t.Fatal(err)
	}
	webp, err := os.ReadFile("../testdata/formats/lossy.webp")
	if err != nil {
		t.Fatal(err)
	}
	s := newScratch(t)
	for _, c := range []struct {
		name  string
		data  []byte
		limit int64 // 0: its bound / 4
		fits  bool  // decodes at its bound (the crafted one has no rows)
	}{
		{"interlaced 3000x2000", interlaced, 0, false},
		{"rgb (pngrows.c)", rgb.Bytes(), 16 << 10, true},
		{"paletted (libpng)", pal.Bytes(), 4 << 10, true},
		{"webp", webp, 4 << 10, true},
	} {
		hd, err := ParseHeader(c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bound := hd.LibBytes()
		limit := c.limit
		if limit == 0 {
			limit = bound / 4
		}
		out := make([]byte, 3*32*24)
		decode := func(limit int64) (error, Stats) {
			s.Set(&Job{SrcW: hd.W, SrcH: hd.H, Comps: 3, Scaling: ScaleOff, MaxMemory: limit},
				[]Geometry{whole(hd.W, hd.H, 32, 24, 1, true)}, []int{0}, len(out))
			rc := s.DecodeWebP(c.data, out, nil)
			if hd.Format == FormatPNG {
				rc = s.DecodePNG(c.data, out, nil)
			}
			return s.Err(rc), s.Stats()
		}
		err, st := decode(limit)
		if !errors.Is(err, errs.TooLarge) {
			t.Fatalf("%s capped at %d of its bound %d: %v, want ErrTooLarge", c.name, limit, bound, err)
		}
		t.Logf("%s: %v", c.name, err)
		for _, want := range []string{"the decoder's own memory", fmt.Sprintf("over the %d reserved", limit)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", c.name, err, want)
			}
		}
		if st.LibPeak > limit {
			t.Errorf("%s: held %d bytes, over its cap %d", c.name, st.LibPeak, limit)
		}
		if err, st := decode(bound); c.fits && (err != nil || st.LibPeak > bound) {
			t.Errorf("%s at its bound %d: %v, held %d", c.name, bound, err, st.LibPeak)
		}
	}
}

// TestPNGManyChunksBounded: a PNG whose image data follows thousands of
// ancillary chunks (unknown ones, text, compressed text, a color profile,
// and a private one libpng would keep if asked) decodes within its bound
// through libpng (paletted) and pngrows.c (RGB), what the decode held
// (Stats.LibPeak) no more than for the same image without them: no
// chunk's data is kept.
func TestPNGManyChunksBounded(t *testing.T) {
	chunk := func(typ string, body []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		b = append(append(b, typ...), body...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(bytes.Repeat([]byte("compressed text "), 4096))
	zw.Close()
	var junk []byte
	for i := range 4000 {
		switch i % 4 {
		case 0:
			junk = append(junk, chunk("abCd", bytes.Repeat([]byte{byte(i)}, 1000))...)
		case 1:
			junk = append(junk, chunk("tEXt", append([]byte("Comment\x00"), bytes.Repeat([]byte("x"), 1000)...))...)
		case 2:
			junk = append(junk, chunk("zTXt", append([]byte("Comment\x00\x00"), z.Bytes()...))...)
		case 3:
			junk = append(junk, chunk("iCCP", append([]byte("icc\x00\x00"), z.Bytes()...))...)
		}
	}
	img := picture(96, 64)
	var rgb, pal bytes.Buffer
	if err := png.Encode(&rgb, img); err != nil {
		t.Fatal(err)
	}
	p := image.NewPaletted(img.Bounds(), color.Palette{color.Black, color.White, color.RGBA{200, 10, 10, 255}})
	draw.Draw(p, p.Bounds(), img, image.Point{}, draw.Src)
	if err := png.Encode(&pal, p); err != nil {
		t.Fatal(err)
	}
	s := newScratch(t)
	for name, plain := range map[string][]byte{"rgb (pngrows.c)": rgb.Bytes(), "paletted (libpng)": pal.Bytes()} {
		// The chunks go after IHDR (and PLTE), before the first IDAT.
		at := bytes.Index(plain, []byte("IDAT")) - 4
		crafted := slices.Concat(plain[:at], junk, plain[at:])
		hd, err := ParseHeader(crafted)
		if err != nil {
			t.Fatal(err)
		}
		bound := hd.LibBytes()
		var held [2]int64
		for i, data := range [][]byte{plain, crafted} {
			out := make([]byte, 3*32*24)
			s.Set(&Job{SrcW: hd.W, SrcH: hd.H, Comps: 3, Scaling: ScaleOff, MaxMemory: bound},
				[]Geometry{whole(hd.W, hd.H, 32, 24, 1, true)}, []int{0}, len(out))
			if err := s.Err(s.DecodePNG(data, out, nil)); err != nil {
				t.Fatalf("%s (%d bytes): %v", name, len(data), err)
			}
			held[i] = s.Stats().LibPeak
		}
		t.Logf("%s: %d bytes of chunks; held %d bytes, %d without them, bound %d", name, len(junk), held[1], held[0], bound)
		if held[1] > held[0] || held[1] > bound {
			t.Errorf("%s: with %d bytes of chunks the decode held %d bytes, %d without them (bound %d)", name, len(junk), held[1], held[0], bound)
		}
	}
}
