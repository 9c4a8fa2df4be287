package kernels

// An instance's mask costs its extent, not the canvas: its source kept
// at the bounding box of its set pixels (MaskSource), and its runs made
// only where the output's pixels can come from that box (MaskRunsExtent):
// through the axis maps, the output's rows and columns that map into it;
// through a canvas index (a rotation, an affine, a perspective), the
// output's tiles whose source pixels' bounding box meets it (MaskTiles,
// made once a sample for all its instances). Every other pixel is 0
// without being looked at, so the runs are the bytes the whole canvas'
// walk makes.

import "slices"

// MaskSource is one instance's source mask kept at its extent: the
// bounding box of its set pixels, columns X0 to X0+W-1 and rows Y0 to
// Y0+H-1 of the source, Pix its W x H pixels (row-major, 0 or 1), Rows
// which of its rows have a pixel set. W and H are 0 for a mask of no
// pixel set.
type MaskSource struct {
	X0, Y0, W, H int
	Pix          []byte
	Rows         []bool
}

// Decode decodes a COCO run-length mask (counts: column-major runs of 0
// and 1 from a run of 0, over h x w) into s, at its extent, reusing s's
// room (grown exactly: the memory budget counts what is kept); ok is
// false when the runs do not cover h*w pixels exactly. Its work is the
// runs and the extent's pixels, not the source's.
func (s *MaskSource) Decode(counts []uint32, h, w int) bool {
	n := h * w
	p, set := 0, false
	x0, y0, x1, y1 := w, h, -1, -1
	for _, c := range counts {
		if int(c) > n-p {
			return false
		}
		if set && c > 0 {
			a, b := p, p+int(c)-1
			ca, cb := a/h, b/h
			x0, x1 = min(x0, ca), max(x1, cb)
			if ca == cb {
				y0, y1 = min(y0, a%h), max(y1, b%h)
			} else { // the run wraps a column: every row
				y0, y1 = 0, h-1
			}
		}
		p += int(c)
		set = !set
	}
	if p != n {
		return false
	}
	if x1 < 0 {
		s.X0, s.Y0, s.W, s.H, s.Pix, s.Rows = 0, 0, 0, 0, s.Pix[:0], s.Rows[:0]
		return true
	}
	s.X0, s.Y0, s.W, s.H = x0, y0, x1-x0+1, y1-y0+1
	m := s.W * s.H
	if cap(s.Pix) < m {
		s.Pix = make([]byte, 0, m)
	}
	if cap(s.Rows) < s.H {
		s.Rows = make([]bool, 0, s.H)
	}
	s.Pix, s.Rows = s.Pix[:m], s.Rows[:s.H]
	clear(s.Pix)
	clear(s.Rows)
	p, set = 0, false
	for _, c := range counts {
		if set && c > 0 {
			x, y := p/h, p%h
			for range c {
				s.Pix[(y-y0)*s.W+x-x0], s.Rows[y-y0] = 1, true
				if y++; y == h {
					x, y = x+1, 0
				}
			}
		}
		p += int(c)
		set = !set
	}
	return true
}

// Pixels is the extent's pixels: the instance's share of the work.
func (s *MaskSource) Pixels() int64 { return int64(s.W) * int64(s.H) }

// at is source pixel (y, x): 0 outside the extent.
func (s *MaskSource) at(y, x int) byte {
	y, x = y-s.Y0, x-s.X0
	if y < 0 || x < 0 || y >= s.H || x >= s.W {
		return 0
	}
	return s.Pix[y*s.W+x]
}

// maskTile is the side of MaskTiles' tiles, in output pixels.
const maskTile = 16

// MaskTiles are a canvas index' tiles (a maskTile-pixel square of the
// output each, the last ones cut): for each, the bounding box of the
// source pixels its output pixels come from (rows r0..r1, columns
// c0..c1; r0 > r1 where all are fills). An instance's runs look only at
// the tiles whose box meets its extent.
type MaskTiles struct {
	across, down int
	box          []int32 // 4 a tile: r0, r1, c0, c1
	cand         []int   // the tiles of a band an instance looks at (scratch)
}

// Build makes the tiles of the len(ys) x len(xs) output of the maps ys
// and xs through base (bw columns; entries index a srcW-column source),
// reusing t's room: a pass over the canvas, once a sample.
func (t *MaskTiles) Build(base []int32, bw, srcW int, ys, xs []int32) {
	h, w := len(ys), len(xs)
	t.across, t.down = (w+maskTile-1)/maskTile, (h+maskTile-1)/maskTile
	n := 4 * t.across * t.down
	t.box = slices.Grow(t.box[:0], n)[:n]
	for i := 0; i < n; i += 4 {
		t.box[i], t.box[i+1], t.box[i+2], t.box[i+3] = 1<<30, -1, 1<<30, -1
	}
	d := newDivider(srcW)
	for r, y := range ys {
		if y < 0 {
			continue
		}
		row := base[int(y)*bw:]
		b := t.box[4*t.across*(r/maskTile):]
		for c, x := range xs {
			if x < 0 {
				continue
			}
			i := row[x]
			if i < 0 {
				continue
			}
			sy, sx := d.divmod(i)
			q := b[4*(c/maskTile):]
			q[0], q[1], q[2], q[3] = min(q[0], sy), max(q[1], sy), min(q[2], sx), max(q[3], sx)
		}
	}
}

// Reset empties t (its room kept): MaskRunsExtent then looks at every
// pixel of a canvas index.
func (t *MaskTiles) Reset() { t.box, t.cand = t.box[:0], t.cand[:0] }

// Bytes is the room t holds.
func (t *MaskTiles) Bytes() int64 { return 4*int64(cap(t.box)) + 8*int64(cap(t.cand)) }

// divider divides a source index by the source's width without a
// division instruction: a float64 reciprocal's quotient, off by at most
// one, corrected.
type divider struct {
	w   int32
	inv float64
}

func newDivider(w int) divider { return divider{int32(max(w, 1)), 1 / float64(max(w, 1))} }

// divmod is i / w and i % w (i >= 0).
func (d divider) divmod(i int32) (q, r int32) {
	q = int32(float64(i) * d.inv)
	r = i - q*d.w
	switch {
	case r < 0:
		q, r = q-1, r+d.w
	case r >= d.w:
		q, r = q+1, r-d.w
	}
	return q, r
}

// MaskRunsExtent appends to dst the runs of instance s (its source's
// extent, srcW the source's columns) sampled through the maps ys (the
// output's rows) and xs (its columns), through base (a canvas index, bw
// columns, with its tiles; empty: none): row-major over the len(ys) x
// len(xs) output, alternating runs of 0 and 1 from a run of 0 (of length
// 0 when the first pixel is set), the last run the one that ends the
// mask, a fill's pixel 0 (FillRuns gives those). Through the maps, its
// work is the output's rows and columns and the pixels of those that map
// into the extent; through an index, the tiles' boxes and the pixels of
// the tiles that meet it. It returns the runs and the output pixels it
// looked at (its work beyond the rows and the tiles).
func MaskRunsExtent(dst []uint32, s *MaskSource, srcW int, base []int32, bw int, tiles *MaskTiles, ys, xs []int32) ([]uint32, int64) {
	e := maskRuns{dst: dst}
	if len(xs) == 0 {
		return append(dst, 0), 0
	}
	switch {
	case s.W == 0:
		for range ys {
			e.push(0, uint32(len(xs)))
		}
	case len(base) == 0:
		e.maps(s, ys, xs)
	default:
		e.turned(s, srcW, base, bw, tiles, ys, xs)
	}
	return append(e.dst, e.run), e.looked
}

// maskRuns builds MaskRunsExtent's runs: cur is the run's value, run its
// length so far; looked counts the pixels looked at.
type maskRuns struct {
	dst    []uint32
	cur    byte
	run    uint32
	looked int64
}

// push appends n pixels of v.
func (e *maskRuns) push(v byte, n uint32) {
	if n == 0 {
		return
	}
	if v != e.cur {
		e.dst = append(e.dst, e.run)
		e.cur, e.run = v, 0
	}
	e.run += n
}

// maps is MaskRunsExtent through the axis maps: the output's columns
// [lo, hi) are those mapped into the extent (any other is 0); a row not
// mapped into it is 0; a row's runs over [lo, hi) are kept for the next
// row when it comes from the same source row (a resize up).
func (e *maskRuns) maps(s *MaskSource, ys, xs []int32) {
	lo, hi := len(xs), 0
	for j, x := range xs {
		if int(x) >= s.X0 && int(x) < s.X0+s.W {
			lo, hi = min(lo, j), j+1
		}
	}
	var row []uint32
	var first byte
	prev := int32(-1)
	for _, y := range ys {
		yy := int(y) - s.Y0
		if lo >= hi || yy < 0 || yy >= s.H || !s.Rows[yy] {
			e.push(0, uint32(len(xs)))
			continue
		}
		if y != prev {
			row, first = row[:0], 2
			var v byte
			var n uint32
			for _, x := range xs[lo:hi] {
				p := s.at(int(y), int(x)) // a fill's column (negative): 0
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
			e.looked += int64(hi - lo)
		}
		e.push(0, uint32(lo))
		v := first
		for _, n := range row {
			e.push(v, n)
			v ^= 1
		}
		e.push(0, uint32(len(xs)-hi))
	}
}

// turned is MaskRunsExtent through a canvas index: each band of tiles'
// rows looks at the tiles whose box meets the extent, pixel by pixel, and
// takes the others as 0.
func (e *maskRuns) turned(s *MaskSource, srcW int, base []int32, bw int, t *MaskTiles, ys, xs []int32) {
	d := newDivider(srcW)
	y0, y1, x0, x1 := int32(s.Y0), int32(s.Y0+s.H-1), int32(s.X0), int32(s.X0+s.W-1)
	w := len(xs)
	if t == nil || len(t.box) == 0 { // no tiles (an instance alone): every pixel looked at
		t = &MaskTiles{across: (w + maskTile - 1) / maskTile, down: (len(ys) + maskTile - 1) / maskTile}
		for c := range t.across {
			t.cand = append(t.cand, c)
		}
	}
	all := len(t.box) == 0
	for band := range t.down {
		if all {
			e.band(s, d, base, bw, t, ys, xs, band)
			continue
		}
		t.cand = t.cand[:0]
		b := t.box[4*t.across*band:]
		for c := range t.across {
			q := b[4*c:]
			if q[0] <= y1 && q[1] >= y0 && q[2] <= x1 && q[3] >= x0 {
				t.cand = append(t.cand, c)
			}
		}
		e.band(s, d, base, bw, t, ys, xs, band)
	}
}

// band is turned's band of rows: the tiles t.cand looked at, pixel by
// pixel, the others 0.
func (e *maskRuns) band(s *MaskSource, d divider, base []int32, bw int, t *MaskTiles, ys, xs []int32, band int) {
	w := len(xs)
	{
		for r := band * maskTile; r < min((band+1)*maskTile, len(ys)); r++ {
			if len(t.cand) == 0 {
				e.push(0, uint32(w))
				continue
			}
			y := ys[r]
			var row []int32
			if y >= 0 {
				row = base[int(y)*bw:]
			}
			at := 0
			for _, c := range t.cand {
				c0, c1 := c*maskTile, min((c+1)*maskTile, w)
				e.push(0, uint32(c0-at))
				e.looked += int64(c1 - c0)
				for _, x := range xs[c0:c1] {
					p := byte(0)
					if y >= 0 && x >= 0 {
						if i := row[x]; i >= 0 {
							sy, sx := d.divmod(i)
							p = s.at(int(sy), int(sx))
						}
					}
					e.push(p, 1)
				}
				at = c1
			}
			e.push(0, uint32(w-at))
		}
	}
}
