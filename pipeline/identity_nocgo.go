//go:build !cgo

package pipeline

// turboVersions: no libjpeg without cgo.
func turboVersions() (turbo, lib int) { return 0, 0 }

// ResamplerSIMD: no C resampler without cgo.
func ResamplerSIMD() string { return "none" }
