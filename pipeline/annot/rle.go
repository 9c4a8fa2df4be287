package annot

// The run-length masks of COCO, as pycocotools computes them.
//
// The algorithms of this file (rleFrPoly's upsampled boundary walk, the
// merge, the bbox of a run-length mask, the 6-bit string form) follow
// pycocotools' common/maskApi.c (Microsoft COCO Toolbox, Piotr Dollar and
// Tsung-Yi Lin, 2015; Simplified BSD License), as pycocotools 2.0.11
// ships it (github.com/ppwwyyxx/cocoapi). They are written again here in
// Go, step for step, so that a mask is the same bytes as pycocotools'
// annToMask: python/tests/test_coco_masks.py checks it against the pinned
// pycocotools.

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// RLE is a binary mask of H rows and W columns, run-length encoded in
// column-major order (down each column, then the next column), as COCO
// stores it: Counts alternate runs of 0 and 1, starting with 0 (a mask
// whose first pixel is set starts with a run of length 0).
type RLE struct {
	H, W   int
	Counts []uint32
}

// Bounds on what one mask may cost: a polygon's vertices, a run-length
// mask's runs and its pixels. An annotation past one is a per-sample error
// (the bounds are far beyond COCO's: its longest polygon has about 700
// vertices, its largest image 640x640 pixels).
const (
	// MaxPolygonVertices bounds one polygon's vertices.
	MaxPolygonVertices = 1 << 16
	// MaxRLECounts bounds one run-length mask's runs.
	MaxRLECounts = 1 << 22
	// MaxMaskPixels bounds a mask's H*W (that of its image).
	MaxMaskPixels = 1 << 28
	// MaxPolygonWalk bounds the points of a polygon's boundary walk on
	// the 5x grid (its perimeter in fifths of a pixel, plus a point a
	// vertex): about 400 000 pixels of perimeter, and 8 bytes a point
	// (16 MiB) while it is rasterized.
	MaxPolygonWalk = 1 << 21
	// MaxCoordinate bounds the magnitude of a polygon's coordinates, in
	// pixels: pycocotools converts 5 times a coordinate to a C int, and
	// past this its walk would be long for nothing.
	MaxCoordinate = 1 << 20
)

// Bytes is what the mask holds in memory (for the memory budget).
func (r *RLE) Bytes() int64 { return int64(len(r.Counts))*4 + 24 }

// check says whether r is a well-formed mask: sizes in bounds and runs
// that cover exactly H*W pixels.
func (r *RLE) check() error {
	if r.H < 0 || r.W < 0 || r.H*r.W > MaxMaskPixels {
		return fmt.Errorf("size %dx%d out of bounds (H*W at most %d)", r.H, r.W, MaxMaskPixels)
	}
	if len(r.Counts) > MaxRLECounts {
		return fmt.Errorf("%d runs, more than the %d allowed", len(r.Counts), MaxRLECounts)
	}
	var sum uint64
	for _, c := range r.Counts {
		sum += uint64(c)
	}
	if sum != uint64(r.H)*uint64(r.W) {
		return fmt.Errorf("runs cover %d pixels, the mask's size %dx%d is %d", sum, r.H, r.W, r.H*r.W)
	}
	return nil
}

// FromPolygon rasterizes the closed polygon xy (x0, y0, x1, y1, ...) at
// h x w, as pycocotools' rleFrPoly: the vertices scaled by 5 and rounded,
// the edges walked on that grid, and a pixel set when its centre lies
// inside by the crossings of the column through it.
func FromPolygon(xy []float64, h, w int) (RLE, error) {
	k := len(xy) / 2
	if len(xy)%2 != 0 || k < 3 {
		return RLE{}, fmt.Errorf("polygon of %d coordinates: want an even count, at least 6 (3 points)", len(xy))
	}
	if k > MaxPolygonVertices {
		return RLE{}, fmt.Errorf("polygon of %d points, more than the %d allowed", k, MaxPolygonVertices)
	}
	if h < 0 || w < 0 || h*w > MaxMaskPixels {
		return RLE{}, fmt.Errorf("mask size %dx%d out of bounds", h, w)
	}
	for i, v := range xy {
		if math.IsNaN(v) || math.Abs(v) > MaxCoordinate {
			return RLE{}, fmt.Errorf("polygon coordinate %d is %v: want a finite number of magnitude at most %d", i, v, MaxCoordinate)
		}
	}
	const scale = 5.0
	x := make([]int, k+1)
	y := make([]int, k+1)
	for j := range k {
		x[j] = int(float64(scale*xy[2*j]) + .5) // truncation toward zero, as C's (int)
		y[j] = int(float64(scale*xy[2*j+1]) + .5)
	}
	x[k], y[k] = x[0], y[0]
	m := 0
	for j := range k {
		m += max(iabs(x[j]-x[j+1]), iabs(y[j]-y[j+1])) + 1
	}
	if m > MaxPolygonWalk {
		return RLE{}, fmt.Errorf("polygon's perimeter is about %d pixels, more than the %d allowed", m/5, MaxPolygonWalk/5)
	}
	u := make([]int32, 0, m)
	v := make([]int32, 0, m)
	for j := range k {
		xs, xe, ys, ye := x[j], x[j+1], y[j], y[j+1]
		dx, dy := iabs(xe-xs), iabs(ys-ye)
		flip := (dx >= dy && xs > xe) || (dx < dy && ys > ye)
		if flip {
			xs, xe = xe, xs
			ys, ye = ye, ys
		}
		var s float64
		if dx >= dy {
			s = float64(ye-ys) / float64(dx)
		} else {
			s = float64(xe-xs) / float64(dy)
		}
		if dx >= dy {
			for d := 0; d <= dx; d++ {
				t := d
				if flip {
					t = dx - d
				}
				u = append(u, int32(t+xs))
				v = append(v, int32(float64(ys)+float64(s*float64(t))+.5))
			}
		} else {
			for d := 0; d <= dy; d++ {
				t := d
				if flip {
					t = dy - d
				}
				v = append(v, int32(t+ys))
				u = append(u, int32(float64(xs)+float64(s*float64(t))+.5))
			}
		}
	}
	// The crossings of the columns, downsampled.
	a := make([]uint32, 0, len(u)+1)
	for j := 1; j < len(u); j++ {
		if u[j] == u[j-1] {
			continue
		}
		var xd float64
		if u[j] < u[j-1] {
			xd = float64(u[j])
		} else {
			xd = float64(u[j] - 1)
		}
		xd = (xd+.5)/scale - .5
		if math.Floor(xd) != xd || xd < 0 || xd > float64(w-1) {
			continue
		}
		var yd float64
		if v[j] < v[j-1] {
			yd = float64(v[j])
		} else {
			yd = float64(v[j-1])
		}
		yd = (yd+.5)/scale - .5
		if yd < 0 {
			yd = 0
		} else if yd > float64(h) {
			yd = float64(h)
		}
		yd = math.Ceil(yd)
		a = append(a, uint32(int(xd)*h+int(yd)))
	}
	a = append(a, uint32(h*w))
	slices.Sort(a)
	var p uint32
	for j := range a {
		t := a[j]
		a[j] -= p
		p = t
	}
	b := make([]uint32, 0, len(a))
	j := 0
	b = append(b, a[j])
	j++
	for j < len(a) {
		if a[j] > 0 {
			b = append(b, a[j])
			j++
		} else {
			j++
			if j < len(a) {
				b[len(b)-1] += a[j]
				j++
			}
		}
	}
	return RLE{H: h, W: w, Counts: b}, nil
}

func iabs(a int) int {
	if a < 0 {
		return -a
	}
	return a
}

// Merge is the union (or, intersect, the intersection) of masks of one
// size, as pycocotools' merge. Masks of different sizes are an error
// (pycocotools returns an empty 0x0 mask).
func Merge(rs []RLE, intersect bool) (RLE, error) {
	if len(rs) == 0 {
		return RLE{}, nil
	}
	h, w := rs[0].H, rs[0].W
	cnts := slices.Clone(rs[0].Counts)
	if len(rs) == 1 {
		return RLE{H: h, W: w, Counts: cnts}, nil
	}
	for i := 1; i < len(rs); i++ {
		B := rs[i]
		if B.H != h || B.W != w {
			return RLE{}, fmt.Errorf("merge of masks of sizes %dx%d and %dx%d", h, w, B.H, B.W)
		}
		A := cnts
		if len(A) == 0 || len(B.Counts) == 0 {
			return RLE{}, errors.New("merge of a mask without runs")
		}
		out := make([]uint32, 0, len(A)+len(B.Counts))
		ca, cb := A[0], B.Counts[0]
		var v, va, vb, vp bool
		a, b := 1, 1
		var cc uint32
		ct := uint32(1)
		for ct > 0 {
			c := min(ca, cb)
			cc += c
			ct = 0
			ca -= c
			if ca == 0 && a < len(A) {
				ca = A[a]
				a++
				va = !va
			}
			ct += ca
			cb -= c
			if cb == 0 && b < len(B.Counts) {
				cb = B.Counts[b]
				b++
				vb = !vb
			}
			ct += cb
			vp = v
			if intersect {
				v = va && vb
			} else {
				v = va || vb
			}
			if v != vp || ct == 0 {
				out = append(out, cc)
				cc = 0
			}
		}
		cnts = out
	}
	return RLE{H: h, W: w, Counts: cnts}, nil
}

// decodeColumnMajor writes the mask into m (H*W bytes, column-major, the
// order of the runs), 0 or 1 per pixel.
func (r *RLE) decodeColumnMajor(m []byte) error {
	if err := r.check(); err != nil {
		return err
	}
	p := 0
	var val byte
	for _, c := range r.Counts {
		for range c {
			m[p] = val
			p++
		}
		val ^= 1
	}
	return nil
}

// Mask decodes r into an H x W mask in row-major order (m[y*W+x]), the
// layout of pycocotools' annToMask and of torchvision's Mask: 1 where
// set, 0 elsewhere. A mask whose runs do not cover H*W pixels exactly is
// an error.
func (r *RLE) Mask() ([]byte, error) {
	if r.H < 0 || r.W < 0 || r.H*r.W > MaxMaskPixels {
		return nil, fmt.Errorf("size %dx%d out of bounds", r.H, r.W)
	}
	col := make([]byte, r.H*r.W)
	if err := r.decodeColumnMajor(col); err != nil {
		return nil, err
	}
	out := make([]byte, len(col))
	for x := 0; x < r.W; x++ {
		for y := 0; y < r.H; y++ {
			out[y*r.W+x] = col[x*r.H+y]
		}
	}
	return out, nil
}

// Encode run-length encodes the row-major h x w mask m (any nonzero byte
// is set), as pycocotools' encode of a Fortran-ordered array.
func Encode(m []byte, h, w int) (RLE, error) {
	if h < 0 || w < 0 || h*w > MaxMaskPixels || len(m) != h*w {
		return RLE{}, fmt.Errorf("mask of %d bytes is not %dx%d", len(m), h, w)
	}
	var cnts []uint32
	var p byte
	var c uint32
	for x := 0; x < w; x++ {
		for y := 0; y < h; y++ {
			t := m[y*w+x]
			if t != 0 {
				t = 1
			}
			if t != p {
				cnts = append(cnts, c)
				c = 0
				p = t
			}
			c++
		}
	}
	cnts = append(cnts, c)
	return RLE{H: h, W: w, Counts: cnts}, nil
}

// Area is the number of set pixels, as pycocotools' area.
func (r *RLE) Area() uint32 {
	var a uint32
	for j := 1; j < len(r.Counts); j += 2 {
		a += r.Counts[j]
	}
	return a
}

// BBox is the mask's box [x, y, w, h] in pixels, as pycocotools 2.0.11's
// toBbox: zeros for an empty mask; a run of set pixels that crosses from
// one column to the next spans the whole height.
func (r *RLE) BBox() [4]float64 {
	h, w := uint32(r.H), uint32(r.W)
	m := len(r.Counts) / 2 * 2
	xs, ys := w, h
	var xe, ye, cc uint32
	if m == 0 || h == 0 {
		return [4]float64{}
	}
	for j := range m {
		start := cc
		cc += r.Counts[j]
		if j%2 == 0 || r.Counts[j] == 0 {
			continue
		}
		yS := start % h
		xS := (start - yS) / h
		yE := (cc - 1) % h
		xE := (cc - 1 - yE) / h
		xs = min(xs, xS)
		xe = max(xe, xE)
		if xS < xE {
			ys, ye = 0, h-1
		} else {
			ys = min(ys, yS)
			ye = max(ye, yE)
		}
	}
	return [4]float64{float64(xs), float64(ys), float64(xe) - float64(xs) + 1, float64(ye) - float64(ys) + 1}
}

// String is the compressed form of the counts (pycocotools' rleToString:
// each count, less the one two before it from the fourth on, in 5-bit
// groups with a continuation bit, as characters 48..111).
func (r *RLE) String() string {
	s := make([]byte, 0, len(r.Counts)*2)
	for i, c := range r.Counts {
		x := int64(c)
		if i > 2 {
			x -= int64(r.Counts[i-2])
		}
		more := true
		for more {
			ch := byte(x & 0x1f)
			x >>= 5
			if ch&0x10 != 0 {
				more = x != -1
			} else {
				more = x != 0
			}
			if more {
				ch |= 0x20
			}
			s = append(s, ch+48)
		}
	}
	return string(s)
}

// FromString decodes the compressed form s of an h x w mask
// (pycocotools' rleFrString). Characters outside 48..111, a value of more
// than 7 characters (past 32 bits), a count that comes out negative or
// past 32 bits, and runs that do not cover h*w pixels are errors: in
// pycocotools they are undefined or a bad mask.
func FromString(s string, h, w int) (RLE, error) {
	if h < 0 || w < 0 || h*w > MaxMaskPixels {
		return RLE{}, fmt.Errorf("size %dx%d out of bounds", h, w)
	}
	var cnts []uint32
	p := 0
	for p < len(s) {
		if len(cnts) >= MaxRLECounts {
			return RLE{}, fmt.Errorf("more than %d runs", MaxRLECounts)
		}
		var x int64
		k := 0
		more := true
		for more {
			if p >= len(s) {
				return RLE{}, fmt.Errorf("counts string ends inside a value (at byte %d)", p)
			}
			if s[p] < 48 || s[p] > 111 {
				return RLE{}, fmt.Errorf("counts string has byte %q at %d: want characters '0'..'o'", s[p], p)
			}
			if k >= 7 {
				return RLE{}, fmt.Errorf("counts string has a value of more than 7 characters at byte %d", p)
			}
			c := int64(s[p] - 48)
			x |= (c & 0x1f) << (5 * k)
			more = c&0x20 != 0
			p++
			k++
			if !more && c&0x10 != 0 {
				x |= -1 << (5 * k)
			}
		}
		if m := len(cnts); m > 2 {
			x += int64(cnts[m-2])
		}
		if x < 0 || x > math.MaxUint32 {
			return RLE{}, fmt.Errorf("counts string gives run %d the count %d", len(cnts), x)
		}
		cnts = append(cnts, uint32(x))
	}
	r := RLE{H: h, W: w, Counts: cnts}
	if err := r.check(); err != nil {
		return RLE{}, err
	}
	return r, nil
}
