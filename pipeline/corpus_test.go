package pipeline

import (
	"bytes"
	"encoding/binary"
	"flag"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// The bad-input corpus lives in ../testdata/bad (files every decoder must
// refuse) and ../testdata/odd (valid files in unusual formats). It is made
// by this file, deterministically, and committed; regenerate it with
//
//	go test ./pipeline -run TestGenerateCorpus -gen-corpus
//
// Without the flag, TestGenerateCorpus checks that the committed files are
// what the generator makes (like a checkgenerate step).
var genCorpus = flag.Bool("gen-corpus", false, "rewrite ../testdata/bad and ../testdata/odd")

const corpusDir = "../testdata"

// corpusFile is one file of the corpus.
type corpusFile struct {
	path string // under corpusDir: "bad/…" or "odd/…"
	data []byte
	// bad files: the sentinel the error must wrap, and a substring of
	// its message when it matters.
	want    error
	wantMsg string
	// odd files: what the file decodes to, and how close the decode must
	// be: every channel of every pixel within maxDiff, the mean absolute
	// difference within meanDiff.
	img               image.Image
	maxDiff, meanDiff float64
}

// testRGB16 has different low bytes per pixel, so a decoder that mixes them
// into the 8-bit result shows; its 8-bit counterpart is the high bytes.
func testRGB16(w, h int) (*image.RGBA64, *image.NRGBA) {
	img := image.NewRGBA64(image.Rect(0, 0, w, h))
	hi := image.NewNRGBA(img.Rect)
	for y := range h {
		for x := range w {
			r, g, b := uint16(x*1031+y*7), uint16(y*977+x*13), uint16((x+y)*509+0xff)
			img.SetRGBA64(x, y, color.RGBA64{R: r, G: g, B: b, A: 0xffff})
			hi.SetNRGBA(x, y, color.NRGBA{R: byte(r >> 8), G: byte(g >> 8), B: byte(b >> 8), A: 255})
		}
	}
	return img, hi
}

// testAlpha varies alpha across the image, down to fully transparent, with
// colors that stay put: decoding must drop alpha, not premultiply by it.
func testAlpha(w, h int) (*image.NRGBA, *image.NRGBA) {
	img := testPicture(w, h)
	for y := range h {
		for x := range w {
			img.Pix[img.PixOffset(x, y)+3] = byte(255 * x / (w - 1))
		}
	}
	rgb := image.NewNRGBA(img.Rect)
	copy(rgb.Pix, img.Pix)
	for i := 3; i < len(rgb.Pix); i += 4 {
		rgb.Pix[i] = 255
	}
	return img, rgb
}

// cmykBlocks is the CMYK test image, four blocks by two, one flat color
// each (cyan, magenta, yellow, black, and mixes).
var cmykBlocks = [2][4]color.CMYK{
	{{C: 255}, {M: 255}, {Y: 255}, {K: 255}},
	{{C: 40, M: 200, Y: 10, K: 30}, {C: 128, M: 128, Y: 128}, {K: 100}, {}},
}

func cmykJPEG() (flatJPEG, *image.NRGBA) {
	spec := flatJPEG{w: 32, h: 16, comps: 4, adobe: true, value: func(c, bx, by int) byte {
		k := cmykBlocks[by][bx]
		return [4]byte{k.C, k.M, k.Y, k.K}[c]
	}}
	want := image.NewNRGBA(image.Rect(0, 0, 32, 16))
	for y := range 16 {
		for x := range 32 {
			k := cmykBlocks[y/8][x/8]
			r, g, b := color.CMYKToRGB(k.C, k.M, k.Y, k.K)
			want.SetNRGBA(x, y, color.NRGBA{R: r, G: g, B: b, A: 255})
		}
	}
	return spec, want
}

// progressiveJPEG is a gray progressive JPEG of 4x2 flat blocks in scans
// scans (at least 2: DC, then AC).
func progressiveJPEG(scans int) (flatJPEG, *image.NRGBA) {
	value := func(c, bx, by int) byte { return byte(30 + 25*bx + 100*by) }
	spec := flatJPEG{w: 32, h: 16, comps: 1, progressive: true, scans: scans, value: value}
	want := image.NewNRGBA(image.Rect(0, 0, 32, 16))
	for y := range 16 {
		for x := range 32 {
			v := value(0, x/8, y/8)
			want.SetNRGBA(x, y, color.NRGBA{R: v, G: v, B: v, A: 255})
		}
	}
	return spec, want
}

// jpegMarker returns the offset of the first marker m (its 0xFF) in a JPEG
// written by Go's encoder.
func jpegMarker(data []byte, m byte) int {
	i := bytes.Index(data, []byte{0xFF, m})
	if i < 0 {
		panic("marker not found")
	}
	return i
}

// pngChunk returns the offset of the first chunk of type typ (its length
// field) and its data length.
func pngChunk(data []byte, typ string) (off, n int) {
	for p := 8; p+8 <= len(data); {
		n := int(binary.BigEndian.Uint32(data[p:]))
		if string(data[p+4:p+8]) == typ {
			return p, n
		}
		p += 12 + n
	}
	panic("chunk not found")
}

// setPNGSize rewrites IHDR's size and fixes its CRC, so only the size is
// wrong.
func setPNGSize(data []byte, w, h uint32) []byte {
	d := slices.Clone(data)
	binary.BigEndian.PutUint32(d[16:], w)
	binary.BigEndian.PutUint32(d[20:], h)
	binary.BigEndian.PutUint32(d[29:], crc32.ChecksumIEEE(d[12:29]))
	return d
}

// hiddenSOF is a JPEG whose "\xFF\x00" after SOI a decoder takes for
// extraneous bytes, scanning on to a 60000x60000 frame header, followed by
// a COM segment whose body holds a 10x10 four-component frame header. A
// header parser that read "\xFF\x00" as a marker with a length would skip
// the big frame header and see only the small one: a 3.6-gigapixel image
// past the pixel budget, into Go's decoder (the reference path, which
// takes every four-component JPEG).
func hiddenSOF() []byte {
	d := []byte{0xFF, 0xD8,
		0xFF, 0x00, 0x00, 0x12, // "stuffed zero", or a marker with length 18
		0xFF, 0xC0, 0x00, 0x0B, 8, 0xEA, 0x60, 0xEA, 0x60, 1, 1, 0x11, 0, // 60000x60000, gray
		0xFF, 0xFE, 0x00, 0xFF, // COM of 255 bytes; its length's 0xFF is fill before...
		0xC0, 0x00, 0x14, 8, 0, 10, 0, 10, 4, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0, 4, 0x11, 0} // 10x10, CMYK
	d = append(d, make([]byte, 21+255-len(d))...)
	d = append(d, 0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 63, 0) // SOS for the 60000x60000 frame
	return append(d, 0, 0, 0, 0, 0xFF, 0xD9)
}

func corpusFiles() []corpusFile {
	jpg := encodeJPEG(testPicture(64, 48), 90)
	pngData := encodePNG(testPicture(64, 48))
	sos := jpegMarker(jpg, 0xDA)
	sosEnd := sos + 2 + int(binary.BigEndian.Uint16(jpg[sos+2:]))
	sof := jpegMarker(jpg, 0xC0)
	sofLen := 2 + int(binary.BigEndian.Uint16(jpg[sof+2:]))

	huge := slices.Clone(jpg)
	binary.BigEndian.PutUint16(huge[sof+5:], 60000) // height
	binary.BigEndian.PutUint16(huge[sof+7:], 60000) // width
	prec12 := slices.Clone(jpg)
	prec12[sof+4] = 12
	// Flip a run of scan bytes in the middle, then put a marker where the
	// entropy-coded data must not have one, so every decoder notices.
	corrupt := slices.Clone(jpg)
	mid := sosEnd + (len(jpg)-sosEnd)/2
	for i := mid - 16; i < mid+16; i++ {
		corrupt[i] ^= 0xA5
	}
	corrupt[mid], corrupt[mid+1] = 0xFF, 0x12
	noSOF := slices.Concat(jpg[:sof], jpg[sof+sofLen:])

	badCRC := slices.Clone(pngData)
	idat, idatLen := pngChunk(pngData, "IDAT")
	badCRC[idat+8+idatLen] ^= 0xFF // first byte of IDAT's CRC

	var gifBuf bytes.Buffer
	if err := gif.Encode(&gifBuf, testPaletted(32, 32), nil); err != nil {
		panic(err)
	}

	many, _ := progressiveJPEG(150)
	manyCOM := many
	// A COM segment holding an EOI marker's bytes: a scan counter that scans
	// bytes instead of walking segments stops there and counts no scans.
	manyCOM.com = []byte("stop \xFF\xD9 here")
	twoComps := flatJPEG{w: 8, h: 8, comps: 2, value: func(c, bx, by int) byte { return 128 }}

	cmyk, cmykWant := cmykJPEG()
	prog, progWant := progressiveJPEG(50)
	rgb16, rgb16Want := testRGB16(40, 24)
	alpha, alphaWant := testAlpha(40, 24)
	pal := testPaletted(40, 24)

	return []corpusFile{
		{path: "bad/empty.jpg", data: []byte{}, want: errs.Corrupt},
		{path: "bad/text.jpg", data: []byte("this is a text file, not a JPEG\n"), want: errs.Corrupt},
		{path: "bad/soi-only.jpg", data: jpg[:3], want: errs.Corrupt},
		{path: "bad/trunc-in-dqt.jpg", data: jpg[:20], want: errs.Corrupt},
		{path: "bad/trunc-in-dht.jpg", data: jpg[:jpegMarker(jpg, 0xC4)+10], want: errs.Corrupt},
		{path: "bad/trunc-scan-early.jpg", data: jpg[:sosEnd+16], want: errs.Corrupt},
		{path: "bad/trunc-half.jpg", data: jpg[:len(jpg)/2], want: errs.Corrupt},
		{path: "bad/trunc-before-eoi.jpg", data: jpg[:len(jpg)-40], want: errs.Corrupt},
		{path: "bad/corrupt-scan.jpg", data: corrupt, want: errs.Corrupt},
		{path: "bad/no-sof.jpg", data: noSOF, want: errs.Corrupt},
		{path: "bad/ff00-hides-60000x60000-sof.jpg", data: hiddenSOF(), want: errs.Corrupt, wantMsg: "0xFF00"},
		{path: "bad/huge-60000x60000.jpg", data: huge, want: errs.TooLarge, wantMsg: "budget"},
		{path: "bad/precision-12.jpg", data: prec12, want: errs.Unsupported},
		{path: "bad/two-components.jpg", data: twoComps.encode(), want: errs.Unsupported},
		{path: "bad/progressive-150-scans.jpg", data: many.encode(), want: errs.TooLarge, wantMsg: "scans"},
		{path: "bad/progressive-150-scans-com-eoi.jpg", data: manyCOM.encode(), want: errs.TooLarge, wantMsg: "scans"},
		{path: "bad/png-bad-crc.png", data: badCRC, want: errs.Corrupt},
		{path: "bad/png-trunc-idat.png", data: pngData[:idat+8+idatLen/2], want: errs.Corrupt},
		{path: "bad/png-trunc-ihdr.png", data: pngData[:20], want: errs.Corrupt},
		{path: "bad/png-huge-100000x100000.png", data: setPNGSize(pngData, 100000, 100000), want: errs.TooLarge, wantMsg: "budget"},
		{path: "bad/png-zero-width.png", data: setPNGSize(pngData, 0, 48), want: errs.Corrupt},
		{path: "bad/gif-trunc.gif", data: gifBuf.Bytes()[:gifBuf.Len()/2], want: errs.Corrupt},

		{path: "odd/baseline.jpg", data: jpg, img: testPicture(64, 48), maxDiff: 24, meanDiff: 3},
		{path: "odd/baseline.png", data: pngData, img: testPicture(64, 48)},
		{path: "odd/gray.jpg", data: encodeJPEG(testGray(40, 24), 95), img: testGray(40, 24), maxDiff: 6, meanDiff: 1.5},
		{path: "odd/gray.png", data: encodePNG(testGray(40, 24)), img: testGray(40, 24)},
		{path: "odd/rgb16.png", data: encodePNG(rgb16), img: rgb16Want},
		{path: "odd/paletted.png", data: encodePNG(pal), img: pal},
		{path: "odd/alpha.png", data: encodePNG(alpha), img: alphaWant},
		{path: "odd/cmyk.jpg", data: cmyk.encode(), img: cmykWant, maxDiff: 2, meanDiff: 1},
		{path: "odd/progressive-50-scans.jpg", data: prog.encode(), img: progWant, maxDiff: 2, meanDiff: 1},
	}
}

func TestGenerateCorpus(t *testing.T) {
	files := corpusFiles()
	total := 0
	for _, f := range files {
		total += len(f.data)
	}
	if total > 1<<20 {
		t.Errorf("corpus is %d bytes; keep it under 1 MiB", total)
	}
	if *genCorpus {
		for _, dir := range []string{"bad", "odd"} {
			if err := os.RemoveAll(filepath.Join(corpusDir, dir)); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(corpusDir, dir), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(corpusDir, f.path), f.data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wrote %d files, %d bytes", len(files), total)
		return
	}
	var want []string
	for _, f := range files {
		want = append(want, f.path)
		got, err := os.ReadFile(filepath.Join(corpusDir, f.path))
		if err != nil {
			t.Errorf("%v (run go test ./pipeline -run TestGenerateCorpus -gen-corpus)", err)
			continue
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("%s differs from what the generator makes (run go test ./pipeline -run TestGenerateCorpus -gen-corpus)", f.path)
		}
	}
	var have []string
	for _, dir := range []string{"bad", "odd"} {
		ents, _ := os.ReadDir(filepath.Join(corpusDir, dir))
		for _, e := range ents {
			have = append(have, dir+"/"+e.Name())
		}
	}
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Errorf("corpus files %v, generator makes %v", have, want)
	}
}
