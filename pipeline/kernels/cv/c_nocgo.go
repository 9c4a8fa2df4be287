//go:build !cgo

package cv

import "github.com/stoker-dev/stoker/pipeline/kernels"

// HaveC: without cgo the kernels are their Go, as the cost model prices
// them.
const HaveC = false

// warp is warpGo: without cgo there is no C (cv.c).
func warp(dst, src kernels.Planes, m [9]float32, persp bool, border uint8) {
	warpGo(dst, src, m, persp, border)
}

// hsvPixels is hsvPixelsGo: without cgo there is no C (cv.c).
func hsvPixels(p kernels.Planes, hue, sat, val *[256]uint8) { hsvPixelsGo(p, hue, sat, val) }

// resizeLinear is resizeLinearGo: without cgo there is no C (cv.c).
func resizeLinear(dst, src kernels.Planes, tx, ty linearTaps) { resizeLinearGo(dst, src, tx, ty) }
