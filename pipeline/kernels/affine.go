package kernels

import "math"

// Resampling for rotate and affine: one pass, each output pixel sampled
// at the point the inverse matrix takes it to, with torchvision's tensor
// arithmetic reproduced operation by operation so that the bytes are
// torch's (python/tests/test_parity_geometry_kernels.py,
// test_rotate_large.py: identical on x86-64 with torch 2.15). torchvision
// builds a float32 grid (_affine_grid: the matrix divided by half the
// size, times the pixel's offset from the center, a bmm of the output's
// N points by it: affineGrid says in which order torch sums them), then
// grid_sample (align_corners=False, zeros padding), compiled
// with contraction, unnormalizes each point as fma(g+1, size/2, -0.5) and
// sums the taps times their weights with fused multiply-adds; it samples a
// channel of ones the same way as the mask, blends the fill through it,
// rounds half to even and casts to uint8.
//
// Floating point here: every float32 product that is added is rounded by
// float32(...), so the compiler cannot fuse it, and torch's fused float32
// multiply-adds are fma32 (exact, in float64). unnormalize needs no fma32:
// g+1 is a float32 multiple of 2^-24 and size/2 one of 2^-1, so for every
// point within 2^24 pixels of the image the float64 sum is exact and
// rounds once, to float32 (a point farther away is outside either way).

// affineGrid maps output pixels to the points they sample, in input pixels.
//
// torch's bmm of the N x 3 points [X, Y, 1] by the 3 x 2 matrix sums each
// coordinate in one of two orders (torch 2.15, x86-64): below
// torchBLASPoints points, in its own loop, (X*r0 + Y*r1) + r2, every step
// rounded; from there on in MKL's sgemm, which on a CPU where MKL takes
// its AVX-512 path fuses the second product: fma(Y, r1, X*r0) + r2 (fused).
// MKL's AVX2, AVX and SSE4.2 paths (and MKL_CBWR=COMPATIBLE) sum the
// large grid unfused, as the small one; stoker's bytes do not depend on
// the CPU it runs on, and follow the AVX-512 path, as the boxes' matmul
// does (targets/affine.go). The two orders differ by one ulp of the grid
// on about a third of the points, which moves a nearest pixel only when
// its point is within an ulp of a pixel edge (python/tests/
// test_rotate_large.py measures both).
type affineGrid struct {
	r0x, r1x, r2x float32 // torchvision's rescaled theta, x row
	r0y, r1y, r2y float32 // y row
	halfW, halfH  float64 // grid_sample's size/2 (exact)
	cx, cy        float64 // (size-1)/2: the output grid's center
	fused         bool    // MKL's order: ow*oh >= torchBLASPoints
}

// torchBLASPoints is the fewest output points whose grid torch's bmm
// hands to the BLAS: it keeps to its own loop while contraction (3) x
// rows (the points) x columns (2) is below 400.
const torchBLASPoints = 67

func newAffineGrid(m *[6]float64, w, h int) affineGrid { return newAffineGridTo(m, w, h, w, h) }

// newAffineGridTo is newAffineGrid for an output of ow x oh (rotate's
// expand): torchvision's _affine_grid divides the matrix by the input's
// half size and centres the grid on the output.
func newAffineGridTo(m *[6]float64, w, h, ow, oh int) affineGrid {
	hw, hh := float32(0.5*float64(w)), float32(0.5*float64(h))
	return affineGrid{
		r0x: float32(m[0]) / hw, r1x: float32(m[1]) / hw, r2x: float32(m[2]) / hw,
		r0y: float32(m[3]) / hh, r1y: float32(m[4]) / hh, r2y: float32(m[5]) / hh,
		halfW: float64(w) / 2, halfH: float64(h) / 2,
		cx: float64(ow-1) * 0.5, cy: float64(oh-1) * 0.5,
		fused: ow*oh >= torchBLASPoints,
	}
}

// gridRow is one output row's share of the grid.
type gridRow struct {
	Y      float32 // the row's offset from the center
	rx, ry float32 // Y times the second column, rounded (the unfused order)
}

// row returns output row y's share of the grid.
func (g *affineGrid) row(y int) gridRow {
	Y := float32(float64(y) - g.cy) // a half-integer or integer: exact
	return gridRow{Y: Y, rx: float32(Y * g.r1x), ry: float32(Y * g.r1y)}
}

// at returns the point output pixel x of the row r samples.
func (g *affineGrid) at(x int, r gridRow) (ix, iy float32) {
	X := float32(float64(x) - g.cx)
	var gx, gy float32
	if g.fused {
		gx = float32(fma32(r.Y, g.r1x, float32(X*g.r0x)) + g.r2x)
		gy = float32(fma32(r.Y, g.r1y, float32(X*g.r0y)) + g.r2y)
	} else {
		gx = float32(float32(float32(X*g.r0x)+r.rx) + g.r2x)
		gy = float32(float32(float32(X*g.r0y)+r.ry) + g.r2y)
	}
	return unnormalize(gx, g.halfW), unnormalize(gy, g.halfH)
}

// unnormalize is grid_sample's fma(g+1, size/2, -0.5), align_corners=False.
func unnormalize(g float32, half float64) float32 {
	return float32(float64(float64(g+1)*half) - 0.5)
}

// fma32 is a*b+c rounded once to float32, as a fused multiply-add: the
// product is exact in float64, and the float64 sum is rounded to odd (its
// last bit set when it is inexact, toward the exact sum), after which one
// rounding to float32 is the correct one (two plain roundings could differ
// when the float64 sum lands halfway between two float32s).
func fma32(a, b, c float32) float32 {
	p, cc := float64(float64(a)*float64(b)), float64(c)
	s := p + cc
	bb := s - p
	if e := (p - (s - bb)) + (cc - bb); e != 0 && math.Float64bits(s)&1 == 0 { // TwoSum: s+e is exact
		if (e > 0) == (s > 0) {
			s = math.Float64frombits(math.Float64bits(s) + 1)
		} else {
			s = math.Float64frombits(math.Float64bits(s) - 1)
		}
	}
	return float32(s)
}

// roundEven32 rounds to an integer, ties to even (for |f| < 2^22).
func roundEven32(f float32) float32 {
	const magic = 1 << 23 * 1.5 // adding it leaves no fraction bits
	return float32(f+magic) - magic
}

// roundCast rounds half to even and casts to uint8 as torch does (through
// an integer: -1 becomes 255), for |f| < 2^22.
func roundCast(f float32) uint8 {
	return uint8(int32(roundEven32(f)))
}

// resampleAffine applies m to p: each output pixel takes the value at the
// point m sends it to, or the fill (clamped to 0..255; the pipeline's
// checkStep refuses others) where that point is outside. The C version (geom.c) runs where
// the CPU has AVX2 and FMA; the Go version below (and bicubic.go)
// gives the same bytes everywhere else (TestAffineCMatchesGo).
func resampleAffine(p Planes, m *[6]float64, interp Interpolation, fill [3]float64, noFill bool, s *Scratch) {
	g := newAffineGrid(m, p.W, p.H)
	var f [3]float32
	if !noFill {
		for c := range 3 {
			f[c] = float32(min(max(fill[c], 0), 255))
		}
	}
	if affineC(p, &g, interp, f, noFill, s) {
		return
	}
	resampleAffineGo(p, &g, interp, f, noFill, s)
}

// resampleAffineGo is resampleAffine in Go.
func resampleAffineGo(p Planes, g *affineGrid, interp Interpolation, f [3]float32, noFill bool, s *Scratch) {
	src := s.bytes(0, len(p.Pix))
	copy(src, p.Pix)
	var fb [3]uint8 // a pixel with no tap inside gets the fill (0 if none)
	for c := range 3 {
		fb[c] = roundCast(f[c])
	}
	switch interp {
	case Nearest:
		nearestAffine(p, src, p.W, p.H, g, fb)
	case Bicubic:
		bicubicAffine(p, src, g, f, fb, noFill)
	default:
		bilinearAffine(p, src, g, f, fb, noFill)
	}
}

// nearestAffine is grid_sample's nearest mode: the source pixel at the
// point rounded half to even, or the fill when that is outside. src is
// w x h, p the output (of its own size: rotate's expand).
func nearestAffine(p Planes, src []byte, w, h int, g *affineGrid, fb [3]uint8) {
	n, on := w*h, p.W*p.H
	fw, fh := float32(w)-0.5, float32(h)-0.5
	o0, o1, o2 := p.Pix[:on:on], p.Pix[on:2*on:2*on], p.Pix[2*on:3*on:3*on]
	s0, s1, s2 := src[:n:n], src[n:2*n:2*n], src[2*n:3*n:3*n]
	for y := 0; y < p.H; y++ {
		r := g.row(y)
		for x := 0; x < p.W; x++ {
			o := y*p.W + x
			ix, iy := g.at(x, r)
			if ix >= -0.5 && ix <= fw && iy >= -0.5 && iy <= fh { // NaN is outside
				xi, yi := int(roundEven32(ix)), int(roundEven32(iy))
				if xi < w && yi < h {
					k := yi*w + xi
					o0[o], o1[o], o2[o] = s0[k], s1[k], s2[k]
					continue
				}
			}
			o0[o], o1[o], o2[o] = fb[0], fb[1], fb[2]
		}
	}
}

// bilinearAffine is grid_sample's bilinear mode, then the fill blended
// through the mask (unless noFill). A point with all four taps inside is
// first summed in plain float32 (approxTaps), which is within 2^-11 of
// torch's result after the blend; only when that lies within 2^-10 of a
// half-integer, where the two might round apart, is the pixel computed
// as torch does (bilinearExact), as is every point near the border.
func bilinearAffine(p Planes, src []byte, g *affineGrid, f [3]float32, fb [3]uint8, noFill bool) {
	bilinearAffineFrom(p, src, p.W, p.H, g, f, fb, noFill)
}

// bilinearAffineFrom is bilinearAffine from a w x h src into p (of its
// own size: rotate's expand).
func bilinearAffineFrom(p Planes, src []byte, sw, sh int, g *affineGrid, f [3]float32, fb [3]uint8, noFill bool) {
	w, h := p.W, p.H
	b := newBilinearTapsFrom(p, src, sw, sh, f, fb, noFill)
	for y := 0; y < h; y++ {
		r := g.row(y)
		for x := 0; x < w; x++ {
			o := y*w + x
			ix, iy := g.at(x, r)
			b.at(o, ix, iy)
		}
	}
}

// bilinearTaps samples src (planes of p's size) into p's pixels, one
// output pixel a call, as bilinearAffine describes: the affine and
// perspective kernels differ only in the grid that gives each pixel's
// point.
type bilinearTaps struct {
	out, src               []byte
	s0, s1, s2, o0, o1, o2 []byte
	w, h, on               int // src's size; the output's plane
	fw, fh                 float32
	f                      [3]float32
	fb                     [3]uint8 // a pixel with no tap inside
	noFill                 bool
}

func newBilinearTaps(p Planes, src []byte, f [3]float32, fb [3]uint8, noFill bool) bilinearTaps {
	return newBilinearTapsFrom(p, src, p.W, p.H, f, fb, noFill)
}

// newBilinearTapsFrom is newBilinearTaps from a w x h src.
func newBilinearTapsFrom(p Planes, src []byte, w, h int, f [3]float32, fb [3]uint8, noFill bool) bilinearTaps {
	n, on := w*h, p.W*p.H
	return bilinearTaps{
		out: p.Pix, src: src,
		s0: src[:n:n], s1: src[n : 2*n : 2*n], s2: src[2*n : 3*n : 3*n],
		o0: p.Pix[:on:on], o1: p.Pix[on : 2*on : 2*on], o2: p.Pix[2*on : 3*on : 3*on],
		w: w, h: h, on: on, fw: float32(w), fh: float32(h), f: f, fb: fb, noFill: noFill,
	}
}

// at writes output pixel o from the point (ix, iy) of the source.
func (b *bilinearTaps) at(o int, ix, iy float32) {
	w, h, fw, fh, f, fb, noFill := b.w, b.h, b.fw, b.fh, b.f, b.fb, b.noFill
	s0, s1, s2, o0, o1, o2 := b.s0, b.s1, b.s2, b.o0, b.o1, b.o2
	if !(ix > -1 && ix < fw && iy > -1 && iy < fh) { // no tap inside (or NaN)
		o0[o], o1[o], o2[o] = fb[0], fb[1], fb[2]
		return
	}
	xi, yi := int(ix), int(iy)
	if float32(xi) > ix { // floor, for ix > -1
		xi--
	}
	if float32(yi) > iy {
		yi--
	}
	we, no := ix-float32(xi), iy-float32(yi)
	ea, so := 1-we, 1-no
	wts := [4]float32{float32(so * ea), float32(so * we), float32(no * ea), float32(no * we)} // nw, ne, sw, se
	if xi < 0 || xi+1 >= w || yi < 0 || yi+1 >= h {
		bilinearExact(b.out, b.src, o, b.on, xi, yi, w, h, &wts, f, noFill)
		return
	}
	k := yi*w + xi
	v0 := approxTaps(s0[k], s0[k+1], s0[k+w], s0[k+w+1], &wts)
	v1 := approxTaps(s1[k], s1[k+1], s1[k+w], s1[k+w+1], &wts)
	v2 := approxTaps(s2[k], s2[k+1], s2[k+w], s2[k+w+1], &wts)
	r0, r1, r2 := roundEven32(v0), roundEven32(v1), roundEven32(v2)
	if nearTie(v0-r0) || nearTie(v1-r1) || nearTie(v2-r2) {
		bilinearExact(b.out, b.src, o, b.on, xi, yi, w, h, &wts, f, noFill)
		return
	}
	o0[o], o1[o], o2[o] = uint8(int32(r0)), uint8(int32(r1)), uint8(int32(r2))
}

// approxTaps is the weighted sum of four taps all inside, in plain
// float32. The exact result differs by up to four roundings in the sum
// (torch's fused ones) and seven here, each at most 2^-16 for values below
// 256, and by the fill's blend, which with the four weights summing to
// within 2^-21 of 1 moves it by at most 255 * 2^-21 plus three roundings:
// 2^-11 in all, so a value more than 2^-10 from a half-integer rounds as
// torch's does.
func approxTaps(a, b, c, d uint8, wts *[4]float32) float32 {
	return float32(float32(float32(float32(u8f32[a]*wts[0])+float32(u8f32[b]*wts[1]))+float32(u8f32[c]*wts[2])) + float32(u8f32[d]*wts[3]))
}

// nearTie reports whether d, a value's distance to its nearest integer, is
// within 2^-10 of one half.
func nearTie(d float32) bool {
	return d > 0.5-1.0/1024 || d < -(0.5-1.0/1024)
}

// u8f32 converts a byte to float32 by table.
var u8f32 = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i)
	}
	return t
}()

// bilinearExact writes output pixel o as torch computes it: the taps
// (those outside count as 0) summed with fused multiply-adds, the mask
// summed the same way from ones, the fill blended through it. src is
// w x h, out's planes on bytes each.
func bilinearExact(out, src []byte, o, on, xi, yi, w, h int, wts *[4]float32, f [3]float32, noFill bool) {
	n := w * h
	var in [4]bool
	var off [4]int
	var mask float32
	for t := range 4 {
		x, y := xi+t&1, yi+t>>1
		in[t] = x >= 0 && x < w && y >= 0 && y < h
		off[t] = y*w + x
		if in[t] {
			mask = float32(mask + wts[t]) // fma(1, w, mask) rounds as this sum
		}
	}
	for c := range 3 {
		pl := src[c*n : (c+1)*n]
		var t float32
		if in[0] {
			t = float32(float32(pl[off[0]]) * wts[0])
		}
		for k := 1; k < 4; k++ {
			if in[k] {
				t = fma32(float32(pl[off[k]]), wts[k], t)
			}
		}
		if !noFill {
			t = float32(float32(float32(t-f[c])*mask) + f[c])
		}
		out[c*on+o] = roundCast(t)
	}
}
