package bench

// A baseline JPEG writer for the synthetic sets: 4:2:0 YCbCr planes in,
// a JFIF file out, with the tables of the JPEG standard's Annex K (the
// quantization tables scaled to a quality as libjpeg scales them, the
// "typical" Huffman tables), as libjpeg and image/jpeg write by default.
// The generator draws its images in YCbCr at the sampled resolutions, so
// nothing is converted or downsampled here, and the writer is image/jpeg's
// work without its per-pixel interface calls, its division per
// coefficient and its byte-at-a-time output: about a third of its CPU,
// which was most of what stoker mkdata spent.

import (
	"encoding/binary"
	bits64 "math/bits"
)

// jpegZigzag[k] is the natural (row-major) index of the k-th coefficient
// in zig-zag order.
var jpegZigzag = [64]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

// Annex K.1's tables in natural order: luma, chroma.
var jpegBaseQuant = [2][64]uint16{{
	16, 11, 10, 16, 24, 40, 51, 61,
	12, 12, 14, 19, 26, 58, 60, 55,
	14, 13, 16, 24, 40, 57, 69, 56,
	14, 17, 22, 29, 51, 87, 80, 62,
	18, 22, 37, 56, 68, 109, 103, 77,
	24, 35, 55, 64, 81, 104, 113, 92,
	49, 64, 78, 87, 103, 121, 120, 101,
	72, 92, 95, 98, 112, 100, 103, 99,
}, {
	17, 18, 24, 47, 99, 99, 99, 99,
	18, 21, 26, 66, 99, 99, 99, 99,
	24, 26, 56, 99, 99, 99, 99, 99,
	47, 66, 99, 99, 99, 99, 99, 99,
	99, 99, 99, 99, 99, 99, 99, 99,
	99, 99, 99, 99, 99, 99, 99, 99,
	99, 99, 99, 99, 99, 99, 99, 99,
	99, 99, 99, 99, 99, 99, 99, 99,
}}

// Annex K.3's Huffman tables: codes of each length 1-16, then the symbols.
var jpegHuffSpec = [4]struct {
	count [16]uint8
	value []uint8
}{
	{ // luma DC
		[16]uint8{0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0},
		[]uint8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	},
	{ // luma AC
		[16]uint8{0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 125},
		[]uint8{
			0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
			0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
			0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
			0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
			0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
			0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
			0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
			0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
			0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
			0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		},
	},
	{ // chroma DC
		[16]uint8{0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0},
		[]uint8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	},
	{ // chroma AC
		[16]uint8{0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 119},
		[]uint8{
			0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
			0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
			0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
			0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
			0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
			0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
			0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
			0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
			0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
			0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		},
	},
}

// jpegHuffCode[t][symbol] is the code of symbol in table t (0 luma DC,
// 1 luma AC, 2 chroma DC, 3 chroma AC): its length in the top byte, its
// bits below.
var jpegHuffCode [4][256]uint32

func init() {
	for t, s := range jpegHuffSpec {
		code, k := uint32(0), 0
		for l := range s.count {
			for range s.count[l] {
				jpegHuffCode[t][s.value[k]] = uint32(l+1)<<24 | code
				code++
				k++
			}
			code <<= 1
		}
	}
}

// jpegTables are the quantization tables of one quality: as written
// (zig-zag order) and as divided by (natural order, times the forward
// DCT's gain of 8, with a reciprocal to multiply by).
type jpegTables struct {
	zig   [2][64]uint8
	div   [2][64]uint32
	recip [2][64]uint64
}

func newJPEGTables(quality int) *jpegTables {
	quality = min(max(quality, 1), 100)
	scale := 200 - 2*quality
	if quality < 50 {
		scale = 5000 / quality
	}
	t := new(jpegTables)
	for c := range 2 {
		for k, n := range jpegZigzag {
			q := (int(jpegBaseQuant[c][n])*scale + 50) / 100
			q = min(max(q, 1), 255)
			t.zig[c][k] = uint8(q)
			d := uint32(8 * q)
			t.div[c][n] = d
			// (v + d/2) * recip >> 32 is (v + d/2) / d for v + d/2 < 2^21
			// (the DCT's outputs are under 2^15 in magnitude).
			t.recip[c][n] = (1<<32 + uint64(d) - 1) / uint64(d)
		}
	}
	return t
}

// ycbcr420 is an image as libjpeg's 4:2:0 wants it: Y at full resolution
// and Cb, Cr at half, each padded to whole blocks of its MCUs (Y to a
// multiple of 16, chroma of 8, both ways) with the image's content or
// its edge; w and h are the image's own size.
type ycbcr420 struct {
	w, h             int
	y, cb, cr        []uint8
	yStride, cStride int
}

func newYCbCr420(w, h int) *ycbcr420 {
	yw, yh := (w+15)&^15, (h+15)&^15
	return &ycbcr420{w: w, h: h, yStride: yw, cStride: yw / 2,
		y: make([]uint8, yw*yh), cb: make([]uint8, yw*yh/4), cr: make([]uint8, yw*yh/4)}
}

// appendJPEG appends img as a baseline JFIF JPEG to dst.
func appendJPEG(dst []byte, img *ycbcr420, t *jpegTables) []byte {
	dst = append(dst, 0xff, 0xd8, // SOI
		0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0) // APP0: JFIF 1.01, 1:1
	dst = append(dst, 0xff, 0xdb, 0, 2+2*65) // DQT
	for c := range 2 {
		dst = append(dst, uint8(c))
		dst = append(dst, t.zig[c][:]...)
	}
	dst = append(dst, 0xff, 0xc0, 0, 17, 8, uint8(img.h>>8), uint8(img.h), uint8(img.w>>8), uint8(img.w), 3,
		1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1) // SOF0: 8 bits, 3 components, Y 2x2
	n := 2
	for _, s := range jpegHuffSpec {
		n += 17 + len(s.value)
	}
	dst = append(dst, 0xff, 0xc4, uint8(n>>8), uint8(n)) // DHT
	for i, s := range jpegHuffSpec {
		dst = append(dst, [4]uint8{0x00, 0x10, 0x01, 0x11}[i])
		dst = append(dst, s.count[:]...)
		dst = append(dst, s.value...)
	}
	dst = append(dst, 0xff, 0xda, 0, 12, 3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0) // SOS

	e := jpegScan{out: dst}
	var blk [64]int32
	var dcY, dcCb, dcCr int32
	for my := 0; my < (img.h+15)/16; my++ {
		for mx := 0; mx < (img.w+15)/16; mx++ {
			for b := range 4 {
				loadBlock(&blk, img.y, img.yStride, 16*mx+8*(b&1), 16*my+8*(b>>1))
				dcY = e.block(&blk, t, 0, dcY)
			}
			loadBlock(&blk, img.cb, img.cStride, 8*mx, 8*my)
			dcCb = e.block(&blk, t, 1, dcCb)
			loadBlock(&blk, img.cr, img.cStride, 8*mx, 8*my)
			dcCr = e.block(&blk, t, 1, dcCr)
		}
	}
	e.finish()
	return append(e.out, 0xff, 0xd9) // EOI
}

func loadBlock(blk *[64]int32, p []uint8, stride, x, y int) {
	for r := range 8 {
		row := p[(y+r)*stride+x : (y+r)*stride+x+8 : (y+r)*stride+x+8]
		for c, v := range row {
			blk[8*r+c] = int32(v) - 128
		}
	}
}

// jpegScan is the entropy-coded segment being written: bits wait in acc
// (its low n bits) and go out 32 at a time, a 0 stuffed after each 0xff.
type jpegScan struct {
	out []byte
	acc uint64
	n   uint
}

func (e *jpegScan) put(bits uint32, n uint) {
	e.acc = e.acc<<n | uint64(bits)
	e.n += n
	if e.n >= 32 {
		e.n -= 32
		v := uint32(e.acc >> e.n)
		// A byte of v is 0xff when a byte of ^v is zero.
		if x := ^v; (x-0x01010101)&^x&0x80808080 == 0 {
			e.out = binary.BigEndian.AppendUint32(e.out, v)
			return
		}
		for s := 24; s >= 0; s -= 8 {
			b := uint8(v >> s)
			e.out = append(e.out, b)
			if b == 0xff {
				e.out = append(e.out, 0)
			}
		}
	}
}

// finish pads the last byte with 1 bits and writes what is left.
func (e *jpegScan) finish() {
	pad := (8 - e.n%8) % 8
	e.acc = e.acc<<pad | (1<<pad - 1)
	e.n += pad
	for e.n > 0 {
		e.n -= 8
		b := uint8(e.acc >> e.n)
		e.out = append(e.out, b)
		if b == 0xff {
			e.out = append(e.out, 0)
		}
	}
}

// magnitude is v's category (its bit length) and the bits JPEG writes for
// it: v itself when positive, v-1's low bits when negative.
func magnitude(v int32) (uint32, uint) {
	s := v >> 31
	n := uint(bits64.Len32(uint32((v ^ s) - s)))
	return uint32(v+s) & (1<<n - 1), n
}

// block transforms, quantizes and writes one 8x8 block (samples minus
// 128) of component class c (0 luma, 1 chroma) and returns its DC.
func (e *jpegScan) block(blk *[64]int32, t *jpegTables, c int, prevDC int32) int32 {
	fdctIslow(blk)
	var q [64]int32
	var nonzero uint64 // bit k: q[k] != 0
	div, recip := &t.div[c], &t.recip[c]
	for k, n := range jpegZigzag {
		v := blk[n]
		s := v >> 31 // 0 or -1: |v| is (v^s)-s, and back
		a := uint64(uint32((v ^ s) - s))
		r := int32(((a + uint64(div[n]>>1)) * recip[n]) >> 32)
		q[k] = (r ^ s) - s
		nonzero |= uint64(uint32(r|-r)>>31) << k
	}
	dcTab, acTab := &jpegHuffCode[2*c], &jpegHuffCode[2*c+1]
	bits, n := magnitude(q[0] - prevDC)
	h := dcTab[n]
	e.put(h&0xffffff, uint(h>>24))
	if n > 0 {
		e.put(bits, n)
	}
	// The AC coefficients that are not zero, the zeros between them as
	// runs: no branch per zero.
	prev := 0
	for m := nonzero &^ 1; m != 0; m &= m - 1 {
		k := bits64.TrailingZeros64(m)
		run := k - prev - 1
		prev = k
		for run > 15 {
			h := acTab[0xf0]
			e.put(h&0xffffff, uint(h>>24))
			run -= 16
		}
		bits, n := magnitude(q[k])
		h := acTab[run<<4|int(n)]
		// The code (<= 16 bits) and the value (<= 10 bits) in one put.
		e.put((h&0xffffff)<<n|bits, uint(h>>24)+n)
	}
	if prev < 63 {
		h := acTab[0x00] // EOB
		e.put(h&0xffffff, uint(h>>24))
	}
	return q[0]
}

// fdctIslow is libjpeg's jfdctint.c (the accurate integer forward DCT):
// outputs 8 times the orthonormal DCT's.
func fdctIslow(b *[64]int32) {
	const (
		constBits = 13
		pass1Bits = 2
		fix0298   = 2446
		fix0390   = 3196
		fix0541   = 4433
		fix0765   = 6270
		fix0899   = 7373
		fix1175   = 9633
		fix1501   = 12299
		fix1847   = 15137
		fix1961   = 16069
		fix2053   = 16819
		fix2562   = 20995
		fix3072   = 25172
	)
	descale := func(x int32, n uint) int32 { return (x + 1<<(n-1)) >> n }
	for r := range 8 {
		p := b[8*r : 8*r+8 : 8*r+8]
		tmp0, tmp7 := p[0]+p[7], p[0]-p[7]
		tmp1, tmp6 := p[1]+p[6], p[1]-p[6]
		tmp2, tmp5 := p[2]+p[5], p[2]-p[5]
		tmp3, tmp4 := p[3]+p[4], p[3]-p[4]
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2
		p[0] = (tmp10 + tmp11) << pass1Bits
		p[4] = (tmp10 - tmp11) << pass1Bits
		z1 := (tmp12 + tmp13) * fix0541
		p[2] = descale(z1+tmp13*fix0765, constBits-pass1Bits)
		p[6] = descale(z1-tmp12*fix1847, constBits-pass1Bits)
		z1, z2, z3, z4 := tmp4+tmp7, tmp5+tmp6, tmp4+tmp6, tmp5+tmp7
		z5 := (z3 + z4) * fix1175
		tmp4 *= fix0298
		tmp5 *= fix2053
		tmp6 *= fix3072
		tmp7 *= fix1501
		z1 *= -fix0899
		z2 *= -fix2562
		z3 = z3*-fix1961 + z5
		z4 = z4*-fix0390 + z5
		p[7] = descale(tmp4+z1+z3, constBits-pass1Bits)
		p[5] = descale(tmp5+z2+z4, constBits-pass1Bits)
		p[3] = descale(tmp6+z2+z3, constBits-pass1Bits)
		p[1] = descale(tmp7+z1+z4, constBits-pass1Bits)
	}
	for c := range 8 {
		tmp0, tmp7 := b[c]+b[56+c], b[c]-b[56+c]
		tmp1, tmp6 := b[8+c]+b[48+c], b[8+c]-b[48+c]
		tmp2, tmp5 := b[16+c]+b[40+c], b[16+c]-b[40+c]
		tmp3, tmp4 := b[24+c]+b[32+c], b[24+c]-b[32+c]
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2
		b[c] = descale(tmp10+tmp11, pass1Bits)
		b[32+c] = descale(tmp10-tmp11, pass1Bits)
		z1 := (tmp12 + tmp13) * fix0541
		b[16+c] = descale(z1+tmp13*fix0765, constBits+pass1Bits)
		b[48+c] = descale(z1-tmp12*fix1847, constBits+pass1Bits)
		z1, z2, z3, z4 := tmp4+tmp7, tmp5+tmp6, tmp4+tmp6, tmp5+tmp7
		z5 := (z3 + z4) * fix1175
		tmp4 *= fix0298
		tmp5 *= fix2053
		tmp6 *= fix3072
		tmp7 *= fix1501
		z1 *= -fix0899
		z2 *= -fix2562
		z3 = z3*-fix1961 + z5
		z4 = z4*-fix0390 + z5
		b[56+c] = descale(tmp4+z1+z3, constBits+pass1Bits)
		b[40+c] = descale(tmp5+z2+z4, constBits+pass1Bits)
		b[24+c] = descale(tmp6+z2+z3, constBits+pass1Bits)
		b[8+c] = descale(tmp7+z1+z4, constBits+pass1Bits)
	}
}
