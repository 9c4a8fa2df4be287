//go:build cgo

package pipeline

import (
	"bytes"
	"errors"
	"image/gif"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

func TestParseHeader(t *testing.T) {
	var gifBuf bytes.Buffer
	if err := gif.Encode(&gifBuf, testPaletted(30, 20), nil); err != nil {
		t.Fatal(err)
	}
	cmyk, _ := cmykJPEG()
	prog, _ := progressiveJPEG(3)
	for _, tc := range []struct {
		name        string
		data        []byte
		format      format
		w, h, comps int
		progressive bool
	}{
		{"jpeg rgb", encodeJPEG(testPicture(65, 33), 90), formatJPEG, 65, 33, 3, false},
		{"jpeg gray", encodeJPEG(testGray(17, 9), 90), formatJPEG, 17, 9, 1, false},
		{"jpeg cmyk", cmyk.encode(), formatJPEG, 32, 16, 4, false},
		{"jpeg progressive", prog.encode(), formatJPEG, 32, 16, 1, true},
		{"png", encodePNG(testPicture(65, 33)), formatPNG, 65, 33, 0, false},
		{"png gray", encodePNG(testGray(3, 1000)), formatPNG, 3, 1000, 0, false},
		{"gif", gifBuf.Bytes(), formatOther, 30, 20, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hd, err := parseHeader(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if hd.format != tc.format || hd.w != tc.w || hd.h != tc.h || hd.comps != tc.comps || hd.progressive != tc.progressive {
				t.Errorf("header %+v, want format %v %dx%d comps %d progressive %v", hd, tc.format, tc.w, tc.h, tc.comps, tc.progressive)
			}
		})
	}
}

func TestParseHeaderRejects(t *testing.T) {
	jpg := encodeJPEG(testPicture(16, 16), 90)
	sof := jpegMarker(jpg, 0xC0)
	zeroH := bytes.Clone(jpg)
	zeroH[sof+5], zeroH[sof+6] = 0, 0
	badLen := bytes.Clone(jpg)
	badLen[4], badLen[5] = 0xFF, 0xFF // first segment's length runs past the end
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, errs.Corrupt},
		{"text", []byte("GIF? no, just text"), errs.Corrupt},
		{"html", []byte("<html><body>404</body></html>"), errs.Corrupt},
		{"jpeg soi only", []byte{0xFF, 0xD8, 0xFF}, errs.Corrupt},
		{"jpeg fill bytes only", []byte{0xFF, 0xD8, 0xFF, 0xFF, 0xFF}, errs.Corrupt},
		{"jpeg scan before frame", []byte{0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02}, errs.Corrupt},
		{"jpeg eoi before frame", []byte{0xFF, 0xD8, 0xFF, 0xD9, 0x00, 0x02}, errs.Corrupt},
		{"jpeg segment length 0", []byte{0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x00}, errs.Corrupt},
		{"jpeg segment past end", badLen, errs.Corrupt},
		{"jpeg short frame", []byte{0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x04, 8, 0}, errs.Corrupt},
		{"jpeg height 0", zeroH, errs.Corrupt},
		{"jpeg garbage after SOI", append([]byte{0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 1, 2}, bytes.Repeat([]byte{0x42}, 50)...), errs.Corrupt},
		{"png signature only", []byte("\x89PNG\r\n\x1a\n"), errs.Corrupt},
		{"png no IHDR", append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIDAT"), make([]byte, 30)...), errs.Corrupt},
		{"png width 2^31", setPNGSize(encodePNG(testGray(4, 4)), 1<<31, 4), errs.Corrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hd, err := parseHeader(tc.data)
			if !errors.Is(err, tc.want) {
				t.Errorf("parseHeader = %+v, %v; want %v", hd, err, tc.want)
			}
		})
	}
}

// TestCountScans checks that scans are counted by segment, not by byte
// pattern: marker bytes inside a COM segment do not count or end the count.
func TestCountScans(t *testing.T) {
	for _, n := range []int{2, 3, 50, 150} {
		j, _ := progressiveJPEG(n)
		if got := countScans(j.encode()); got != n {
			t.Errorf("%d scans counted as %d", n, got)
		}
		j.com = []byte("\xFF\xDA\xFF\xD9\xFF\xDA")
		if got := countScans(j.encode()); got != n {
			t.Errorf("%d scans with marker bytes in a COM segment counted as %d", n, got)
		}
	}
	if got := countScans(encodeJPEG(testPicture(16, 16), 90)); got != 1 {
		t.Errorf("baseline jpeg: %d scans, want 1", got)
	}
}
