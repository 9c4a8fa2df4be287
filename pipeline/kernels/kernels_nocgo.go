//go:build !cgo

package kernels

// Without cgo the kernels' inner loops are their Go versions.

func blurPlanes(p Planes, bx, by *blurTaps, s *Scratch) { blurPlanesGo(p, bx, by, s) }
func blendConst(pix []byte, ratio float32, c float64)   { blendConstGo(pix, ratio, c) }
func lookup(pix []byte, lut *[256]byte)                 { applyLUT(pix, lut) }
func saturate(r, g, b []byte, ratio float32, alpha float64) {
	saturateGo(r, g, b, ratio, alpha)
}
func grayPlanes(r, g, b []byte)             { grayPlanesGo(r, g, b) }
func graySum(r, g, b []byte) int64          { return graySumGo(r, g, b) }
func hueRotate(r, g, b []byte, shift int32) { hueRotateGo(r, g, b, shift) }
func xorBytes(pix []byte, m byte)           { xorBytesGo(pix, m) }
func andBytes(pix []byte, m byte)           { andBytesGo(pix, m) }
func sharpenPlane(pl []byte, w, h int, alpha float64, prev, cur []byte, dl *[511]float64) {
	sharpenPlaneGo(pl, w, h, prev, cur, dl)
}

func minMax(pl []byte) (lo, hi byte)  { return minMaxGo(pl) }
func solarizeBytes(pix []byte, k int) { solarizeBytesGo(pix, k) }
func addBelow(pix []byte, k, a int)   { addBelowGo(pix, k, a) }

// affineC is geom.c's resampling; without cgo there is none, and
// resampleAffine takes the Go version.
func affineC(Planes, *affineGrid, Interpolation, [3]float32, bool, *Scratch) bool { return false }

// affineCAvailable reports whether affineC runs on this CPU: never
// without cgo.
func affineCAvailable() bool { return false }

// affineCTo is geom.c's resampling into another size: none without cgo.
func affineCTo(Planes, Planes, *affineGrid, Interpolation, [3]float32, bool, *Scratch) bool {
	return false
}

// reverseRows reverses each of rows rows of w bytes in b.
func reverseRows(b []byte, w, rows int) { reverseRowsGo(b, w, rows) }

// flipRows puts the h rows of w bytes of each of pix's three planes in the
// opposite order.
func flipRows(pix []byte, w, h int) { flipRowsGo(pix, w, h) }
