package kernels

// Bicubic resampling for rotate and affine. torchvision refuses bicubic for
// tensors (its PIL path has it), but timm's RandAugment, which DeiT trains
// with, draws bicubic or bilinear for each geometric op. stoker's is what
// torchvision's tensor path would give with the check lifted: torch's
// grid_sample in bicubic mode (A = -0.75, taps outside the image count as
// 0, align_corners=False) on the same float32 grid, the fill blended
// through the mask (a channel of ones sampled the same way) as
// _apply_grid_transform blends it for every mode but nearest, then clamped
// to 0..255 (the cubic overshoots; torch's cast would wrap it, as
// torchvision's bicubic resize on uint8 clamps it) and rounded half to
// even. The sums are plain float32 in torch's order, every product rounded
// (torch fuses them), so the result is within about 1e-4 of torch's before
// rounding: the same bytes but for values that close to a half-integer
// (python/tests/test_parity_geometry_kernels.py). PIL's bicubic, which
// timm gets on PIL images, is another filter (A = -1, edges replicated).

// cubicA is grid_sample's cubic convolution constant.
const cubicA float32 = -0.75

// cubicCoeffs are the four taps' weights at fraction t, as grid_sample's
// get_cubic_coefficients computes them (far for 1 < x < 2, near for x <= 1).
func cubicCoeffs(t float32) [4]float32 {
	const a = cubicA
	x0, x3 := t+1, 2-t
	x1, x2 := t, 1-t
	return [4]float32{
		float32(float32(float32(float32(float32(a*x0)-float32(5*a))*x0)+float32(8*a))*x0) - float32(4*a),
		float32(float32(float32(float32(float32((a+2)*x1)-(a+3))*x1)*x1) + 1),
		float32(float32(float32(float32(float32((a+2)*x2)-(a+3))*x2)*x2) + 1),
		float32(float32(float32(float32(float32(a*x3)-float32(5*a))*x3)+float32(8*a))*x3) - float32(4*a),
	}
}

// bicubicAffine is grid_sample's bicubic mode, then the fill blended
// through the mask (unless noFill).
func bicubicAffine(p Planes, src []byte, g *affineGrid, f [3]float32, fb [3]uint8, noFill bool) {
	w, h, n := p.W, p.H, p.W*p.H
	fw, fh := float32(w)+1, float32(h)+1
	for y := 0; y < h; y++ {
		r := g.row(y)
		for x := 0; x < w; x++ {
			o := y*w + x
			ix, iy := g.at(x, r)
			if !(ix >= -2 && ix < fw && iy >= -2 && iy < fh) { // no tap inside (or NaN)
				p.Pix[o], p.Pix[n+o], p.Pix[2*n+o] = fb[0], fb[1], fb[2]
				continue
			}
			xi, yi := int(ix), int(iy)
			if float32(xi) > ix { // floor
				xi--
			}
			if float32(yi) > iy {
				yi--
			}
			cx, cy := cubicCoeffs(ix-float32(xi)), cubicCoeffs(iy-float32(yi))
			if xi >= 1 && xi+2 < w && yi >= 1 && yi+2 < h {
				v0, v1, v2 := cubicInside(src, n, (yi-1)*w+xi-1, w, &cx, &cy)
				if !noFill { // the mask: ones sampled as the pixels are
					mr := cubic4(&cx, 1, 1, 1, 1)
					mask := cubic4(&cy, mr, mr, mr, mr)
					v0 = float32(float32(float32(v0-f[0])*mask) + f[0])
					v1 = float32(float32(float32(v1-f[1])*mask) + f[1])
					v2 = float32(float32(float32(v2-f[2])*mask) + f[2])
				}
				p.Pix[o], p.Pix[n+o], p.Pix[2*n+o] = clampRound(v0), clampRound(v1), clampRound(v2)
				continue
			}
			cubicEdge(p.Pix, src, o, xi, yi, w, h, &cx, &cy, f, noFill)
		}
	}
}

// cubicSum is the taps v weighted by c, summed in grid_sample's order.
func cubicSum(c *[4]float32, v [4]float32) float32 {
	return cubic4(c, v[0], v[1], v[2], v[3])
}

// cubic4 is cubicSum of four values.
func cubic4(c *[4]float32, a, b, d, e float32) float32 {
	return float32(float32(float32(float32(c[0]*a)+float32(c[1]*b))+float32(c[2]*d)) + float32(c[3]*e))
}

// cubicRow is cubicSum of the four bytes from t[i].
func cubicRow(c *[4]float32, t []byte, i int) float32 {
	t = t[i : i+4 : i+4]
	return cubic4(c, u8f32[t[0]], u8f32[t[1]], u8f32[t[2]], u8f32[t[3]])
}

// cubicInside is the bicubic sums, one per plane of src (n bytes each), of
// the 4x4 taps from k (all inside).
func cubicInside(src []byte, n, k, w int, cx, cy *[4]float32) (v0, v1, v2 float32) {
	pl := src[:n:n]
	v0 = cubic4(cy, cubicRow(cx, pl, k), cubicRow(cx, pl, k+w), cubicRow(cx, pl, k+2*w), cubicRow(cx, pl, k+3*w))
	pl = src[n : 2*n : 2*n]
	v1 = cubic4(cy, cubicRow(cx, pl, k), cubicRow(cx, pl, k+w), cubicRow(cx, pl, k+2*w), cubicRow(cx, pl, k+3*w))
	pl = src[2*n : 3*n : 3*n]
	v2 = cubic4(cy, cubicRow(cx, pl, k), cubicRow(cx, pl, k+w), cubicRow(cx, pl, k+2*w), cubicRow(cx, pl, k+3*w))
	return v0, v1, v2
}

// cubicEdge is bicubicAffine for a point whose taps are partly outside:
// those count as 0, in the sums and in the mask.
func cubicEdge(out, src []byte, o, xi, yi, w, h int, cx, cy *[4]float32, f [3]float32, noFill bool) {
	n := w * h
	var v [3][4]float32
	var mrows [4]float32
	for r := range 4 {
		y := yi - 1 + r
		var m [4]float32
		var t [3][4]float32
		for k := range 4 {
			x := xi - 1 + k
			if x >= 0 && x < w && y >= 0 && y < h {
				m[k] = 1
				for c := range 3 {
					t[c][k] = u8f32[src[c*n+y*w+x]]
				}
			}
		}
		mrows[r] = cubicSum(cx, m)
		for c := range 3 {
			v[c][r] = cubicSum(cx, t[c])
		}
	}
	mask := cubicSum(cy, mrows)
	for c := range 3 {
		s := cubicSum(cy, v[c])
		if !noFill {
			s = float32(float32(float32(s-f[c])*mask) + f[c])
		}
		out[c*n+o] = clampRound(s)
	}
}

// clampRound clamps to 0..255 and rounds half to even.
func clampRound(f float32) uint8 {
	return uint8(roundEven32(min(max(f, 0), 255)))
}
