package kernels

// The photometric kernels: torchvision.transforms.v2.functional's ops on
// uint8 images (torchvision 0.29.2), in place on planes. torchvision does
// them in float32; these do the same float32 steps where the result is
// truncated to uint8 (so that the rounding lands where torchvision's does),
// in float64 arithmetic whose sums are exact (a byte times a float32 and a
// float32 added fit in float64's 53 bits), then rounded to float32 once:
// which is what torchvision's vectorized multiply-add (one rounding) gives.
// Products that are added are wrapped in float64(...) so the compiler
// cannot fuse them (see pipeline/det); everything here is the
// same bytes on every machine. Per-pixel work is a table lookup wherever
// the output depends on one input byte.

import "math"

// AdjustBrightness is adjust_brightness(img, f): v*f, clamped, truncated.
func AdjustBrightness(p Planes, f float64) {
	if f != 1 {
		blendConst(p.Pix, float32(f), 0)
	}
}

// AdjustContrast is adjust_contrast(img, f): a blend with the mean of the
// grayscale image (floored per pixel, as torchvision does for uint8).
func AdjustContrast(p Planes, f float64) {
	if f == 1 {
		return
	}
	sum := graySum(p.Plane(0), p.Plane(1), p.Plane(2))
	// torch.mean in float32: a float32 sum (exact while it stays below
	// 2**24, as it does up to 256x256) divided by the count.
	mean := float32(sum) / float32(p.W*p.H)
	alpha := float64(float32(1 - f))
	blendConst(p.Pix, float32(f), float64(float64(mean)*alpha)) // exact: float32 times float32
}

// blendConstGo sets every v of pix to torchvision's _blend of it with a
// constant, v*ratio + c where c is the constant times 1-ratio: v*ratio
// rounded to float32 (torch's mul), plus c (exact in float64, so the sum
// is rounded once, as torch's fused add_(…, alpha)), clamped, truncated.
// blendConst (kernels_cgo.go) is the same with AVX2.
func blendConstGo(pix []byte, ratio float32, c float64) {
	var lut [256]byte
	blendConstLUT(&lut, ratio, c)
	applyLUT(pix, &lut)
}

// blendConstLUT is blendConstGo's table.
func blendConstLUT(lut *[256]byte, ratio float32, c float64) {
	rf := float64(ratio)
	for v := range lut {
		lut[v] = clampTrunc(float32(float64(float32(float64(v)*rf)) + c))
	}
}

// blendConst32 looks for a float32 c32 that gives lut from v*ratio + c32
// in float32 arithmetic (a cheaper sum for the vectors): float32(c) or
// one of its neighbours, checked on every byte.
func blendConst32(lut *[256]byte, ratio float32, c float64) (float32, bool) {
	c32 := float32(c)
	for _, try := range [...]float32{c32, math.Nextafter32(c32, float32(math.Inf(1))),
		math.Nextafter32(c32, float32(math.Inf(-1)))} {
		ok := true
		for v := range lut {
			if clampTrunc(float32(float32(v)*ratio)+try) != lut[v] {
				ok = false
				break
			}
		}
		if ok {
			return try, true
		}
	}
	return 0, false
}

// AdjustSaturation is adjust_saturation(img, f): each pixel blended with
// its own gray (floored).
func AdjustSaturation(p Planes, f float64) {
	if f != 1 {
		saturate(p.Plane(0), p.Plane(1), p.Plane(2), float32(f), float64(float32(1-f)))
	}
}

// saturateGo blends each pixel with its gray: v*ratio rounded to float32,
// plus gray*alpha (exact), rounded once, clamped, truncated.
func saturateGo(r, g, b []byte, ratio float32, alpha float64) {
	rf := float64(ratio)
	// a[v] is v*ratio rounded to float32; o[y] is gray y times alpha.
	var a, o [256]float64
	for v := range a {
		a[v] = float64(float32(float64(v) * rf))
		o[v] = float64(float64(v) * alpha)
	}
	g = g[:len(r)]
	b = b[:len(r)]
	for i := range r {
		og := o[gray(r[i], g[i], b[i])]
		r[i] = clampTrunc(float32(a[r[i]] + og))
		g[i] = clampTrunc(float32(a[g[i]] + og))
		b[i] = clampTrunc(float32(a[b[i]] + og))
	}
}

// RGBToGrayscale is rgb_to_grayscale(img, num_output_channels=3): the gray
// written to all three planes.
func RGBToGrayscale(p Planes) {
	grayPlanes(p.Plane(0), p.Plane(1), p.Plane(2))
}

// grayPlanesGo writes each pixel's gray to its three planes.
func grayPlanesGo(r, g, b []byte) {
	g = g[:len(r)]
	b = b[:len(r)]
	for i := range r {
		y := gray(r[i], g[i], b[i])
		r[i], g[i], b[i] = y, y, y
	}
}

// graySumGo is the sum of the pixels' grays.
func graySumGo(r, g, b []byte) int64 {
	g = g[:len(r)]
	b = b[:len(r)]
	var sum int64
	for i := range r {
		sum += int64(gray(r[i], g[i], b[i]))
	}
	return sum
}

// The gray of rgb_to_grayscale: torchvision computes, in float32,
// r*0.2989 + g*0.587 + b*0.114 as r.mul(wr).add_(g, alpha=wg).add_(b,
// alpha=wb), whose adds are fused multiply-adds (one rounding each), and
// truncates. The exact sum (the float32 weights are exact multiples of
// 2**-30) floors to the same byte except within a few units of 2**-30
// above an integer, where the float32 roundings can land just below it
// (3 of the 2**24 colours): there gray takes the float32 steps. (A sum
// with no fraction is black's, and exact.) TestGrayAllColours checks all
// 2**24 colours against those steps.
const (
	grayFrac  = 30
	grayNear  = 1 << 13   // "just above an integer": below every fraction the roundings can cross (2840)
	grayWR    = 320941440 // float32(0.2989) * 2**30
	grayWG    = 630286464 // float32(0.587) * 2**30
	grayWB    = 122406568 // float32(0.114) * 2**30
	grayFracM = 1<<grayFrac - 1
)

// gray is rgb_to_grayscale's uint8 output for one pixel.
func gray(r, g, b byte) byte {
	x := int64(r)*grayWR + int64(g)*grayWG + int64(b)*grayWB
	if f := x & grayFracM; f < grayNear && f != 0 {
		return grayFloat(r, g, b)
	}
	return byte(x >> grayFrac)
}

// grayFloat is gray by torchvision's float32 steps: each product is exact
// in float64, each sum too (at most 36 significant bits), so rounding the
// sum to float32 is the fused multiply-add's single rounding.
func grayFloat(r, g, b byte) byte {
	const wr, wg, wb = float64(float32(0.2989)), float64(float32(0.587)), float64(float32(0.114))
	s := float64(float32(float64(r) * wr))
	s = float64(float32(float64(float64(g)*wg) + s))
	return byte(float32(float64(float64(b)*wb) + s))
}

// clampTrunc is torchvision's clamp_(0, 255).to(uint8) of a float32:
// truncation toward zero between the clamp's two sides, without branches.
// Below 255 int64 truncates exactly, any negative gives 0, and so does
// NaN (int64(NaN) is 0 or negative, depending on the machine).
func clampTrunc(x float32) byte {
	return byte(max(int64(min(x, 255)), 0))
}

// applyLUT maps every byte of pix through lut.
func applyLUT(pix []byte, lut *[256]byte) {
	for i, v := range pix {
		pix[i] = lut[v]
	}
}

// PermuteChannels is permute_channels(img, perm) (image[:, perm]): plane
// c becomes plane perm[c], by swaps of whole planes.
func PermuteChannels(p Planes, perm [3]int) {
	cur := [3]int{0, 1, 2} // which input channel each plane holds
	for c := range 3 {
		j := c
		for cur[j] != perm[c] {
			j++
		}
		if j != c {
			swapBytesGo(p.Plane(c), p.Plane(j))
			cur[c], cur[j] = cur[j], cur[c]
		}
	}
}
