package pipeline

import (
	"github.com/stoker-dev/stoker/pipeline/codec"
)

// format is an image's file format (codec.Format).
type format = codec.Format

const (
	formatOther = codec.FormatOther
	formatJPEG  = codec.FormatJPEG
	formatPNG   = codec.FormatPNG
	formatWebP  = codec.FormatWebP
)

// header is what an image declares about itself before any pixel is
// decoded (codec.Header, parsed by pipeline/codec), under the names the
// Decoder's code uses.
type header struct {
	format      format
	w, h        int
	comps       int      // JPEG components: 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
	progressive bool     // JPEG: progressive (multi-scan) coding
	samp        [4]uint8 // JPEG: each component's sampling factors (codec.Header.Samp)
	interlaced  bool     // PNG: Adam7-interlaced
}

// libBytes bounds what the C decoders take of their own while they
// decode the image (codec.Header.LibBytes): what the memory budget
// reserves for them, and for a JPEG libjpeg's cap.
func (h *header) libBytes() int64 {
	ch := codec.Header{Format: h.format, W: h.w, H: h.h, Comps: h.comps, Progressive: h.progressive, Samp: h.samp, Interlaced: h.interlaced}
	return ch.LibBytes()
}

// parseHeader reads an image's size from its header without decoding it
// (codec.ParseHeader), so oversized images are refused before they cost
// memory or time.
func parseHeader(data []byte) (header, error) {
	h, err := codec.ParseHeader(data)
	return header{format: h.Format, w: h.W, h: h.H, comps: h.Comps, progressive: h.Progressive, samp: h.Samp, interlaced: h.Interlaced}, err
}

// ImageSize is the width and height an image's header declares, read
// from its first bytes without a decode (codec.ParseHeader): what `stoker
// index --sizes` records in a manifest (IndexOptions.ImageSize).
func ImageSize(head []byte) (w, h int, err error) {
	hd, err := codec.ParseHeader(head)
	return hd.W, hd.H, err
}
