package pipeline

import "github.com/stoker-dev/stoker/pipeline/codec"

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
	comps       int  // JPEG components: 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
	progressive bool // JPEG: progressive (multi-scan) coding
}

// parseHeader reads an image's size from its header without decoding it
// (codec.ParseHeader), so oversized images are refused before they cost
// memory or time.
func parseHeader(data []byte) (header, error) {
	h, err := codec.ParseHeader(data)
	return header{format: h.Format, w: h.W, h: h.H, comps: h.Comps, progressive: h.Progressive}, err
}
