//go:build cgo && !jpegstatic

package pipeline

// libjpeg-turbo from the system's shared library.

// #cgo LDFLAGS: -ljpeg
import "C"
