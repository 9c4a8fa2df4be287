//go:build !cgo

package kernels

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
