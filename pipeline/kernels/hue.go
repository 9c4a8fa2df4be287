package kernels

import "math"

// AdjustHue is adjust_hue(img, f), with no HSV round trip: torchvision's
// float32 RGB -> HSV -> RGB keeps each pixel's largest and smallest
// channels (exactly, after its conversion back to uint8) and moves the
// middle one along the edge of the colour hexagon, so only that channel
// is computed here, in fixed point: with lo, hi the pixel's extremes and
// X = (hi - lo) * hue (hue in sextants, [0, 6)) plus the shift, the new
// sextant is X / (hi - lo) and the middle channel lo + (X mod (hi - lo))
// on even sextants, hi - (X mod (hi - lo)) on odd ones; it is then scaled
// by 255.999/255 and truncated as torchvision converts float to uint8.
// The result is the exact value torchvision's float32 steps approximate:
// the two differ by 1 where those steps round across an integer.
// f outside [-0.5, 0.5] (which torchvision refuses) wraps around.
func AdjustHue(p Planes, f float64) {
	if shift := hueShiftOf(f); shift != 0 {
		hueRotate(p.Plane(0), p.Plane(1), p.Plane(2), shift)
	}
}

// hueShiftOf is adjust_hue's factor as a shift in sextants, fixed point,
// in [-3, 3) sextants: torch adds float32(f) to the hue in [0, 1), a
// shift of 6f sextants modulo 6.
func hueShiftOf(f float64) int32 {
	const six = 6 << hueFrac
	shift := int64(math.Round(float64(6*float64(float32(f))) * (1 << hueFrac)))
	shift %= six
	if shift < -six/2 {
		shift += six
	} else if shift >= six/2 {
		shift -= six
	}
	return int32(shift)
}

// hueRotateGo is adjust_hue's loop over the pixels, in Go; hueRotate
// (kernels_cgo.go) is the same in C where the CPU has AVX2.
func hueRotateGo(r, g, b []byte, shift int32) {
	g = g[:len(r)]
	b = b[:len(r)]
	for i := range r {
		r[i], g[i], b[i] = hueShift(r[i], g[i], b[i], shift)
	}
}

// The fixed point of hueShift: every value fits int32, for kernels.c's
// vectors (x is at most 8 * 255 << 20 in magnitude, below 2**31).
const (
	hueFrac = 20 // fraction bits of sextant positions
	// hueEps is float32(255.999)/255 - 1 in units of 2**-22: torchvision
	// converts back to uint8 with x.mul(255.999).to(uint8).
	hueEps    = 16432
	recipFrac = 20
)

// hueRecip[d] is ceil(2**20 / d): n * hueRecip[d] >> 20 is n / d for every
// n < 6*256 and d in 1..255 (TestHueRecip checks them all).
var hueRecip = func() (t [256]int64) {
	for d := 1; d < 256; d++ {
		t[d] = (1<<recipFrac + int64(d) - 1) / int64(d)
	}
	return t
}()

// hueSel[k] says, for sextant k, which of (hi, lo, mid) become r, g and b:
// torchvision's _hsv_to_rgb table, with v = hi, p = lo and q, t the
// middle channel on odd and even sextants.
var hueSel = [6][3]uint8{{0, 2, 1}, {2, 0, 1}, {1, 0, 2}, {1, 2, 0}, {2, 1, 0}, {0, 1, 2}}

// hueShift is one pixel's adjust_hue with a shift in [-3, 3) sextants
// (hueShiftOf).
func hueShift(R, G, B byte, shift int32) (byte, byte, byte) {
	r, g, b := int64(R), int64(G), int64(B)
	hi, lo := max(r, g, b), min(r, g, b)
	d := hi - lo
	if d == 0 {
		return R, G, B
	}
	// d times the hue in sextants, as torchvision's _rgb_to_hsv picks the
	// largest channel (r before g before b on ties).
	var h int64
	switch hi {
	case r:
		h = g - b // -d..d: sextant 5 (wrapped) or 0
	case g:
		h = 2*d + b - r
	default:
		h = 4*d + r - g
	}
	unit := d << hueFrac
	x := h<<hueFrac + d*int64(shift) // in [-4*unit, 8*unit)
	if x < 0 {
		x += 6 * unit
	} else if x >= 6*unit {
		x -= 6 * unit
	}
	k := (x >> hueFrac) * hueRecip[d] >> recipFrac // the sextant, 0..5
	rem := x - k*unit
	mid := lo<<hueFrac + rem
	if k&1 != 0 {
		mid = hi<<hueFrac - rem
	}
	// mid * 255.999/255, truncated: mid plus mid * hueEps / 2**22, with
	// mid's fraction cut to 8 bits first (int32 products; the error is
	// under 2**-15 of a level).
	mid += (mid >> 12) * hueEps >> 10
	v := [3]byte{byte(hi), byte(lo), byte(mid >> hueFrac)}
	sel := &hueSel[k]
	return v[sel[0]], v[sel[1]], v[sel[2]]
}
