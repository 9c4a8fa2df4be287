package pipeline

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/stoker-dev/stoker/internal/version"
	"github.com/stoker-dev/stoker/pipeline/codec"
	"golang.org/x/sys/cpu"
)

// OutputVersion is the version of what this package's decoders and ops
// make of a sample: raise it with every change that changes a batch's
// bytes (the golden tests, golden_test.go and golden_cgo_test.go, are
// what tells). Servers of different stoker versions make the same bytes
// when their OutputVersions (and the rest of their Identity) agree.
// Version 3: the preset "simclr" makes two views (its one view is
// "simclr-view"), and transforms of several views exist. Version 4: a
// transform decodes its JPEGs at full scale unless it asks for DecodeFast
// (Transform.WithDecode), so the default's bytes changed where a crop was
// twice the output; torchvision's policies' magnitude bins are torch's
// linspace rounded once (TrivialAugmentWide's translation bin 15 of 31 is
// 15 px); timm's magnitudes past m10 are clamped as timm's; a CenterCrop
// larger than the image is padded (it failed before). Version 5:
// antialiased bilinear is torch's uint8 kernel (its int16 weights and
// precision), as every other filter was, where it was PIL's filter in Q14
// (within one level of torch's): the bytes of every bilinear sample
// changed, in both decode modes and on the Go path. Version 6: a
// multi-image op's partners (the YOLO family's) are drawn from the sample's
// window of the epoch's global shuffle order (cv.PartnerWindow), not
// from the whole dataset, in sets of 256 samples or more (smaller sets
// draw as before: the golden presets are unchanged). Version 7: rotate's
// and affine's grid (and their masks') is summed in torch's order for 67
// output points or more, MKL's sgemm's on its AVX-512 path (fma(Y, r1,
// X*r0) + r2, kernels' affineGrid), where it was summed unfused: one ulp
// apart on about a third of the points, which moved about one nearest
// pixel in two 400 px images and about 90 bilinear ones by a level (deit's
// and tv-resnet50-v2's golden presets, whose policies rotate and shear).
// Version 8: the preset "detr" draws its RandomIoUCrop with p=0.8 (the
// DETR family's dataloader.yml), and a COCO dataset's target labels are
// its category_ids (torchvision's wrapper's) unless the job asks for
// contiguous_labels, where they were always the categories' ranks.
// Version 9: a sample of per-sample size's trailer is 16 bytes, its
// image's size as decoded after its own (BatchHeader.source_sizes), where
// it was 8: the slots of every such job (the frcnn preset's golden).
const OutputVersion = 9

// Decode paths, as Identity.Path names them.
const (
	// PathTurbo is the cgo build's: JPEGs through libjpeg-turbo (with
	// stoker's own Huffman decoder where it applies, which decodes the
	// same coefficients), everything else through the Go path.
	PathTurbo = "libjpeg-turbo+huff"
	// PathGo is the CGO_ENABLED=0 build's: image/jpeg and imaging for
	// every image.
	PathGo = "go"
)

// Identity is what decides the bytes this build makes of a sample, as a
// coordinator compares it with its peers' (SameOutput).
type Identity struct {
	// Version is stoker's (internal/version): informational.
	Version string
	// Output is OutputVersion.
	Output int
	// Arch is GOARCH, with its level where the build info has one
	// ("amd64/v1", "arm64/v8.0").
	Arch string
	// FMA says whether this build's Go code fuses x*y+z into one rounding
	// (arm64, ppc64, s390x, riscv64, amd64 with GOAMD64=v3; never with
	// -gcflags=all=-d=fmahash=n). Until OutputVersion 5 the Go path's
	// bilinear resampler (imaging's) rounded differently then; every float
	// that decides a byte now rounds each product (the golden tests pass
	// with GOAMD64=v3), but SameOutput still compares it.
	FMA bool
	// Path is PathTurbo or PathGo.
	Path string
	// SIMD is the SIMD libjpeg-turbo uses on this CPU ("avx2", "sse2",
	// "neon", "none"): informational. libjpeg-turbo's accurate integer
	// IDCT, its upsampling and its color conversion give the same bytes at
	// every SIMD level (its regression tests expect one MD5 per output
	// whatever the SIMD; only the floating-point DCT, which stoker does
	// not use, differs), and turbo.c's own SIMD passes (SSE2, SSSE3) match
	// its scalar ones (TestGoldenBatchFast, TestExactFastSIMDSame).
	SIMD string
	// Turbo is LIBJPEG_TURBO_VERSION_NUMBER (2001005 for 2.1.5) and
	// JPEGLib JPEG_LIB_VERSION (62, 70, 80), as built against; 0 on the Go
	// path. A shared library replaced after the build is not seen.
	Turbo, JPEGLib int
}

// LocalIdentity is this build's Identity on this CPU.
func LocalIdentity() Identity { return localIdentity() }

var localIdentity = sync.OnceValue(func() Identity {
	id := Identity{
		Version: version.String(),
		Output:  OutputVersion,
		Arch:    runtime.GOARCH,
		FMA:     fusesMultiplyAdd(),
		Path:    PathGo,
		SIMD:    "none",
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GO"+strings.ToUpper(runtime.GOARCH) && s.Value != "" {
				id.Arch += "/" + s.Value
			}
		}
	}
	if haveFast {
		id.Path = PathTurbo
		id.SIMD = turboSIMD()
		id.Turbo, id.JPEGLib = codec.TurboVersions()
	}
	return id
})

// String is the identity on one line, as logs show it.
func (id Identity) String() string {
	s := fmt.Sprintf("stoker %s (output v%d), %s, fma=%v, %s", id.Version, id.Output, id.Arch, id.FMA, id.Path)
	if id.Path == PathTurbo {
		s += fmt.Sprintf(" %s (jpeg %d), simd=%s", turboVersionString(id.Turbo), id.JPEGLib, id.SIMD)
	}
	return s
}

// turboVersionString writes LIBJPEG_TURBO_VERSION_NUMBER as "2.1.5".
func turboVersionString(n int) string {
	return fmt.Sprintf("%d.%d.%d", n/1000000, n/1000%1000, n%1000)
}

// checkedArchs are the architectures the golden batches were checked on
// (golden_test.go): with the same multiply-add fusion, they make the same
// bytes. Any other pair must be the same GOARCH.
var checkedArchs = map[string]bool{"amd64": true, "arm64": true}

// ErrOtherBytes is what SameOutput's errors wrap.
var ErrOtherBytes = errors.New("decoder differs")

// SameOutput returns nil when a server of identity other makes the same
// bytes of every sample as one of identity id, and otherwise an error
// wrapping ErrOtherBytes that says which part differs. Must agree: the
// output version, the decode path, libjpeg-turbo's version (on its path),
// multiply-add fusion, and the architecture (amd64 and arm64 agree). The
// stoker version and the SIMD level need not.
func (id Identity) SameOutput(other Identity) error {
	goarch := func(a string) string { g, _, _ := strings.Cut(a, "/"); return g }
	var why []string
	switch {
	case id.Output != other.Output:
		why = append(why, fmt.Sprintf("output version %d vs %d", id.Output, other.Output))
	case id.Path != other.Path:
		why = append(why, fmt.Sprintf("decode path %q vs %q", id.Path, other.Path))
	}
	if id.Path == PathTurbo && other.Path == PathTurbo && (id.Turbo != other.Turbo || id.JPEGLib != other.JPEGLib) {
		why = append(why, fmt.Sprintf("libjpeg-turbo %s (jpeg %d) vs %s (jpeg %d)",
			turboVersionString(id.Turbo), id.JPEGLib, turboVersionString(other.Turbo), other.JPEGLib))
	}
	if id.FMA != other.FMA {
		why = append(why, fmt.Sprintf("fused multiply-adds %v vs %v (build both alike; -gcflags=all=-d=fmahash=n turns fusion off)", id.FMA, other.FMA))
	}
	if a, b := goarch(id.Arch), goarch(other.Arch); a != b && !(checkedArchs[a] && checkedArchs[b]) {
		why = append(why, fmt.Sprintf("architecture %s vs %s", a, b))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (ours: %v; theirs: %v)", ErrOtherBytes, strings.Join(why, ", "), id, other)
}

// fmaProbe is x*y + z as this build compiles it; noinline, so that the
// constants are not folded.
//
//go:noinline
func fmaProbe(x, y, z float64) float64 { return x*y + z }

// fusesMultiplyAdd reports whether this build fuses x*y + z into one
// rounding: then (1+2^-30)(1-2^-30) - 1 is -2^-60, not 0.
func fusesMultiplyAdd() bool { return fmaProbe(1+0x1p-30, 1-0x1p-30, -1) != 0 }

// turboSIMD is the SIMD libjpeg-turbo's dispatcher picks on this CPU for
// decompression, its environment overrides (JSIMD_FORCENONE,
// JSIMD_FORCESSE2) included.
func turboSIMD() string {
	if os.Getenv("JSIMD_FORCENONE") == "1" {
		return "none"
	}
	switch runtime.GOARCH {
	case "amd64":
		if os.Getenv("JSIMD_FORCESSE2") != "1" && cpu.X86.HasAVX2 {
			return "avx2"
		}
		return "sse2"
	case "arm64":
		return "neon"
	}
	return "none"
}

// JPEGLinked says how libjpeg-turbo is linked: "static", "shared", or ""
// without cgo (codec.JPEGLinked).
const JPEGLinked = codec.JPEGLinked

// ResamplerSIMD is the SIMD stoker's own resampler (pipeline/codec's
// resize.c and passes.c) uses on this CPU: "ssse3" (both passes), "sse2"
// (the vertical pass) or "none" (and without cgo, which has no C
// resampler). Informational, as Identity.SIMD: every level makes the same
// bytes.
func ResamplerSIMD() string {
	return [...]string{"none", "sse2", "ssse3"}[min(max(codec.SIMDBest(), 0), 2)]
}
