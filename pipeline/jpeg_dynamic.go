//go:build cgo && !jpegstatic

package pipeline

// libjpeg-turbo from the system's shared library.

// #cgo LDFLAGS: -ljpeg
import "C"

// JPEGLinked says how libjpeg-turbo is linked: "static", "shared", or ""
// without cgo.
const JPEGLinked = "shared"
