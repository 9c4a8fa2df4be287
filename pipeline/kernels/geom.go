package kernels

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/stoker-dev/stoker/pipeline/det"
)

// The geometric kernels after the fused crop: torchvision.transforms.v2's
// functional ops on uint8 images (torchvision 0.29.2), in place on planes;
// the output keeps the input's size (expand=False). Flips and erase are
// exact; rotate and affine resample once (affine.go).

// AffineParams are affine()'s arguments (rotate is affine with the angle
// negated, as torchvision's rotate computes its matrix).
type AffineParams struct {
	Angle          float64 // degrees
	TX, TY         float64 // translate, pixels
	Scale          float64
	ShearX, ShearY float64 // degrees
	Interp         Interpolation
	Fill           [3]float64
	Center         [2]float64 // pixels from the top left, when HasCenter
	HasCenter      bool
	// NoFill is fill=None: bilinear sampling then leaves the pixels that
	// are partly outside the image as torch's grid_sample gives them (the
	// outside taps count as 0), where a fill blends them with the fill
	// through the weight of the inside taps.
	NoFill bool
}

// HorizontalFlip is horizontal_flip(img).
func HorizontalFlip(p Planes) { reverseRows(p.Pix, p.W, 3*p.H) }

// reverseRowsGo reverses each of rows rows of w bytes in b (reverseRows
// in Go).
func reverseRowsGo(b []byte, w, rows int) {
	for r := range rows {
		reverseBytes(b[r*w : (r+1)*w])
	}
}

// reverseBytes reverses b in place, eight bytes at a time from both ends.
func reverseBytes(b []byte) {
	i, j := 0, len(b)
	for j-i >= 16 {
		lo := binary.LittleEndian.Uint64(b[i:])
		hi := binary.LittleEndian.Uint64(b[j-8:])
		binary.LittleEndian.PutUint64(b[i:], bits.ReverseBytes64(hi))
		binary.LittleEndian.PutUint64(b[j-8:], bits.ReverseBytes64(lo))
		i, j = i+8, j-8
	}
	for j--; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
}

// VerticalFlip is vertical_flip(img).
func VerticalFlip(p Planes) { flipRows(p.Pix, p.W, p.H) }

// flipRowsGo puts the h rows of w bytes of each of pix's three planes in
// the opposite order (flipRows in Go).
func flipRowsGo(pix []byte, w, h int) {
	for c := range 3 {
		pl := pix[c*w*h : (c+1)*w*h]
		for r := 0; r < h/2; r++ {
			swapBytesGo(pl[r*w:(r+1)*w], pl[(h-1-r)*w:(h-r)*w])
		}
	}
}

// swapBytesGo swaps a and b, of one length, through a buffer on the stack.
func swapBytesGo(a, b []byte) {
	var tmp [512]byte
	for k := 0; k < len(a); k += len(tmp) {
		e := min(k+len(tmp), len(a))
		t := tmp[:e-k]
		copy(t, a[k:e])
		copy(a[k:e], b[k:e])
		copy(b[k:e], t)
	}
}

// Erase is erase(img, i, j, h, w, v) with v one value per channel. Each v
// becomes a byte as torch assigns a float32 tensor to a uint8 one
// (truncated toward zero, through int64: castU8). The box is clipped to the
// image, as Python's slicing does.
func Erase(p Planes, i, j, h, w int, v [3]float64) {
	i0, i1, j0, j1 := eraseBox(p, i, j, h, w)
	if i0 >= i1 || j0 >= j1 {
		return
	}
	for c := range 3 {
		b := castU8(float32(v[c]))
		pl := p.Plane(c)
		first := pl[i0*p.W+j0 : i0*p.W+j1]
		for k := range first {
			first[k] = b
		}
		for r := i0 + 1; r < i1; r++ {
			copy(pl[r*p.W+j0:r*p.W+j1], first)
		}
	}
}

// EraseRandom is erase with value="random", on uint8 pixels: each pixel of
// the box becomes the pixel that a Normalize of mean and std (per channel,
// in [0, 1] units) turns into a standard normal value z,
// round(255 * (mean + std * z)) clamped to 0..255: the noise torchvision's
// RandomErasing writes after Normalize, but for the clamp and the
// rounding. The pixel is drawn directly from that distribution: 16 bits of
// the seed's counter-based stream index a table of its quantiles (the
// same bytes everywhere), four pixels to a draw. std's values are
// positive.
func EraseRandom(p Planes, i, j, h, w int, seed uint64, mean, std [3]float64, s *Scratch) {
	i0, i1, j0, j1 := eraseBox(p, i, j, h, w)
	if i0 >= i1 || j0 >= j1 {
		return
	}
	luts := s.noise.tables(mean, std)
	rng := det.Seeded(seed)
	var word uint64
	left := 0
	for c := range 3 {
		pl, lut := p.Plane(c), &luts[c]
		for r := i0; r < i1; r++ {
			row := pl[r*p.W+j0 : r*p.W+j1]
			for x := range row {
				if left == 0 {
					word, left = rng.Uint64(), 4
				}
				row[x] = lut[uint16(word)]
				word >>= 16
				left--
			}
		}
	}
}

// noiseLUTs are eraseRandom's quantile tables for one (mean, std), kept
// while the next erase asks the same (one op's samples all do).
type noiseLUTs struct {
	mean, std [3]float64
	lut       *[3][1 << 16]byte
}

// tables returns the quantile tables of (mean, std): entry u of channel c
// is the pixel v whose probability interval holds (u + 0.5) / 65536, the
// probability of v being that of round(255 * (mean + std * z)) = v,
// clamped, for z standard normal.
func (n *noiseLUTs) tables(mean, std [3]float64) *[3][1 << 16]byte {
	if n.lut != nil && n.mean == mean && n.std == std {
		return n.lut
	}
	if n.lut == nil {
		n.lut = new([3][1 << 16]byte)
	}
	n.mean, n.std = mean, std
	for c := range 3 {
		t := &n.lut[c]
		v := 0
		for u := range 1 << 16 {
			q := (float64(u) + 0.5) / (1 << 16)
			// The CDF of pixel v: P(255 (mean + std z) < v + 0.5).
			for v < 255 && normalCDF(float64((float64(v)+0.5)/255-mean[c])/std[c]) <= q {
				v++
			}
			t[u] = byte(v)
		}
	}
	return n.lut
}

// normalCDF is the standard normal's distribution function.
func normalCDF(x float64) float64 { return 0.5 * det.Erfc(-x/math.Sqrt2) }

// eraseBox clips erase's box to the image.
func eraseBox(p Planes, i, j, h, w int) (i0, i1, j0, j1 int) {
	i0, j0 = max(i, 0), max(j, 0)
	i1, j1 = min(i+max(h, 0), p.H), min(j+max(w, 0), p.W)
	return i0, i1, j0, j1
}

// castU8 converts a float32 to uint8 as torch does (through int64, so
// out-of-range values wrap), saturating beyond ±2^31 where torch's result
// is undefined and Go's conversion differs between machines.
func castU8(f float32) uint8 {
	switch {
	case f != f:
		return 0
	case f > 1<<31:
		f = 1 << 31
	case f < -(1 << 31):
		f = -(1 << 31)
	}
	return uint8(int64(f))
}

// Affine is affine(img, angle, translate, scale, shear, interpolation,
// fill, center).
func Affine(p Planes, a *AffineParams, s *Scratch) {
	m := inverseAffine(p.W, p.H, a.Center, a.HasCenter, a.Angle, [2]float64{a.TX, a.TY}, a.Scale, [2]float64{a.ShearX, a.ShearY})
	resampleAffine(p, &m, a.Interp, a.Fill, a.NoFill, s)
}

// Rotate is rotate(img, angle, interpolation, expand=False, center, fill),
// with fill=None when noFill.
func Rotate(p Planes, angle float64, interp Interpolation, center [2]float64, hasCenter bool, fill [3]float64, noFill bool, s *Scratch) {
	angle = pyMod(angle, 360)
	if !hasCenter { // torchvision's fast paths: exact, with no resampling
		switch {
		case angle == 0:
			return
		case angle == 180:
			for c := range 3 { // each plane backwards: rows and columns reversed
				reverseRows(p.Plane(c), p.W*p.H, 1)
			}
			return
		case (angle == 90 || angle == 270) && p.W == p.H:
			rot90(p, angle == 90, s)
			return
		}
	}
	// torchvision's rotate turns the other way from its affine.
	m := inverseAffine(p.W, p.H, center, hasCenter, -angle, [2]float64{}, 1, [2]float64{})
	resampleAffine(p, &m, interp, fill, noFill, s)
}

// pyMod is Python's a % b for floats: the sign of b, +0 for a zero result.
func pyMod(a, b float64) float64 {
	m := math.Mod(a, b)
	if m == 0 {
		return math.Copysign(0, b)
	}
	if (b < 0) != (m < 0) {
		m += b
	}
	return m
}

// rot90 is torch.rot90 of a square image, k=1 (counterclockwise) when ccw,
// else k=3: rotate's exact path for 90 and 270 degrees.
func rot90(p Planes, ccw bool, s *Scratch) {
	n := p.W
	src := s.bytes(0, n*n)
	for c := range 3 {
		pl := p.Plane(c)
		copy(src, pl)
		for i := 0; i < n; i++ {
			out := pl[i*n : (i+1)*n]
			if ccw { // out[i][j] = in[j][n-1-i]
				for j, k := 0, n-1-i; j < n; j, k = j+1, k+n {
					out[j] = src[k]
				}
			} else { // out[i][j] = in[n-1-j][i]
				for j, k := 0, (n-1)*n+i; j < n; j, k = j+1, k-n {
					out[j] = src[k]
				}
			}
		}
	}
}

// degToRad is CPython's math.radians factor, Py_MATH_PI / 180.0 rounded
// once: the same float64 as math.Pi / 180 (TestDegToRad).
const degToRad float64 = math.Pi / 180

// inverseAffine is torchvision's _get_inverse_affine_matrix for an image
// of w x h: the matrix taking an output pixel (from the image's center) to
// the point it samples, as its float64 arithmetic computes it (the same
// operations in the same order, every product rounded, sin, cos and tan
// from pipeline/det). center is the pivot from the top left, or
// the image's center unless hasCenter.
func inverseAffine(w, h int, center [2]float64, hasCenter bool, angle float64, translate [2]float64, scale float64, shear [2]float64) [6]float64 {
	var cx, cy float64
	if hasCenter {
		cx, cy = center[0]-float64(float64(w)*0.5), center[1]-float64(float64(h)*0.5)
	}
	a, b, c, d := RotationShear(angle, shear)
	cxt, cyt := cx+translate[0], cy+translate[1]
	m := [6]float64{d / scale, -b / scale, 0, -c / scale, a / scale, 0}
	m[2] += (cx - float64(m[0]*cxt)) - float64(m[1]*cyt)
	m[5] += (cy - float64(m[3]*cxt)) - float64(m[4]*cyt)
	return m
}

// RotationShear is the rotation and shear part [a b; c d] of
// torchvision's _get_inverse_affine_matrix (before the scale), in its
// float64 arithmetic: the same for the inverse matrix the kernels sample
// through (inverseAffine) and the forward one that moves boxes and
// keypoints (the pipeline's targets).
func RotationShear(angle float64, shear [2]float64) (a, b, c, d float64) {
	rot, sx, sy := radians(angle), radians(shear[0]), radians(shear[1])
	cosSy, tanSx := det.Cos(sy), det.Tan(sx)
	rotMinusSy := rot - sy
	a = det.Cos(rotMinusSy) / cosSy
	b = -(float64(a*tanSx) + det.Sin(rot))
	c = det.Sin(rotMinusSy) / cosSy
	d = det.Cos(rot) - float64(c*tanSx)
	return a, b, c, d
}

// radians is math.radians, with an angle beyond what det.Sin takes reduced
// modulo 360 degrees first (exactly; torchvision never sees such angles:
// the pipeline's checkStep refuses them).
func radians(deg float64) float64 {
	if math.Abs(deg) > 1e9 {
		deg = math.Mod(deg, 360)
	}
	return float64(deg * degToRad)
}

// RotatedSize is the size of rotate(img, angle, expand=True, center) of
// a w x h image, as torchvision's rotate_image makes it: its fast paths
// about the centre (0 and 180 degrees keep the size, 90 and 270 swap it),
// else _compute_affine_output_size of its inverse matrix: the image's
// corners about its centre through the matrix in float32 (torch.matmul of
// four points: x*a + c, then + y*b), the half size added, each extent's
// end truncated to 1e-4 (times 10000, trunc, times float32(1e-4)), the
// maximum's ceiling less the minimum's floor.
func RotatedSize(w, h int, angle float64, center [2]float64, hasCenter bool) (ow, oh int) {
	angle = pyMod(angle, 360)
	if !hasCenter {
		switch angle {
		case 0, 180:
			return w, h
		case 90, 270:
			return h, w
		}
	}
	m := inverseAffine(w, h, center, hasCenter, -angle, [2]float64{}, 1, [2]float64{})
	return AffineOutputSize(&m, w, h)
}

// AffineOutputSize is torchvision's _compute_affine_output_size (its
// tensor path) of the matrix m (six float64s, rounded to float32 as
// torch.tensor(matrix, dtype=torch.float) rounds them) for a w x h image.
func AffineOutputSize(m *[6]float64, w, h int) (ow, oh int) {
	var t [6]float32
	for i, v := range m {
		t[i] = float32(v)
	}
	hw, hh := float32(0.5*float64(w)), float32(0.5*float64(h))
	pts := [4][2]float32{{-hw, -hh}, {-hw, hh}, {hw, hh}, {hw, -hh}}
	var lo, hi [2]float32
	for i, p := range pts {
		x := float32(float32(float32(p[0]*t[0])+t[2]) + float32(p[1]*t[1]))
		y := float32(float32(float32(p[0]*t[3])+t[5]) + float32(p[1]*t[4]))
		if i == 0 {
			lo, hi = [2]float32{x, y}, [2]float32{x, y}
			continue
		}
		lo = [2]float32{min(lo[0], x), min(lo[1], y)}
		hi = [2]float32{max(hi[0], x), max(hi[1], y)}
	}
	const invTol, tol = float32(10000), float32(1e-4)
	var size [2]int
	halfs := [2]float32{hw, hh}
	for k := range 2 {
		mx := float32(float32(float32(math.Trunc(float64(float32(float32(hi[k]+halfs[k])*invTol))))) * tol)
		mn := float32(float32(float32(math.Trunc(float64(float32(float32(lo[k]+halfs[k])*invTol))))) * tol)
		size[k] = int(float32(float32(math.Ceil(float64(mx))) - float32(math.Floor(float64(mn)))))
	}
	return size[0], size[1]
}

// RotateExpand is rotate(img, angle, interpolation, expand=True, center,
// fill) of p (w x h planes) into out, which must hold the RotatedSize's
// three planes (it may be p's own bytes, with room: p is copied first):
// torchvision's fast paths about the centre (exact copies: 0, 180, and 90
// or 270 degrees of any size, torch.rot90), else its inverse matrix
// (that of Rotate) sampled on a grid centred on the larger output
// (_affine_grid): geom.c's where the CPU has AVX2 and FMA, else Go's,
// the same bytes (TestRotateExpandCMatchesGo). It returns the output's
// planes.
func RotateExpand(p Planes, out []byte, angle float64, interp Interpolation, center [2]float64, hasCenter bool, fill [3]float64, noFill bool, s *Scratch) Planes {
	ow, oh := RotatedSize(p.W, p.H, angle, center, hasCenter)
	o := Planes{Pix: out[:3*ow*oh], W: ow, H: oh}
	a := pyMod(angle, 360)
	if !hasCenter && (a == 90 || a == 270) && p.W != p.H {
		src := s.bytes(0, len(p.Pix))
		copy(src, p.Pix)
		rot90To(o, src, p.W, p.H, a == 90)
		return o
	}
	if ow == p.W && oh == p.H {
		if &o.Pix[0] != &p.Pix[0] {
			copy(o.Pix, p.Pix)
		}
		Rotate(o, angle, interp, center, hasCenter, fill, noFill, s)
		return o
	}
	m := inverseAffine(p.W, p.H, center, hasCenter, -a, [2]float64{}, 1, [2]float64{})
	g := newAffineGridTo(&m, p.W, p.H, ow, oh)
	var f [3]float32
	var fb [3]uint8
	if !noFill {
		for c := range 3 {
			f[c] = float32(min(max(fill[c], 0), 255))
			fb[c] = roundCast(f[c])
		}
	}
	if affineCTo(p, o, &g, interp, f, noFill, s) {
		return o
	}
	src := s.bytes(0, len(p.Pix))
	copy(src, p.Pix)
	if interp == Nearest {
		nearestAffine(o, src, p.W, p.H, &g, fb)
	} else {
		bilinearAffineFrom(o, src, p.W, p.H, &g, f, fb, noFill)
	}
	return o
}

// rot90To is torch.rot90 of a w x h src (three planes) into o (h x w):
// k=1 (counterclockwise) when ccw, out[i][j] = in[j][w-1-i]; else k=3,
// out[i][j] = in[h-1-j][i].
func rot90To(o Planes, src []byte, w, h int, ccw bool) {
	n := w * h
	for c := range 3 {
		in, out := src[c*n:(c+1)*n], o.Plane(c)
		for i := range w { // the output's rows
			row := out[i*h : (i+1)*h]
			for j := range h {
				if ccw {
					row[j] = in[j*w+w-1-i]
				} else {
					row[j] = in[(h-1-j)*w+i]
				}
			}
		}
	}
}
