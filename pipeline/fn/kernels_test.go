package fn

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/internal/testfiles"
	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// The photometric kernels' parity with torchvision is
// python/tests/test_parity_kernels.py; these test what it does not see.

// kernelCases are steps of every photometric kernel, with arguments that
// change pixels.
var kernelCases = []Step{
	{Fn: AdjustBrightness, F: [6]float64{1.3}},
	{Fn: AdjustBrightness, F: [6]float64{0.4}},
	{Fn: AdjustContrast, F: [6]float64{1.7}},
	{Fn: AdjustSaturation, F: [6]float64{0.6}},
	{Fn: AdjustSaturation, F: [6]float64{2.5}},
	{Fn: AdjustHue, F: [6]float64{0.1}},
	{Fn: AdjustHue, F: [6]float64{-0.45}},
	{Fn: AdjustSharpness, F: [6]float64{1.7}},
	{Fn: AdjustSharpness, F: [6]float64{0.2}},
	{Fn: RGBToGrayscale, I: [6]int{3}},
	{Fn: Solarize, F: [6]float64{128}},
	{Fn: SolarizeAdd, I: [6]int{40}, F: [6]float64{128}},
	{Fn: Posterize, I: [6]int{3}},
	{Fn: Invert},
	{Fn: Equalize},
	{Fn: Autocontrast},
	{Fn: GaussianBlur, I: [6]int{9, 9}, F: [6]float64{1.2, 1.2}},
	{Fn: GaussianBlur, I: [6]int{23, 5}, F: [6]float64{3, 0.7}},
}

// noiseImage is the photometric kernels' test image
// (pipeline/internal/testfiles').
var noiseImage = testfiles.SmoothNoise

func applyOne(pix []byte, w, h int, st Step, s *kernels.Scratch) {
	if err := Check(&st, w, h); err != nil {
		panic(err)
	}
	Apply(kernels.Planes{Pix: pix, W: w, H: h}, &st, s)
}

// TestKernelsDeterministic runs each kernel twice, on fresh and on used
// scratch, and checks the bytes against goldens: the same on every
// machine and in both builds (cgo and not).
func TestKernelsDeterministic(t *testing.T) {
	const w, h = 61, 47
	src := noiseImage(w, h, 1)
	if len(kernelGoldens) != len(kernelCases) {
		t.Fatalf("%d goldens for %d cases", len(kernelGoldens), len(kernelCases))
	}
	var used kernels.Scratch
	for i, st := range kernelCases {
		a := bytes.Clone(src)
		var fresh kernels.Scratch
		applyOne(a, w, h, st, &fresh)
		b := bytes.Clone(src)
		applyOne(b, w, h, st, &used)
		applyOne(bytes.Clone(src), w, h, st, &used)
		if !bytes.Equal(a, b) {
			t.Errorf("%v %v: two runs differ", st.Fn, st.F[:2])
		}
		if bytes.Equal(a, src) {
			t.Errorf("%v %v: changed nothing", st.Fn, st.F[:2])
		}
		sum := sha256.Sum256(a)
		if got := hex.EncodeToString(sum[:8]); got != kernelGoldens[i] {
			t.Errorf("case %d, %v %v %v: sha256 %s, want %s", i, st.Fn, st.I[:2], st.F[:2], got, kernelGoldens[i])
		}
	}
}

// kernelGoldens are the first 8 bytes of the sha256 of each kernelCases
// step's output in TestKernelsDeterministic.
var kernelGoldens = [...]string{
	"1cef490ae94f28fe", "9cd4356d9668f6eb", "3f3c43732906edcf", "ee8803c7ba4847ee", "b5f0f23c13115186",
	"b11993a59f096504", "ad91f50732a0f838", "ef12dd5167513b1c", "2368d89e83d8f044", "7c22cbeaefc10253",
	"c8730b90880bf11d", "822a25d06b6a2af9", "b4d54a345cb3d9b8", "e3bf9c1d63cef7da", "d752eb02c2bc0152",
	"c93d5de7afbe7faf", "c86e4a2c8b17fd06", "a27e676b3915938d",
}

// TestKernelsNoAlloc checks that no kernel allocates once its scratch is
// warm.
func TestKernelsNoAlloc(t *testing.T) {
	allocTest(t)
	const w, h = 224, 224
	src := noiseImage(w, h, 2)
	pix := bytes.Clone(src)
	var s kernels.Scratch
	for _, st := range kernelCases {
		applyOne(pix, w, h, st, &s)
		allocs := testing.AllocsPerRun(5, func() {
			copy(pix, src)
			Apply(kernels.Planes{Pix: pix, W: w, H: h}, &st, &s)
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per run", st.Fn, allocs)
		}
	}
}

// TestKernelsOddSizes runs every kernel on thin and tiny images: no panic,
// no byte outside the image touched, and the ops that keep a constant
// image constant do.
func TestKernelsOddSizes(t *testing.T) {
	sizes := [][2]int{{1, 1}, {1, 7}, {7, 1}, {2, 2}, {3, 3}, {2, 9}, {17, 1}, {1, 33}, {5, 4}}
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		for _, st := range kernelCases {
			src := noiseImage(w, h, uint64(w*100+h))
			buf := append(bytes.Clone(src), 7, 7, 7, 7)
			var s kernels.Scratch
			applyOne(buf[:len(src)], w, h, st, &s)
			if !bytes.Equal(buf[len(src):], []byte{7, 7, 7, 7}) {
				t.Errorf("%dx%d %v: wrote past the image", w, h, st.Fn)
			}
			if st.Fn == AdjustSharpness && (w <= 2 || h <= 2) && !bytes.Equal(buf[:len(src)], src) {
				t.Errorf("%dx%d %v: torchvision leaves images 2 pixels or fewer across as they are", w, h, st.Fn)
			}
		}
		// A constant image stays constant under the blur and sharpness.
		for _, st := range []Step{kernelCases[7], kernelCases[16], kernelCases[17]} {
			pix := bytes.Repeat([]byte{77}, 3*w*h)
			var s kernels.Scratch
			applyOne(pix, w, h, st, &s)
			if !bytes.Equal(pix, bytes.Repeat([]byte{77}, 3*w*h)) {
				t.Errorf("%dx%d %v of a constant image: %v", w, h, st.Fn, pix)
			}
		}
	}
}

// TestKernelsOutOfRangeArguments runs the kernels on arguments torchvision
// refuses (their op classes check them before drawing): a defined result,
// no panic.
func TestKernelsOutOfRangeArguments(t *testing.T) {
	const w, h = 13, 11
	for _, st := range []Step{
		{Fn: AdjustBrightness, F: [6]float64{-1}},
		{Fn: AdjustBrightness, F: [6]float64{1e9}},
		{Fn: AdjustContrast, F: [6]float64{-3}},
		{Fn: AdjustSaturation, F: [6]float64{-1e9}},
		{Fn: AdjustSharpness, F: [6]float64{1e9}},
		{Fn: AdjustHue, F: [6]float64{7.3}},
		{Fn: AdjustHue, F: [6]float64{-1e9}},
		{Fn: Solarize, F: [6]float64{300}},
		{Fn: Solarize, F: [6]float64{-1e9}},
		{Fn: SolarizeAdd, I: [6]int{1 << 30}, F: [6]float64{1e9}},
		{Fn: SolarizeAdd, I: [6]int{-1 << 30}, F: [6]float64{200}},
		{Fn: GaussianBlur, I: [6]int{16383, 1}, F: [6]float64{1e6, 1e-9}},
	} {
		pix := noiseImage(w, h, 3)
		var s kernels.Scratch
		// Past Check, which refuses these: the kernels alone must
		// still give a defined result, never a crash.
		Apply(kernels.Planes{Pix: pix, W: w, H: h}, &st, &s)
	}
}

// TestBlurFitsEachSample: a drawn blur whose kernel's half is not
// smaller than the image's side fails its sample before the kernel runs
// (DrawnError), as torchvision's reflect padding raises; a parsed trace's
// (Check) runs on any size (TestKernelsOddSizes).
func TestBlurFitsEachSample(t *testing.T) {
	st := Step{Fn: GaussianBlur, I: [6]int{21, 5}, F: [6]float64{2, 1}}
	for _, c := range []struct {
		w, h int
		ok   bool
	}{{10, 40, false}, {40, 2, false}, {11, 2, false}, {11, 3, true}, {400, 300, true}} {
		err := st.DrawnError(c.w, c.h)
		if (err == nil) != c.ok {
			t.Errorf("%dx%d: %v, want ok %v", c.w, c.h, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("kernel_size [21 5] on a %dx%d image: torchvision refuses", c.w, c.h)) {
			t.Errorf("%dx%d: %v", c.w, c.h, err)
		}
		if err := Check(&st, c.w, c.h); err != nil {
			t.Errorf("%dx%d: a parsed trace's blur: %v", c.w, c.h, err)
		}
	}
}
