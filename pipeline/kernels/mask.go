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

import "math"

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

// MaskFromRuns decodes MaskRuns' runs into a row-major mask of n pixels
// (0 or 1 each), appended to dst; ok is false when the runs do not cover
// exactly n pixels.
func MaskFromRuns(dst []byte, runs []uint32, n int) ([]byte, bool) {
	var v byte
	at := len(dst)
	for _, r := range runs {
		if len(dst)-at+int(r) > n {
			return dst, false
		}
		for range r {
			dst = append(dst, v)
		}
		v ^= 1
	}
	return dst, len(dst)-at == n
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

// ApplyFill sets the pixels of mask (row-major, a byte a pixel) that
// FillRuns' runs and vals say are a fill to its value; ok is false when
// the runs do not cover exactly len(mask) pixels or the values are not one
// a fill run.
func ApplyFill(mask []byte, runs []uint32, vals []byte) bool {
	at, f := 0, 0
	for j, r := range runs {
		if int(r) > len(mask)-at {
			return false
		}
		if j%2 == 1 {
			if f >= len(vals) {
				return false
			}
			v := vals[f]
			f++
			for q := at; q < at+int(r); q++ {
				mask[q] = v
			}
		}
		at += int(r)
	}
	return at == len(mask) && f == len(vals)
}
