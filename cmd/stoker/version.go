package main

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/stoker-dev/stoker/pipeline"
)

// versionText is `stoker --version`: stoker's version on the first line
// (what a script reads), then what decides this build's speed and bytes:
// the Go toolchain and target, the JPEG decoder (libjpeg-turbo's version,
// as built against, and how it is linked), and the SIMD each part uses on
// this CPU.
func versionText() string {
	id := pipeline.LocalIdentity()
	var b strings.Builder
	fmt.Fprintf(&b, "stoker %s\n", id.Version)
	arch, level, _ := strings.Cut(id.Arch, "/")
	fmt.Fprintf(&b, "go: %s, %s/%s", runtime.Version(), runtime.GOOS, arch)
	if level != "" {
		fmt.Fprintf(&b, " (GO%s=%s)", strings.ToUpper(arch), level)
	}
	cgo, fma := "cgo", "no"
	if id.Path != pipeline.PathTurbo {
		cgo = "no cgo"
	}
	if id.FMA {
		fma = "yes"
	}
	fmt.Fprintf(&b, ", %s; fused multiply-add: %s\n", cgo, fma)
	if id.Path != pipeline.PathTurbo {
		b.WriteString("jpeg: Go's image/jpeg (built without cgo: no libjpeg-turbo)\n")
		b.WriteString("simd: none\n")
	} else {
		turbo := "not libjpeg-turbo"
		if id.Turbo > 0 {
			turbo = fmt.Sprintf("libjpeg-turbo %d.%d.%d", id.Turbo/1000000, id.Turbo/1000%1000, id.Turbo%1000)
		}
		fmt.Fprintf(&b, "jpeg: %s (libjpeg API %d.%d, %s library), with stoker's own Huffman decoder\n",
			turbo, id.JPEGLib/10, id.JPEGLib%10, pipeline.JPEGLinked)
		fmt.Fprintf(&b, "simd on this CPU: libjpeg-turbo %s, stoker's resampler %s\n", id.SIMD, pipeline.ResamplerSIMD())
	}
	fmt.Fprintf(&b, "output: v%d (servers that make the same bytes agree on it)\n", id.Output)
	return b.String()
}
