package kernels

// The canvas-wide path the masks took before MaskSource and
// MaskRunsExtent: every instance's source decoded at the whole source
// (RowMajor), its runs walked over every output pixel (MaskRuns). Kept as
// the reference the extent's path is checked against, byte for byte
// (TestMaskRunsExtentMatchesCanvas).

// MaskRuns samples the source mask src (row-major, srcW columns, nonzero
// set; rows[y] false when its row y has no pixel set, or rows nil)
// through the maps ys (the output's rows) and xs (its columns), a fill's
// pixel 0 whatever its value (FillRuns gives those), and
// appends the output's run lengths to dst: row-major over the len(ys) x
// len(xs) output, alternating runs of 0 and 1 from a run of 0 (of length
// 0 when the first pixel is set), the last run the one that ends the
// mask. With a base (CanvasIndex's, bw columns; empty: none), the maps
// index base, whose entries index src. It returns dst.
func MaskRuns(dst []uint32, src []byte, srcW int, rows []bool, base []int32, bw int, ys, xs []int32) []uint32 {
	var cur byte
	var run uint32
	// push appends n pixels of v to the runs.
	push := func(v byte, n uint32) {
		if v != cur {
			dst = append(dst, run)
			cur, run = v, 0
		}
		run += n
	}
	// A row's runs (its pixels' values, alternating from its first), kept:
	// the next row, when it comes from the same source row (a resize up),
	// is the same (not so through a base, which is not separable).
	if len(xs) == 0 {
		return append(dst, 0)
	}
	var row []uint32
	var first byte
	prev := int32(-2)
	for _, y := range ys {
		if len(base) == 0 && (y < 0 || (rows != nil && !rows[y])) { // a row of zeros
			push(0, uint32(len(xs)))
			continue
		}
		if len(base) > 0 || y != prev {
			row, first = row[:0], 2
			var v byte
			var n uint32
			for _, x := range xs {
				i := int32(-1)
				switch {
				case y < 0 || x < 0:
				case len(base) > 0:
					i = base[int(y)*bw+int(x)]
				default:
					i = y*int32(srcW) + x
				}
				p := byte(0)
				if i >= 0 && src[i] != 0 {
					p = 1
				}
				switch {
				case first == 2:
					first, v, n = p, p, 1
				case p == v:
					n++
				default:
					row, v, n = append(row, n), p, 1
				}
			}
			row, prev = append(row, n), y
		}
		v := first
		for _, n := range row {
			push(v, n)
			v ^= 1
		}
	}
	return append(dst, run)
}

// RowMajor decodes a COCO run-length mask (counts: column-major runs of
// 0 and 1 from a run of 0, over h x w) into a row-major mask appended to
// dst[:0] (0 or 1 a pixel) and which of its rows have a pixel set
// (rows[:0]); ok is false when the runs do not cover h*w pixels exactly.
func RowMajor(dst []byte, rows []bool, counts []uint32, h, w int) ([]byte, []bool, bool) {
	n := h * w
	if cap(dst) < n { // exactly: the memory budget counts what is kept
		dst = make([]byte, 0, n)
	}
	if cap(rows) < h {
		rows = make([]bool, 0, h)
	}
	dst = append(dst[:0], make([]byte, n)...)
	rows = append(rows[:0], make([]bool, h)...)
	p, set := 0, false
	for _, c := range counts {
		if int(c) > n-p {
			return dst, rows, false
		}
		if set {
			for q := p; q < p+int(c); q++ {
				x, y := q/h, q%h
				dst[y*w+x], rows[y] = 1, true
			}
		}
		p += int(c)
		set = !set
	}
	return dst, rows, p == n
}
