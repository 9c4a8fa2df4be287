package codec

// LibBytes bounds the memory the C decoders (libjpeg-turbo, libpng and
// pngrows.c, libwebp; Go's image package for the other formats) take of
// their own while they decode an image of this header, freed when the
// decode returns: what the server's memory budget reserves for it before
// the decode (pipeline/scratch.go), and what the decode is capped at
// (Job.MaxMemory) where its allocations can be counted.
//
// For a JPEG it is exact in its large parts, from libjpeg-turbo's
// decompressor (the whole image's coefficients of a progressive file, 128
// bytes a block padded to its MCUs, jdcoefct.c; a baseline file's row
// groups, jdmainct.c with its context rows; the upsampler's rows,
// jdsample.c) at full scale, plus 64 KiB for its tables and structs; the
// C decode counts every request against it (memlim.c) and fails the image
// over it, so it also bounds a transcode (jpeg_read_coefficients: the
// same coefficients, no rows).
//
// For a PNG: 40 bytes a column (libpng's row and previous row at 16 bits
// RGBA with its filler, 8 bytes a pixel each, and the row handed on with
// the resampler's slack, at most 4 bytes a column and 128; pngrows.c's
// three rows) and 128 KiB (zlib's 32 KiB window and state, libpng's
// structs, palette and 8 KiB read buffer); an interlaced image's rows
// whole besides (4 bytes a pixel, a row pointer each, one slack). Every
// block libpng, zlib and pngrows.c take is counted and the decode capped
// at it (formats.c's stoker_heap).
//
// For a WebP: the decoded rows (4 bytes a pixel, each row rounded to 64
// bytes, and one slack), 7 bytes a pixel for libwebp's own (a lossless
// image's ARGB and its cache rows, 4 bytes a pixel; a lossy image's alpha
// plane and the ARGB its lossless coding decodes through: 5, and 6.1
// measured with the rest), 256 bytes a column (a lossy image's
// macroblock rows and filter cache) and 1 MiB. The rows are counted and
// capped; libwebp has no allocator hook, so its own allocations are
// bounded, not capped: TestExactLibBytesBoundFormats (package heappeak)
// measures what the C heap held. Not bounded by the header: a lossless
// image's Huffman tables, one set for each group its entropy image
// names (up to 65536, about 20 KB each): a photo's encoder writes a few
// hundred at most, within the 7 bytes a pixel at the sizes measured, but
// a crafted file can name many more.
//
// For another format, Go's image package's decode: 4 bytes a pixel and
// 1 MiB.
func (h *Header) LibBytes() int64 {
	w, ht := int64(h.W), int64(h.H)
	if w <= 0 || ht <= 0 {
		return 0
	}
	slack := 4*w + 128 // the resampler's row slack at most (resize.c)
	switch h.Format {
	case FormatJPEG:
		return h.jpegBytes()
	case FormatPNG:
		n := 5*(8*w+128) + 128<<10
		if h.Interlaced {
			n += ht*(4*w+8) + slack + 64
		}
		return n
	case FormatWebP:
		return ht*((4*w+63)&^63) + slack + 64 + 7*w*ht + 256*w + 1<<20
	}
	return 4*w*ht + 1<<20
}

// jpegFixed is what libjpeg takes besides the rows and coefficients of
// LibBytes: its structs, Huffman, quantization, IDCT and color tables
// (tens of KB) and its pools' slop, with room.
const jpegFixed = 64 << 10

// jpegBytes is LibBytes for a JPEG.
func (h *Header) jpegBytes() int64 {
	type comp struct{ hs, vs int64 }
	var cs [4]comp
	nc := min(max(h.Comps, 1), 4)
	known := h.Samp[0] != 0
	var hmax, vmax int64 = 1, 1
	for c := range nc {
		cs[c] = comp{4, 4} // unknown: the largest factors, every plane full size
		if known {
			cs[c] = comp{int64(h.Samp[c] >> 4), int64(h.Samp[c] & 15)}
		}
		hmax, vmax = max(hmax, cs[c].hs), max(vmax, cs[c].vs)
	}
	ceil := func(a, b int64) int64 { return (a + b - 1) / b }
	up := func(a, b int64) int64 { return ceil(a, b) * b }
	w, ht := int64(h.W), int64(h.H)
	n := int64(jpegFixed)
	for c := range nc {
		f := cs[c]
		if !known { // the planes full size, padded to the largest MCU
			f = comp{hmax, vmax}
		}
		wib, hib := ceil(w*f.hs, 8*hmax), ceil(ht*f.vs, 8*vmax)
		if h.Progressive { // jdcoefct.c: the whole image's blocks, a row pointer each
			rows := up(hib, f.vs)
			n += rows*up(wib, f.hs)*128 + rows*8
		}
		// jdmainct.c: a row group of v DCT blocks, (M+2) of them with
		// context rows (M = 8 at full scale), and its pointers;
		// jdsample.c: vmax rows at the output's width for each plane
		// upsampled.
		n += 10*f.vs*(up(8*wib, 64)+8) + 2*12*f.vs*8
		n += vmax * (up(up(w, hmax), 64) + 8)
	}
	// jdmerge.c's spare row (4 bytes a pixel) and jdcoefct.c's MCU buffer.
	return n + 4*w + 64 + 10*128
}
