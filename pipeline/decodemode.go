package pipeline

import "fmt"

// DecodeMode says whether a JPEG may be decoded at a DCT scale before the
// geometry resamples it. The zero value is DecodeExact.
type DecodeMode uint8

const (
	// DecodeExact decodes every JPEG at full scale and resamples it as
	// torchvision's decode_jpeg and resized_crop (or resize and
	// center_crop) do: torchvision's pixels. The default.
	DecodeExact DecodeMode = iota
	// DecodeFast lets the libjpeg-turbo path decode at 1/2, 1/4 or 1/8
	// scale (the Decoder's WithDCTScaling) when the crop is at least 2, 4
	// or 8 times the output on both sides and an antialiased filter
	// follows: a scaled IDCT averages pixels, close to what the widened
	// filter would have done, but not the same bytes (docs/transforms.md
	// gives the measured bound). The reference path and PNG and WebP
	// files always decode at full scale.
	DecodeFast
)

var decodeNames = [...]string{DecodeExact: "exact", DecodeFast: "fast"}

// String is the mode's name: "exact" or "fast".
func (m DecodeMode) String() string {
	if int(m) < len(decodeNames) {
		return decodeNames[m]
	}
	return fmt.Sprintf("DecodeMode(%d)", uint8(m))
}

// ParseDecodeMode parses "exact" or "fast".
func ParseDecodeMode(s string) (DecodeMode, error) {
	for i, n := range decodeNames {
		if s == n {
			return DecodeMode(i), nil
		}
	}
	return 0, fmt.Errorf("%w: decode %q: want exact or fast", ErrUnsupported, s)
}

// WithDecode returns t decoding its JPEGs in mode m (the same ops, the same
// draws; only the decode's scale may differ). t itself is unchanged.
func (t *Transform) WithDecode(m DecodeMode) *Transform {
	c := *t
	c.decode = m
	return &c
}

// DecodeMode is how t decodes its JPEGs (WithDecode).
func (t *Transform) DecodeMode() DecodeMode { return t.decode }
