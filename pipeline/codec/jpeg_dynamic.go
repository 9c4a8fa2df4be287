//go:build cgo && !jpegstatic

package codec

// libjpeg-turbo, libpng and libwebp (formats.c) from the system's shared
// libraries.

// #cgo LDFLAGS: -ljpeg -lpng16 -lz -lwebp
import "C"

// JPEGLinked says how libjpeg-turbo is linked: "static", "shared", or ""
// without cgo.
const JPEGLinked = "shared"
