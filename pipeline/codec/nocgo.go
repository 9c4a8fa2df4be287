//go:build !cgo

package codec

import "unsafe"

// Available: no C codec without cgo.
const Available = false

// JPEGLinked says how libjpeg-turbo is linked: "static", "shared", or ""
// without cgo.
const JPEGLinked = ""

// TurboVersions: no libjpeg without cgo.
func TurboVersions() (turbo, lib int) { return 0, 0 }

// SIMDBest: no C resampler without cgo.
func SIMDBest() int { return 0 }

// Without cgo no decode stores coefficients: a CoefCache stays empty.
func coefsNew() unsafe.Pointer        { return nil }
func coefsFree(unsafe.Pointer)        {}
func coefsBytes(unsafe.Pointer) int64 { return 0 }
