package kernels

import (
	"errors"
	"math"
)

// Perspective is torchvision's perspective on a uint8 tensor: the float32
// grid of _perspective_grid, then grid_sample (align_corners=False, zeros
// padding) and the fill blended through a channel of ones, as for rotate
// and affine (affine.go). coeffs are torchvision's eight coefficients
// (PerspectiveCoeffs: output pixel to the point it samples), as float32.
// interp is Bilinear or Nearest (torch's perspective has no other for
// tensors); noFill is fill=None.
//
// The grid, as _perspective_grid computes it in float32: the pixel's
// centre (x + 0.5, y + 0.5) times theta1 divided by half the size, and
// times theta2 ([c6, c7, 1]), each summed as torch sums it (the x term,
// with the y term fused onto it, plus the constant), then their quotient
// less 1.
func Perspective(p Planes, coeffs *[8]float32, interp Interpolation, fill [3]float64, noFill bool, s *Scratch) {
	w, h := p.W, p.H
	g := newPerspGrid(coeffs, w, h)
	var f [3]float32
	var fb [3]uint8 // a pixel with no tap inside gets the fill (0 if none)
	if !noFill {
		for c := range 3 {
			f[c] = float32(min(max(fill[c], 0), 255))
			fb[c] = roundCast(f[c])
		}
	}
	src := s.bytes(0, len(p.Pix))
	copy(src, p.Pix)
	b := newBilinearTaps(p, src, f, fb, noFill)
	fw, fh := b.fw, b.fh
	s0, s1, s2, o0, o1, o2 := b.s0, b.s1, b.s2, b.o0, b.o1, b.o2
	for y := 0; y < h; y++ {
		Y := float32(y) + 0.5 // torch.linspace(0.5, h - 0.5, h): exact
		for x := 0; x < w; x++ {
			o := y*w + x
			ix, iy := g.at(float32(x)+0.5, Y)
			if interp == Nearest {
				if ix >= -0.5 && ix <= fw-0.5 && iy >= -0.5 && iy <= fh-0.5 { // NaN is outside
					xi, yi := int(roundEven32(ix)), int(roundEven32(iy))
					if xi < w && yi < h {
						k := yi*w + xi
						o0[o], o1[o], o2[o] = s0[k], s1[k], s2[k]
						continue
					}
				}
				o0[o], o1[o], o2[o] = fb[0], fb[1], fb[2]
				continue
			}
			b.at(o, ix, iy)
		}
	}
}

// PerspectiveIndex is perspective_mask (NEAREST) of a w x h canvas of
// indices (CanvasIndex's), as Perspective moves a plane with Nearest:
// each output pixel takes the index at the point coeffs send it to,
// rounded half to even, or fill (a FillCode) where that is outside. tmp
// is scratch (its room reused); it returns the moved canvas (tmp's room)
// and idx's room for the next scratch.
func PerspectiveIndex(idx []int32, w, h int, coeffs *[8]float32, fill int32, tmp []int32) ([]int32, []int32) {
	g := newPerspGrid(coeffs, w, h)
	fw, fh := float32(w)-0.5, float32(h)-0.5
	tmp = tmp[:0]
	for y := 0; y < h; y++ {
		Y := float32(y) + 0.5
		for x := 0; x < w; x++ {
			ix, iy := g.at(float32(x)+0.5, Y)
			v := fill
			if ix >= -0.5 && ix <= fw && iy >= -0.5 && iy <= fh { // NaN is outside
				if xi, yi := int(roundEven32(ix)), int(roundEven32(iy)); xi < w && yi < h {
					v = idx[yi*w+xi]
				}
			}
			tmp = append(tmp, v)
		}
	}
	return tmp, idx
}

// newPerspGrid is _perspective_grid's theta1 and theta2 for coeffs on a
// w x h image.
func newPerspGrid(coeffs *[8]float32, w, h int) perspGrid {
	hw, hh := float32(0.5*float64(w)), float32(0.5*float64(h))
	return perspGrid{
		r0x: coeffs[0] / hw, r1x: coeffs[1] / hw, r2x: coeffs[2] / hw,
		r0y: coeffs[3] / hh, r1y: coeffs[4] / hh, r2y: coeffs[5] / hh,
		c6: coeffs[6], c7: coeffs[7],
		halfW: float64(w) / 2, halfH: float64(h) / 2,
	}
}

// perspGrid is _perspective_grid's rescaled theta1 and theta2.
type perspGrid struct {
	r0x, r1x, r2x float32 // theta1's x row over half the width
	r0y, r1y, r2y float32 // its y row over half the height
	c6, c7        float32 // theta2's
	halfW, halfH  float64 // grid_sample's size/2 (exact)
}

// at returns the point, in input pixels, that the output pixel whose
// centre is (X, Y) samples: each of the grid's three sums as torch's bmm
// orders it here, X*a rounded, Y*b fused onto it, then the constant
// (python/tests/test_perspective.py holds it to torch's grid).
func (g *perspGrid) at(X, Y float32) (ix, iy float32) {
	den := float32(fma32(Y, g.c7, float32(X*g.c6)) + 1)
	gx := float32(fma32(Y, g.r1x, float32(X*g.r0x)) + g.r2x)
	gy := float32(fma32(Y, g.r1y, float32(X*g.r0y)) + g.r2y)
	return unnormalize(float32(gx/den)-1, g.halfW), unnormalize(float32(gy/den)-1, g.halfH)
}

// ErrSingular is PerspectiveCoeffs' error for corners that give no
// perspective (three in a line, two the same): torch's least squares
// raises for them too (the matrix does not have full rank).
var ErrSingular = errors.New("the corners give a singular system: no perspective maps them")

// PerspectiveCoeffs is torchvision's _get_perspective_coeffs: the eight
// coefficients (a, b, c, d, e, f, g, h) taking a point of the output
// (endpoints' corners) to the one it samples (startpoints'),
// x' = (a x + b y + c) / (g x + h y + 1), y' = (d x + e y + f) / (g x +
// h y + 1), solved in float64 (torch.linalg.lstsq of the 8 x 8 system,
// here by Gaussian elimination with partial pivoting: the same float64 to
// within a few ulps) and rounded to float32 as torchvision rounds them.
func PerspectiveCoeffs(start, end *[4][2]int) ([8]float32, error) {
	if inLine(start) || inLine(end) {
		return [8]float32{}, ErrSingular
	}
	var a [8][9]float64
	for i := range 4 {
		x, y := float64(end[i][0]), float64(end[i][1])
		u, v := float64(start[i][0]), float64(start[i][1])
		a[2*i] = [9]float64{x, y, 1, 0, 0, 0, -float64(u * x), -float64(u * y), u}
		a[2*i+1] = [9]float64{0, 0, 0, x, y, 1, -float64(v * x), -float64(v * y), v}
	}
	for c := range 8 {
		p := c
		for r := c + 1; r < 8; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if a[p][c] == 0 {
			return [8]float32{}, ErrSingular
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < 8; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k < 9; k++ {
				a[r][k] -= float64(f * a[c][k])
			}
		}
	}
	var sol [8]float64
	var out [8]float32
	for c := 7; c >= 0; c-- {
		s := a[c][8]
		for k := c + 1; k < 8; k++ {
			s -= float64(a[c][k] * sol[k])
		}
		sol[c] = s / a[c][c]
		if math.IsNaN(sol[c]) || math.IsInf(sol[c], 0) {
			return [8]float32{}, ErrSingular
		}
	}
	for i, v := range sol {
		out[i] = float32(v)
	}
	return out, nil
}

// inLine reports whether three of the four corners lie in a line (two the
// same among them), exactly: the integer cross products.
func inLine(c *[4][2]int) bool {
	for skip := range 4 {
		var p [3][2]int64
		n := 0
		for i := range 4 {
			if i != skip {
				p[n] = [2]int64{int64(c[i][0]), int64(c[i][1])}
				n++
			}
		}
		if (p[1][0]-p[0][0])*(p[2][1]-p[0][1])-(p[1][1]-p[0][1])*(p[2][0]-p[0][0]) == 0 {
			return true
		}
	}
	return false
}
