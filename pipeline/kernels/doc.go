// Package kernels is stoker's op kernels, as
// torchvision.transforms.v2.functional is torchvision's: functions on an
// image's uint8 planes (Planes: three planes, R, G, B, CHW) that take plain
// arguments and give torchvision's bytes, in place: AdjustBrightness,
// GaussianBlur, Posterize, Rotate, Affine, Erase, and the rest. They know
// nothing of the ops that draw their arguments (the pipeline's Step,
// Transform and policies): the pipeline unpacks a step's arguments into a
// kernel's, and checks them (torchvision's bounds) before.
//
// Every kernel is exact: the same bytes on every machine, in the cgo build
// and without it. Where it pays a kernel has a C twin (kernels.c,
// kernels_color.c, geom.c) with SIMD chosen by the CPU at start (SSE2,
// AVX2, AVX-512, VBMI; geom.c AVX2 with FMA), tested byte for byte against
// the Go version at every level the CPU has; without cgo the Go versions
// run. The Go rounds every product it adds (float64(x*y) + z) so that no
// compiler fuses it, and the C turns contraction off by pragmas.
//
// A Scratch holds a kernel's reusable memory (no allocation per image once
// warm) and the image's abandoned flag (Scratch.Stop), which the long
// loops poll once a row.
package kernels
