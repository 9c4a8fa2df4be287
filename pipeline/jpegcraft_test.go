package pipeline

import (
	"bytes"
	"encoding/binary"
)

// flatJPEG describes a JPEG made of flat 8x8 blocks, written by hand so the
// corpus can hold files Go's encoder cannot make (CMYK, progressive, many
// scans) without depending on an outside tool. Only DC coefficients are
// coded, with a quantization table of ones, so every block decodes to exactly
// its value (up to IDCT rounding).
type flatJPEG struct {
	w, h  int
	comps int                      // 1 gray, 3 YCbCr, 4 CMYK (Adobe, inverted as Adobe writes it)
	value func(c, bx, by int) byte // component c's sample value in block (bx, by)
	// adobe writes an APP14 "Adobe" segment with transform 0 (no color
	// transform): what marks a 4-component file as CMYK.
	adobe bool
	// progressive writes SOF2, scans-1 DC-first scans (each coding the same
	// coefficients: a repeated first scan with Al=0 is legal, warning-free
	// in libjpeg, and leaves the image unchanged) and one AC-first scan of
	// end-of-blocks, so all 64 coefficients are coded: without AC scans
	// libjpeg smooths blocks into each other (do_block_smoothing) while Go
	// does not. Gray only (one component, so one AC scan). Otherwise SOF0
	// and one baseline scan.
	progressive bool
	scans       int
	// com, when set, is written as a COM segment right after SOI.
	com []byte
}

// Huffman tables: the standard luminance DC table (categories 0..11) and an
// AC table holding only end-of-block.
var (
	dcBits = [16]byte{0, 1, 5, 1, 1, 1, 1, 1, 1}
	dcVals = []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	acBits = [16]byte{1}
	acVals = []byte{0x00}
)

type huffCode struct {
	code uint32
	n    uint
}

func canonicalCodes(bits [16]byte, vals []byte) map[byte]huffCode {
	m := map[byte]huffCode{}
	code, k := uint32(0), 0
	for l := 1; l <= 16; l++ {
		for range int(bits[l-1]) {
			m[vals[k]] = huffCode{code, uint(l)}
			code++
			k++
		}
		code <<= 1
	}
	return m
}

// bitWriter writes entropy-coded data MSB first with 0xFF byte stuffing.
type bitWriter struct {
	buf  bytes.Buffer
	acc  uint32
	nacc uint
}

func (w *bitWriter) put(v uint32, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		w.acc = w.acc<<1 | (v>>uint(i))&1
		w.nacc++
		if w.nacc == 8 {
			b := byte(w.acc)
			w.buf.WriteByte(b)
			if b == 0xFF {
				w.buf.WriteByte(0)
			}
			w.acc, w.nacc = 0, 0
		}
	}
}

func (w *bitWriter) flush() []byte {
	if w.nacc > 0 {
		w.put(1<<(8-w.nacc)-1, 8-w.nacc) // pad with ones
	}
	return w.buf.Bytes()
}

func segment(out *bytes.Buffer, marker byte, payload ...[]byte) {
	n := 2
	for _, p := range payload {
		n += len(p)
	}
	out.Write([]byte{0xFF, marker})
	binary.Write(out, binary.BigEndian, uint16(n))
	for _, p := range payload {
		out.Write(p)
	}
}

func (j flatJPEG) encode() []byte {
	var out bytes.Buffer
	out.Write([]byte{0xFF, 0xD8})
	if j.com != nil {
		segment(&out, 0xFE, j.com)
	}
	if j.adobe {
		segment(&out, 0xEE, []byte("Adobe"), []byte{0, 100, 0, 0, 0, 0, 0})
	}
	segment(&out, 0xDB, []byte{0}, bytes.Repeat([]byte{1}, 64))
	sof := []byte{8, byte(j.h >> 8), byte(j.h), byte(j.w >> 8), byte(j.w), byte(j.comps)}
	for c := range j.comps {
		sof = append(sof, byte(c+1), 0x11, 0)
	}
	marker := byte(0xC0)
	if j.progressive {
		marker = 0xC2
	}
	segment(&out, marker, sof)
	dht := append(append([]byte{0x00}, dcBits[:]...), dcVals...)
	dht = append(append(append(dht, 0x10), acBits[:]...), acVals...)
	segment(&out, 0xC4, dht)
	sos := []byte{byte(j.comps)}
	for c := range j.comps {
		sos = append(sos, byte(c+1), 0x00)
	}
	if !j.progressive {
		segment(&out, 0xDA, append(sos, 0, 63, 0))
		out.Write(j.scanData(true))
	} else {
		data := j.scanData(false)
		for range j.scans - 1 {
			segment(&out, 0xDA, append(sos, 0, 0, 0))
			out.Write(data)
		}
		segment(&out, 0xDA, []byte{1, 1, 0x00, 1, 63, 0})
		out.Write(j.eobData())
	}
	out.Write([]byte{0xFF, 0xD9})
	return out.Bytes()
}

// eobData is an AC-first scan of one component in which every block is
// an end-of-block: all AC coefficients zero.
func (j flatJPEG) eobData() []byte {
	eob := canonicalCodes(acBits, acVals)[0]
	var w bitWriter
	for range ((j.h + 7) / 8) * ((j.w + 7) / 8) {
		w.put(eob.code, eob.n)
	}
	return append([]byte(nil), w.flush()...)
}

// scanData codes every block's DC difference (and an end-of-block when the
// scan has AC coefficients), blocks interleaved component by component.
func (j flatJPEG) scanData(withAC bool) []byte {
	dc, ac := canonicalCodes(dcBits, dcVals), canonicalCodes(acBits, acVals)
	var w bitWriter
	pred := make([]int, j.comps)
	for by := range (j.h + 7) / 8 {
		for bx := range (j.w + 7) / 8 {
			for c := range j.comps {
				v := int(j.value(c, bx, by))
				if j.adobe && j.comps == 4 {
					v = 255 - v // Adobe stores CMYK inverted
				}
				coef := 8 * (v - 128) // the DC of a flat block, quantizer 1
				diff := coef - pred[c]
				pred[c] = coef
				cat, mag := uint(0), diff
				if mag < 0 {
					mag = -mag
				}
				for mag>>cat != 0 {
					cat++
				}
				code := dc[byte(cat)]
				w.put(code.code, code.n)
				if diff < 0 {
					diff += 1<<cat - 1
				}
				w.put(uint32(diff), cat)
				if withAC {
					w.put(ac[0].code, ac[0].n)
				}
			}
		}
	}
	return append([]byte(nil), w.flush()...)
}
