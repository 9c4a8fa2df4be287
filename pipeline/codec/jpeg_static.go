//go:build cgo && jpegstatic

package codec

// libjpeg-turbo linked in from its archive (libjpeg62-turbo-dev's
// libjpeg.a), for a binary that needs no libjpeg where it runs while
// linking glibc dynamically (make gpuhost: NVML's dlopen needs a dynamic
// glibc). libpng (with zlib) and libwebp, for formats.c, likewise.

// #cgo LDFLAGS: -l:libjpeg.a -l:libpng16.a -l:libz.a -l:libwebp.a -lpthread -lm
import "C"

// JPEGLinked says how libjpeg-turbo is linked: "static", "shared", or ""
// without cgo.
const JPEGLinked = "static"
