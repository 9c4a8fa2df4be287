package codec

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// TestParseHeader: the format, size, JPEG coding and sampling each encoder's file
// declares. (The pipeline's header tests, header_test.go there, cover gray,
// CMYK, progressive and crafted JPEGs.)
func TestParseHeader(t *testing.T) {
	img := picture(65, 33)
	var j, p, g bytes.Buffer
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(&p, img); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&g, img, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want Header
	}{
		{"jpeg", j.Bytes(), Header{Format: FormatJPEG, W: 65, H: 33, Comps: 3, Samp: [4]uint8{0x22, 0x11, 0x11}}},
		{"png", p.Bytes(), Header{Format: FormatPNG, W: 65, H: 33}},
		{"gif", g.Bytes(), Header{Format: FormatOther, W: 65, H: 33}},
	} {
		if got, err := ParseHeader(tc.data); err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestParseHeaderRejects: files whose headers cannot be read are corrupt,
// before any pixel is decoded.
func TestParseHeaderRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"text", []byte("GIF? no, just text")},
		{"jpeg soi only", []byte{0xFF, 0xD8, 0xFF}},
		{"jpeg scan before frame", []byte{0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02}},
		{"jpeg segment length 0", []byte{0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x00}},
		{"jpeg stuffed zero between segments", []byte{0xFF, 0xD8, 0xFF, 0x00, 0xFF, 0xC0}},
		{"jpeg short frame", []byte{0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x04, 8, 0}},
		{"png no IHDR", append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIDAT"), make([]byte, 30)...)},
	} {
		if hd, err := ParseHeader(tc.data); !errors.Is(err, errs.Corrupt) {
			t.Errorf("%s: %+v, %v; want %v", tc.name, hd, err, errs.Corrupt)
		}
	}
}

// picture is a w x h RGB test image with edges and gradients in each
// channel.
func picture(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x ^ y) * 7), 255})
		}
	}
	return img
}
