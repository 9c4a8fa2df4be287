package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"

	"github.com/stoker-dev/stoker/pipeline/errs"
)

// Format is an image's file format, as its first bytes say.
type Format int

// The formats the codec tells apart.
const (
	FormatOther Format = iota // one Go's image package decodes (GIF, BMP, ...)
	FormatJPEG
	FormatPNG
	FormatWebP
)

// Header is what an image declares about itself before any pixel is decoded.
type Header struct {
	Format      Format
	W, H        int
	Comps       int  // JPEG components: 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
	Progressive bool // JPEG: progressive (multi-scan) coding
	// Samp is each JPEG component's sampling factors as its frame header
	// gives them (horizontal<<4 | vertical, each 1 to 4; 0: not read, as
	// for a header too short to hold them, which libjpeg refuses).
	Samp [4]uint8
	// Interlaced: a PNG's rows are Adam7-interlaced (decoded whole).
	Interlaced bool
}

// ParseHeader reads an image's size from its header without decoding it,
// allocation-free for JPEG and PNG, so oversized images are refused before
// they cost memory or time.
func ParseHeader(data []byte) (Header, error) {
	switch {
	case len(data) == 0:
		return Header{}, fmt.Errorf("%w: empty file", errs.Corrupt)
	case len(data) >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF:
		return parseJPEGHeader(data)
	case len(data) >= 8 && string(data[:8]) == "\x89PNG\r\n\x1a\n":
		if len(data) < 33 || string(data[12:16]) != "IHDR" {
			return Header{}, fmt.Errorf("%w: png: no IHDR chunk", errs.Corrupt)
		}
		w := binary.BigEndian.Uint32(data[16:20])
		h := binary.BigEndian.Uint32(data[20:24])
		if w == 0 || h == 0 || w > 1<<30 || h > 1<<30 {
			return Header{}, fmt.Errorf("%w: png: declared size %dx%d", errs.Corrupt, w, h)
		}
		return Header{Format: FormatPNG, W: int(w), H: int(h), Interlaced: data[28] != 0}, nil
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Header{}, fmt.Errorf("%w: not a known image format: %v", errs.Corrupt, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Header{}, fmt.Errorf("%w: declared size %dx%d", errs.Corrupt, cfg.Width, cfg.Height)
	}
	f := FormatOther
	if len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP" {
		f = FormatWebP
	}
	return Header{Format: f, W: cfg.Width, H: cfg.Height}, nil
}

func parseJPEGHeader(data []byte) (Header, error) {
	p := 2
	for {
		// Markers may be preceded by any number of 0xFF fill bytes.
		for p < len(data) && data[p] == 0xFF {
			p++
		}
		if p >= len(data) || data[p-1] != 0xFF {
			return Header{}, fmt.Errorf("%w: jpeg: no frame header (SOF) before offset %d", errs.Corrupt, p)
		}
		m := data[p]
		p++
		if m == 0x00 {
			// A stuffed zero belongs in entropy-coded data. Here decoders
			// take it for extraneous data and scan on for the next 0xFF
			// (Go's image/jpeg silently), while reading a length after it
			// would skip bytes they parse: a frame header hidden there
			// could declare more pixels than the one seen here.
			return Header{}, fmt.Errorf("%w: jpeg: 0xFF00 between segments at offset %d", errs.Corrupt, p-2)
		}
		if m == 0x01 || (m >= 0xD0 && m <= 0xD8) { // standalone markers
			continue
		}
		if p+2 > len(data) {
			return Header{}, fmt.Errorf("%w: jpeg: truncated in headers", errs.Corrupt)
		}
		n := int(binary.BigEndian.Uint16(data[p:]))
		if n < 2 || p+n > len(data) {
			return Header{}, fmt.Errorf("%w: jpeg: bad segment length %d at offset %d", errs.Corrupt, n, p)
		}
		switch {
		case m == 0xDA || m == 0xD9:
			return Header{}, fmt.Errorf("%w: jpeg: no frame header (SOF) before scan data", errs.Corrupt)
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			if n < 8 {
				return Header{}, fmt.Errorf("%w: jpeg: short frame header", errs.Corrupt)
			}
			hd := Header{
				Format:      FormatJPEG,
				H:           int(binary.BigEndian.Uint16(data[p+3:])),
				W:           int(binary.BigEndian.Uint16(data[p+5:])),
				Comps:       int(data[p+7]),
				Progressive: m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE,
			}
			if hd.W == 0 || hd.H == 0 {
				return Header{}, fmt.Errorf("%w: jpeg: declared size %dx%d (height from DNL is not supported)", errs.Corrupt, hd.W, hd.H)
			}
			if hd.Comps != 1 && hd.Comps != 3 && hd.Comps != 4 {
				return Header{}, fmt.Errorf("%w: jpeg: %d components", errs.Unsupported, hd.Comps)
			}
			if prec := data[p+2]; prec != 8 {
				return Header{}, fmt.Errorf("%w: jpeg: %d-bit samples", errs.Unsupported, prec)
			}
			if n >= 8+3*hd.Comps {
				for c := range hd.Comps {
					f := data[p+8+3*c+1]
					if f>>4 < 1 || f>>4 > 4 || f&15 < 1 || f&15 > 4 {
						hd.Samp = [4]uint8{} // libjpeg refuses the file: the bound assumes the worst
						break
					}
					hd.Samp[c] = f
				}
			}
			return hd, nil
		}
		p += n
	}
}
