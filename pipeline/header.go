package pipeline

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
)

type format int

const (
	formatOther format = iota
	formatJPEG
	formatPNG
	formatWebP
)

// header is what an image declares about itself before any pixel is decoded.
type header struct {
	format      format
	w, h        int
	comps       int  // JPEG components: 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
	progressive bool // JPEG: progressive (multi-scan) coding
}

// parseHeader reads an image's size from its header without decoding it,
// allocation-free for JPEG and PNG, so oversized images are refused before
// they cost memory or time.
func parseHeader(data []byte) (header, error) {
	switch {
	case len(data) == 0:
		return header{}, fmt.Errorf("%w: empty file", ErrCorrupt)
	case len(data) >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF:
		return parseJPEGHeader(data)
	case len(data) >= 8 && string(data[:8]) == "\x89PNG\r\n\x1a\n":
		if len(data) < 33 || string(data[12:16]) != "IHDR" {
			return header{}, fmt.Errorf("%w: png: no IHDR chunk", ErrCorrupt)
		}
		w := binary.BigEndian.Uint32(data[16:20])
		h := binary.BigEndian.Uint32(data[20:24])
		if w == 0 || h == 0 || w > 1<<30 || h > 1<<30 {
			return header{}, fmt.Errorf("%w: png: declared size %dx%d", ErrCorrupt, w, h)
		}
		return header{format: formatPNG, w: int(w), h: int(h)}, nil
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return header{}, fmt.Errorf("%w: not a known image format: %v", ErrCorrupt, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return header{}, fmt.Errorf("%w: declared size %dx%d", ErrCorrupt, cfg.Width, cfg.Height)
	}
	f := formatOther
	if len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP" {
		f = formatWebP
	}
	return header{format: f, w: cfg.Width, h: cfg.Height}, nil
}

func parseJPEGHeader(data []byte) (header, error) {
	p := 2
	for {
		// Markers may be preceded by any number of 0xFF fill bytes.
		for p < len(data) && data[p] == 0xFF {
			p++
		}
		if p >= len(data) || data[p-1] != 0xFF {
			return header{}, fmt.Errorf("%w: jpeg: no frame header (SOF) before offset %d", ErrCorrupt, p)
		}
		m := data[p]
		p++
		if m == 0x00 {
			// A stuffed zero belongs in entropy-coded data. Here decoders
			// take it for extraneous data and scan on for the next 0xFF
			// (Go's image/jpeg silently), while reading a length after it
			// would skip bytes they parse: a frame header hidden there
			// could declare more pixels than the one seen here.
			return header{}, fmt.Errorf("%w: jpeg: 0xFF00 between segments at offset %d", ErrCorrupt, p-2)
		}
		if m == 0x01 || (m >= 0xD0 && m <= 0xD8) { // standalone markers
			continue
		}
		if p+2 > len(data) {
			return header{}, fmt.Errorf("%w: jpeg: truncated in headers", ErrCorrupt)
		}
		n := int(binary.BigEndian.Uint16(data[p:]))
		if n < 2 || p+n > len(data) {
			return header{}, fmt.Errorf("%w: jpeg: bad segment length %d at offset %d", ErrCorrupt, n, p)
		}
		switch {
		case m == 0xDA || m == 0xD9:
			return header{}, fmt.Errorf("%w: jpeg: no frame header (SOF) before scan data", ErrCorrupt)
		case m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC:
			if n < 8 {
				return header{}, fmt.Errorf("%w: jpeg: short frame header", ErrCorrupt)
			}
			hd := header{
				format:      formatJPEG,
				h:           int(binary.BigEndian.Uint16(data[p+3:])),
				w:           int(binary.BigEndian.Uint16(data[p+5:])),
				comps:       int(data[p+7]),
				progressive: m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE,
			}
			if hd.w == 0 || hd.h == 0 {
				return header{}, fmt.Errorf("%w: jpeg: declared size %dx%d (height from DNL is not supported)", ErrCorrupt, hd.w, hd.h)
			}
			if hd.comps != 1 && hd.comps != 3 && hd.comps != 4 {
				return header{}, fmt.Errorf("%w: jpeg: %d components", ErrUnsupported, hd.comps)
			}
			if prec := data[p+2]; prec != 8 {
				return header{}, fmt.Errorf("%w: jpeg: %d-bit samples", ErrUnsupported, prec)
			}
			return hd, nil
		}
		p += n
	}
}
