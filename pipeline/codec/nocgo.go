//go:build !cgo

package codec

// Available: no C codec without cgo.
const Available = false

// JPEGLinked says how libjpeg-turbo is linked: "static", "shared", or ""
// without cgo.
const JPEGLinked = ""

// TurboVersions: no libjpeg without cgo.
func TurboVersions() (turbo, lib int) { return 0, 0 }

// SIMDBest: no C resampler without cgo.
func SIMDBest() int { return 0 }
