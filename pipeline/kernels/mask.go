package kernels

// Instance masks through the separable geometry, as
// torchvision.transforms.v2 moves a tv_tensors.Mask: crops (out of the
// image: zeros, as crop_mask pads), pads (with the Mask's fill), flips and
// nearest resizes each take an output row (column) from one input row
// (column) or from none. So a chain of them is one map an axis, from the
// output's rows (columns) to the source mask's (negative: none, a fill
// code, FillCode), and the output mask is the source sampled through the
// two maps (MaskRuns), the fill's pixels 0 there and their values apart
// (FillRuns).

import (
	"math"
	"slices"
)

// FillCode is the map entry of the fill v put in by a sample's gen-th
// filling step (a crop past the canvas, a pad, a rotate, an affine: each
// its own gen, counted up from 0): negative, and lower for a later step.
// A pixel whose row and column are both fills takes the later step's (the
// lower code: CanvasIndex), since that step filled the whole row or
// column over what the earlier left.
func FillCode(gen int, v uint8) int32 { return -1 - (int32(gen)<<8 | int32(v)) }

// FillValue is the fill a map entry c < 0 (FillCode's) stands for.
func FillValue(c int32) uint8 { return uint8(-1 - c) }

// AxisIdentity is the map of an axis of n pixels before any op: dst[i] =
// i. It reuses dst's room.
func AxisIdentity(dst []int32, n int) []int32 {
	dst = dst[:0]
	for i := range n {
		dst = append(dst, int32(i))
	}
	return dst
}

// AxisCrop is crop_mask along an axis of len(m) pixels: the n pixels from
// start on (start may be negative, and start+n past the end: those
// pixels are the fill, fill's code (FillCode), as torchvision's crop pads
// a Mask with zeros and pad_mask with its fill). A pad of before and after
// pixels is AxisCrop(m, -before, len(m)+before+after). It reuses dst's
// room (dst must not share m's).
func AxisCrop(dst, m []int32, start, n int, fill int32) []int32 {
	dst = dst[:0]
	for i := range n {
		j := start + i
		v := fill
		if j >= 0 && j < len(m) {
			v = m[j]
		}
		dst = append(dst, v)
	}
	return dst
}

// AxisFlip is horizontal_flip_mask (vertical_flip_mask) along an axis, in
// place: pixel i becomes pixel len(m)-1-i.
func AxisFlip(m []int32) {
	for i, j := 0, len(m)-1; i < j; i, j = i+1, j-1 {
		m[i], m[j] = m[j], m[i]
	}
}

// NearestIndex is the input pixel torch's "nearest" interpolation (the
// one resize_mask uses: InterpolationMode.NEAREST) takes output pixel i
// from, resizing an axis of in pixels to out: with scale the float32
// in/out, min(floor(float32(i) * scale), in-1) (ATen's nearest_idx, whose
// special cases out == in and out == 2*in give the same).
func NearestIndex(i, in, out int) int {
	scale := float32(in) / float32(out)
	return min(int(math.Floor(float64(float32(float32(i)*scale)))), in-1)
}

// AxisResize is resize_mask (nearest) along an axis of len(m) pixels to
// n. It reuses dst's room (dst must not share m's).
func AxisResize(dst, m []int32, n int) []int32 {
	dst = dst[:0]
	if len(m) == n {
		return append(dst, m...) // torchvision returns the mask as it is
	}
	for i := range n {
		dst = append(dst, m[NearestIndex(i, len(m), n)])
	}
	return dst
}

// FillRuns appends to runs where the len(ys) x len(xs) canvas of the maps
// (through base, bw columns, when there is one) is a fill of a value other
// than 0, which MaskRuns gives as 0: row-major runs alternating between
// pixels that are the masks' own (a source pixel, or a fill of 0) and
// pixels of one fill value, from a run of the masks' own (of length 0 when
// the first pixel is a fill's; two fills side by side have one of length 0
// between them), each fill run's value appended to vals. Where no pixel is
// such a fill it appends nothing at all. row is scratch (a byte a column,
// its room reused and returned). Without a base, a row is its map entry's:
// every row from the source is the same, and each fill code's, so a row is
// made once for a run of rows alike.
func FillRuns(runs []uint32, vals, row []byte, base []int32, bw int, ys, xs []int32) ([]uint32, []byte, []byte) {
	n0, v0 := len(runs), len(vals)
	e := fillRuns{runs: runs, vals: vals}
	row = append(row[:0], make([]byte, len(xs))...)
	// pat is the row's runs (value, length), kept for the rows alike.
	var pat []uint32
	prev, made := int32(0), false
	for _, y := range ys {
		if len(base) == 0 && made && (y == prev || y >= 0 && prev >= 0) { // the row before again
			for q := 0; q < len(pat); q += 2 {
				e.push(byte(pat[q]), pat[q+1])
			}
			continue
		}
		switch {
		case y < 0:
			for j, x := range xs {
				row[j] = FillValue(min(y, x))
			}
		case len(base) == 0:
			for j, x := range xs {
				row[j] = 0
				if x < 0 {
					row[j] = FillValue(x)
				}
			}
		default:
			b := base[int(y)*bw:]
			for j, x := range xs {
				c := x
				if x >= 0 {
					c = b[x]
				}
				row[j] = 0
				if c < 0 {
					row[j] = FillValue(c)
				}
			}
		}
		prev, made, pat = y, true, pat[:0]
		for j := 0; j < len(row); {
			v, k := row[j], j+1
			for k < len(row) && row[k] == v {
				k++
			}
			e.push(v, uint32(k-j))
			if len(base) == 0 {
				pat = append(pat, uint32(v), uint32(k-j))
			}
			j = k
		}
	}
	if !e.filled {
		return runs[:n0], vals[:v0], row
	}
	e.runs = append(e.runs, e.run)
	if e.cur != 0 {
		e.vals = append(e.vals, e.cur)
	}
	return e.runs, e.vals, row
}

// fillRuns builds FillRuns' runs: cur is the run's value (0, the masks'
// own), run its length so far; filled: a fill run was started.
type fillRuns struct {
	runs   []uint32
	vals   []byte
	cur    byte
	run    uint32
	filled bool
}

// push adds n pixels of value v.
func (e *fillRuns) push(v byte, n uint32) {
	if v == e.cur {
		e.run += n
		return
	}
	e.runs = append(e.runs, e.run)
	if e.cur != 0 {
		e.vals = append(e.vals, e.cur)
		if v != 0 { // one fill after another: none of the masks' own between
			e.runs = append(e.runs, 0)
		}
	}
	e.cur, e.run, e.filled = v, n, true
}

// An instance's mask costs its extent, not the canvas: its source kept at
// its set pixels' bounding box (MaskSource), its runs made only where the
// output can come from it (MaskRunsExtent: through the axis maps, the
// rows and columns mapped into it; through a canvas index, the tiles
// whose source box meets it, MaskTiles). Every other pixel is 0 unlooked
// at: the runs are the canvas walk's bytes.

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

func newDivider(w int) divider { return divider{int32(max(w, 1)), 1 / float64(max(w, 1))} }

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
