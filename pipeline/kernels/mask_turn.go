package kernels

// The masks through a rotation or an affine map, which are not
// separable: the axis maps made into one index a canvas pixel
// (CanvasIndex), moved as a plane is with NEAREST (RotateIndex,
// AffineIndex, RotateExpandIndex), or read through the maps where the
// turn samples a grid (RotateMapsIndex, AffineMapsIndex).

import (
	"math"
	"slices"
	"sort"
)

// CanvasIndex materializes the maps ys and xs into one index a canvas
// pixel, row-major over len(ys) x len(xs), appended to dst[:0]: the source
// pixel each comes from (as MaskRuns indexes src, srcW columns, through
// base when there is one), a fill's code (FillCode) for the fill: a pixel
// whose row and column are both fills the later's (the lower code). A
// rotation or an affine map is not separable: it moves this index
// (AffineIndex), which then is the base of identity maps.
func CanvasIndex(dst, base []int32, bw, srcW int, ys, xs []int32) []int32 {
	n := len(ys) * len(xs)
	dst = slices.Grow(dst[:0], n)[:n]
	for r, y := range ys {
		o := dst[r*len(xs) : (r+1)*len(xs)]
		switch {
		case y < 0: // a fill's row: the later code of the two
			for j, x := range xs {
				o[j] = min(y, x)
			}
		case len(base) > 0:
			b := base[int(y)*bw:]
			for j, x := range xs {
				if x >= 0 {
					x = b[x]
				}
				o[j] = x
			}
		default:
			at := y * int32(srcW)
			for j, x := range xs {
				if x >= 0 {
					x += at
				}
				o[j] = x
			}
		}
	}
	return dst
}

// RotateIndex is rotate_mask (expand=False) of a w x h canvas of
// indices (CanvasIndex's), as Rotate moves a plane with NEAREST, fill
// (a FillCode) where the source is not: the
// fast paths of 0, 180, and 90 or 270 degrees of a square canvas about
// its centre, else grid_sample's nearest through the inverse matrix. tmp
// is scratch (its room reused); the result is idx's (or tmp's) room.
func RotateIndex(idx []int32, w, h int, angle float64, center [2]float64, hasCenter bool, fill int32, tmp []int32) ([]int32, []int32) {
	angle = pyMod(angle, 360)
	if !hasCenter {
		switch {
		case angle == 0:
			return idx, tmp
		case angle == 180:
			for i, j := 0, len(idx)-1; i < j; i, j = i+1, j-1 {
				idx[i], idx[j] = idx[j], idx[i]
			}
			return idx, tmp
		case (angle == 90 || angle == 270) && w == h:
			tmp = append(tmp[:0], idx...)
			n := w
			for i := range n {
				for j := range n {
					if angle == 90 { // rot90's ccw: out[i][j] = in[j][n-1-i]
						idx[i*n+j] = tmp[j*n+n-1-i]
					} else { // out[i][j] = in[n-1-j][i]
						idx[i*n+j] = tmp[(n-1-j)*n+i]
					}
				}
			}
			return idx, tmp
		}
	}
	m := inverseAffine(w, h, center, hasCenter, -angle, [2]float64{}, 1, [2]float64{})
	return affineIndex(idx, w, h, &m, fill, tmp)
}

// AffineIndex is affine_mask (NEAREST) of a w x h canvas of indices, as
// Affine moves a plane, fill (a FillCode) where the source is not; a's
// Interp and Fill are not read.
func AffineIndex(idx []int32, w, h int, a *AffineParams, fill int32, tmp []int32) ([]int32, []int32) {
	m := inverseAffine(w, h, a.Center, a.HasCenter, a.Angle, [2]float64{a.TX, a.TY}, a.Scale, [2]float64{a.ShearX, a.ShearY})
	return affineIndex(idx, w, h, &m, fill, tmp)
}

// affineIndex is nearestAffine on indices: each output pixel takes the
// index at the point m sends it to, rounded half to even, or fill where
// that is outside. It returns the moved index (tmp's room) and idx's room
// for the next scratch.
func affineIndex(idx []int32, w, h int, m *[6]float64, fill int32, tmp []int32) ([]int32, []int32) {
	return affineIndexTo(idx, nil, w, h, newAffineGrid(m, w, h), w, h, fill, tmp[:0]), idx
}

// affineIndexTo appends to tmp the ow x oh output of affineIndex over the
// grid g (an output of another size: rotate's expand). A row's points
// move monotonically along each axis (every step of the grid's float32
// arithmetic is a monotone rounding: affineGrid.span), so the pixels
// inside the source are one span a row, found by bisection with the
// per-pixel test itself; the fill goes in around it in bulk and the span
// is sampled without the test. A grid whose arithmetic could overflow to
// an infinity or a NaN (and so not be monotone) is sampled a pixel at a
// time, as is any other.
//
// With maps c (not nil), the source is the canvas index c makes (w x h),
// read through them where a point lands, not made first (idx unused).
func affineIndexTo(idx []int32, c *CanvasMaps, w, h int, g affineGrid, ow, oh int, fill int32, tmp []int32) []int32 {
	at, n := len(tmp), ow*oh
	tmp = slices.Grow(tmp, n)[:at+n]
	out := tmp[at:]
	if !g.spannable(ow, oh) {
		for y := range oh {
			r := g.row(y)
			for x := range ow {
				out[y*ow+x] = indexAt(idx, c, w, h, &g, x, r, fill)
			}
		}
		return tmp
	}
	// A band of rows at a time, across it a tile of columns at a time: a
	// turned row reads the source along a slanted line, a tile a small
	// patch of it that stays in the cache.
	const band, tile = 32, 64
	var spans [band][2]int
	var rows [band]gridRow
	for y0 := 0; y0 < oh; y0 += band {
		nb := min(band, oh-y0)
		for b := range nb {
			r := g.row(y0 + b)
			lo, hi := g.span(r, w, h, ow)
			rows[b], spans[b] = r, [2]int{lo, hi}
			o := out[(y0+b)*ow : (y0+b+1)*ow]
			for x := range o[:lo] {
				o[x] = fill
			}
			for x := hi; x < ow; x++ {
				o[x] = fill
			}
		}
		for x0 := 0; x0 < ow; x0 += tile {
			for b := range nb {
				lo, hi := max(spans[b][0], x0), min(spans[b][1], x0+tile)
				if lo < hi {
					g.sampleSpan(out[(y0+b)*ow:(y0+b+1)*ow], idx, c, w, rows[b], lo, hi)
				}
			}
		}
	}
	return tmp
}

// sampleSpan sets o[lo:hi], pixels of the row r whose points are all
// inside the w-column source (span), to the index at each point.
func (g *affineGrid) sampleSpan(o, idx []int32, c *CanvasMaps, w int, r gridRow, lo, hi int) {
	if !g.fused {
		for x := lo; x < hi; x++ {
			ix, iy := g.at(x, r)
			o[x] = c.pick(idx, w, int(roundEven32(iy)), int(roundEven32(ix)))
		}
		return
	}
	// at's fma32(r.Y, r1, a) with the row's product made once (fma32
	// rounds the same exact product), fmaRow's test inlined: its float64
	// sum rounded once more where that is fma32's rounding, else
	// fmaRow's other steps.
	//
	// Most points are not near a pixel's edge, and there the pixel is
	// known without the float32 steps: each of them (X*r0, the fma, +r2,
	// +1, unnormalize's float64 product and its float32 rounding) rounds
	// to nearest, within 2^-24 of its result, so the point is within
	// half*M*5*2^-24 + 2^-25 of t, the same sum in reals (M bounds the
	// magnitudes summed: |X*r0| + |Y*r1| + |r2| + 1). t is made in
	// float64 (its own error far below that), e (2^-20 of half*M, plus
	// 2^-20) bounds both with room, and where all of [t-e, t+e] lies
	// strictly inside one pixel's (k-0.5, k+0.5) the point rounds to k,
	// ties and all; else (and within e of pixel 0's outer edge, where
	// int() is no floor) the float32 steps decide.
	px, py := float64(float64(r.Y)*float64(g.r1x)), float64(float64(r.Y)*float64(g.r1y))
	r0x, r0y, r2x, r2y := float64(g.r0x), float64(g.r0y), float64(g.r2x)+1, float64(g.r2y)+1
	xm := max(math.Abs(float64(lo)-g.cx), math.Abs(float64(hi-1)-g.cx))
	ex := float64(float64(g.halfW*(float64(xm*math.Abs(r0x))+math.Abs(px)+math.Abs(float64(g.r2x))+1))*0x1p-20) + 0x1p-20
	ey := float64(float64(g.halfH*(float64(xm*math.Abs(r0y))+math.Abs(py)+math.Abs(float64(g.r2y))+1))*0x1p-20) + 0x1p-20
	X := float32(float64(lo) - g.cx) // exact, as each X after it: |X| < 2^23
	o = o[lo:hi]
	for x := range o {
		Xd := float64(X)
		tx := float64(float64(float64(float64(Xd*r0x)+px)+r2x)*g.halfW) - 0.5
		ty := float64(float64(float64(float64(Xd*r0y)+py)+r2y)*g.halfH) - 0.5
		lx, ly := tx-ex+0.5, ty-ey+0.5
		xi, yi := int(lx), int(ly) // floors where lx, ly > 0
		if !(lx > 0 && ly > 0 && float64(xi) != lx && float64(yi) != ly && xi == int(tx+ex+0.5) && yi == int(ty+ey+0.5)) {
			ax, ay := float32(X*g.r0x), float32(X*g.r0y)
			sx, sy := px+float64(ax), py+float64(ay)
			if !oneRounding(sx) || !oneRounding(sy) {
				sx, sy = float64(fmaRow(px, ax)), float64(fmaRow(py, ay))
			}
			gx, gy := float32(float32(sx)+g.r2x), float32(float32(sy)+g.r2y)
			ix, iy := unnormalize(gx, g.halfW), unnormalize(gy, g.halfH)
			yi, xi = int(roundEven32(iy)), int(roundEven32(ix))
		}
		if c == nil {
			o[x] = idx[yi*w+xi]
		} else {
			o[x] = c.at(yi, xi)
		}
		X++
	}
}

// indexAt is affineIndex's output pixel x of the grid's row r: the index
// at its point, rounded half to even, or fill where that is outside.
func indexAt(idx []int32, c *CanvasMaps, w, h int, g *affineGrid, x int, r gridRow, fill int32) int32 {
	ix, iy := g.at(x, r)
	if inside(ix, w) && inside(iy, h) {
		return c.pick(idx, w, int(roundEven32(iy)), int(roundEven32(ix)))
	}
	return fill
}

// CanvasMaps are the maps CanvasIndex makes a canvas index of: its
// arguments base, bw, srcW, ys and xs.
type CanvasMaps struct {
	Base     []int32
	BW, SrcW int
	Ys, Xs   []int32
}

// at is the canvas index' entry at row yi, column xi, as CanvasIndex
// makes it.
func (c *CanvasMaps) at(yi, xi int) int32 {
	y, x := c.Ys[yi], c.Xs[xi]
	switch {
	case y < 0 || x < 0:
		return min(y, x)
	case len(c.Base) > 0:
		return c.Base[int(y)*c.BW+int(x)]
	}
	return y*int32(c.SrcW) + x
}

// pick is the entry at row yi, column xi of the w-column canvas index idx,
// or, with maps c (not nil), of the one they make.
func (c *CanvasMaps) pick(idx []int32, w, yi, xi int) int32 {
	if c == nil {
		return idx[yi*w+xi]
	}
	return c.at(yi, xi)
}

// RotateMapsIndex is CanvasIndex of the maps c (in spare's room) moved by
// RotateIndex, or RotateExpandIndex with expand: the moved index, its
// size and the room for scratch. Where the turn samples through a grid
// (not one of the fast paths of a multiple of 90 degrees about the
// canvas' centre) the canvas index is not made: the grid reads it
// through the maps where its points land.
func RotateMapsIndex(c *CanvasMaps, spare []int32, angle float64, center [2]float64, hasCenter, expand bool, fill int32, tmp []int32) ([]int32, int, int, []int32) {
	w, h := len(c.Xs), len(c.Ys)
	a := pyMod(angle, 360)
	if !hasCenter && (a == 0 || a == 90 || a == 180 || a == 270) {
		idx := CanvasIndex(spare, c.Base, c.BW, c.SrcW, c.Ys, c.Xs)
		if expand {
			return RotateExpandIndex(idx, w, h, angle, center, hasCenter, fill, tmp)
		}
		idx, tmp = RotateIndex(idx, w, h, angle, center, hasCenter, fill, tmp)
		return idx, w, h, tmp
	}
	ow, oh := w, h
	if expand {
		ow, oh = RotatedSize(w, h, angle, center, hasCenter)
	}
	m := inverseAffine(w, h, center, hasCenter, -a, [2]float64{}, 1, [2]float64{})
	return affineIndexTo(nil, c, w, h, newAffineGridTo(&m, w, h, ow, oh), ow, oh, fill, tmp[:0]), ow, oh, spare
}

// AffineMapsIndex is CanvasIndex of the maps c moved by AffineIndex,
// without making the canvas index (RotateMapsIndex): the moved index and
// the room for scratch (spare, unused).
func AffineMapsIndex(c *CanvasMaps, spare []int32, a *AffineParams, fill int32, tmp []int32) ([]int32, []int32) {
	w, h := len(c.Xs), len(c.Ys)
	m := inverseAffine(w, h, a.Center, a.HasCenter, a.Angle, [2]float64{a.TX, a.TY}, a.Scale, [2]float64{a.ShearX, a.ShearY})
	return affineIndexTo(nil, c, w, h, newAffineGrid(&m, w, h), w, h, fill, tmp[:0]), spare
}

// inside is affineIndex's test of a point's coordinate v on an axis of n
// pixels: within [-0.5, n-0.5] (NaN is not) and rounded (half to even) to
// a pixel before n.
func inside(v float32, n int) bool {
	return v >= -0.5 && v <= float32(n)-0.5 && int(roundEven32(v)) < n
}

// fmaRow is fma32(a, b, c) given p, the product float64(a)*float64(b)
// (exact), as fma32 makes it. Its float64 sum s rounds to the float32 the
// exact sum does unless s is halfway between two float32s: every such
// midpoint is a float64, so the exact sum and s (rounded monotonically to
// float64) lie on the same side of each, and fma32's rounding to odd moves
// s by one float64 ulp, to an odd float64, which no midpoint is (a normal
// float32's midpoint has 28 zero bits below its 29th). So where s is a
// normal float32's size and no midpoint, float32(s) is fma32's; elsewhere
// fma32's own steps decide.
func fmaRow(p float64, c float32) float32 {
	if s := p + float64(c); oneRounding(s) {
		return float32(s)
	}
	return fmaOdd(p, c)
}

// oneRounding says whether float32(s) is the float32 the exact sum that
// rounded to the float64 s rounds to (fmaRow): s is of a normal float32's
// size (2^-126 <= |s| < 2^127) and no float32's midpoint.
func oneRounding(s float64) bool {
	b := math.Float64bits(s)
	return b&(1<<29-1) != 1<<28 && b>>52&0x7ff-(1023-126) < 253
}

// fmaOdd is fma32 given the exact product p.
func fmaOdd(p float64, c float32) float32 {
	cc := float64(c)
	s := p + cc
	bb := s - p
	if e := (p - (s - bb)) + (cc - bb); e != 0 && math.Float64bits(s)&1 == 0 {
		if (e > 0) == (s > 0) {
			s = math.Float64frombits(math.Float64bits(s) + 1)
		} else {
			s = math.Float64frombits(math.Float64bits(s) - 1)
		}
	}
	return float32(s)
}

// spanLimit bounds the grid's coefficients for span: with |X|, |Y| below
// 2^24 pixels, a sum of three products below 2^100 * 2^24 each stays
// below float32's largest, so no step makes an infinity or a NaN.
const spanLimit = 1 << 100

// spannable says whether span may be used: every coefficient finite and
// below spanLimit, and the output within 2^23 pixels a side.
func (g *affineGrid) spannable(ow, oh int) bool {
	for _, c := range [...]float32{g.r0x, g.r1x, g.r2x, g.r0y, g.r1y, g.r2y} {
		if !(c > -spanLimit && c < spanLimit) {
			return false
		}
	}
	return ow < 1<<23 && oh < 1<<23
}

// span returns the output pixels [lo, hi) of the row r whose points are
// inside the w x h source (affineIndex's test); lo == hi when none is.
// Along a row, X grows with x, X*r0 is monotone (up for r0 >= 0, down
// otherwise), and each later step (adding the row's share, fma32,
// unnormalize's float32 and float64 steps) is a correctly rounded
// monotone operation of it; so each coordinate is monotone in x, each of
// its two bounds holds on a prefix or a suffix of the row, and bisection
// finds where, with the test itself at every probe.
func (g *affineGrid) span(r gridRow, w, h, ow int) (lo, hi int) {
	lo, hi = 0, ow
	for axis := range 2 {
		n, up := w, g.r0x >= 0
		if axis == 1 {
			n, up = h, g.r0y >= 0
		}
		coord := func(x int) float32 {
			ix, iy := g.at(x, r)
			if axis == 1 {
				return iy
			}
			return ix
		}
		above := func(x int) bool { return coord(x) >= -0.5 }
		below := func(x int) bool {
			v := coord(x)
			return v <= float32(n)-0.5 && int(roundEven32(v)) < n
		}
		if up { // above holds on a suffix, below on a prefix
			lo = max(lo, sort.Search(ow, above))
			hi = min(hi, sort.Search(ow, func(x int) bool { return !below(x) }))
		} else { // above on a prefix, below on a suffix
			hi = min(hi, sort.Search(ow, func(x int) bool { return !above(x) }))
			lo = max(lo, sort.Search(ow, below))
		}
	}
	if lo > hi {
		lo = hi
	}
	return lo, hi
}

// RotateExpandIndex is rotate_mask(expand=True) of a w x h canvas of
// indices, as RotateExpand moves a plane with NEAREST, fill (a FillCode)
// where the source is not: it returns the moved canvas (of RotatedSize),
// its size, and the room for scratch.
func RotateExpandIndex(idx []int32, w, h int, angle float64, center [2]float64, hasCenter bool, fill int32, tmp []int32) ([]int32, int, int, []int32) {
	ow, oh := RotatedSize(w, h, angle, center, hasCenter)
	a := pyMod(angle, 360)
	if ow == w && oh == h && !(!hasCenter && (a == 90 || a == 270) && w != h) {
		idx, tmp = RotateIndex(idx, w, h, angle, center, hasCenter, fill, tmp)
		return idx, w, h, tmp
	}
	tmp = tmp[:0]
	if !hasCenter && (a == 90 || a == 270) { // torch.rot90 of any size
		for i := range w {
			for j := range h {
				if a == 90 {
					tmp = append(tmp, idx[j*w+w-1-i])
				} else {
					tmp = append(tmp, idx[(h-1-j)*w+i])
				}
			}
		}
		return tmp, ow, oh, idx
	}
	m := inverseAffine(w, h, center, hasCenter, -a, [2]float64{}, 1, [2]float64{})
	return affineIndexTo(idx, nil, w, h, newAffineGridTo(&m, w, h, ow, oh), ow, oh, fill, tmp), ow, oh, idx
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

// divider divides a source index by the source's width without a
// division instruction: a float64 reciprocal's quotient, off by at most
// one, corrected.
type divider struct {
	w   int32
	inv float64
}

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
