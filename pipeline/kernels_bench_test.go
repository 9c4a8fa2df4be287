//go:build unix

package pipeline

import (
	"bytes"
	"image/jpeg"
	"os"
	"syscall"
	"testing"
	"time"
)

// kernelBenches are the ops BenchmarkKernels times, with the arguments
// bench/kernels.py gives torchvision's (keep the two in step). goOnly
// times a geometric kernel's Go resampling (what CPUs without AVX2 and FMA
// and CGO_ENABLED=0 builds run) where the C one would run.
var kernelBenches = []struct {
	name   string
	step   Step
	goOnly bool
}{
	{"adjust_brightness", Step{Fn: FnAdjustBrightness, F: [6]float64{1.3}}, false},
	{"adjust_contrast", Step{Fn: FnAdjustContrast, F: [6]float64{1.3}}, false},
	{"adjust_saturation", Step{Fn: FnAdjustSaturation, F: [6]float64{1.3}}, false},
	{"adjust_hue", Step{Fn: FnAdjustHue, F: [6]float64{0.1}}, false},
	{"adjust_sharpness", Step{Fn: FnAdjustSharpness, F: [6]float64{1.7}}, false},
	{"rgb_to_grayscale", Step{Fn: FnRGBToGrayscale, I: [6]int{3}}, false},
	{"solarize", Step{Fn: FnSolarize, F: [6]float64{128}}, false},
	{"solarize_add", Step{Fn: FnSolarizeAdd, I: [6]int{30}, F: [6]float64{128}}, false},
	{"posterize", Step{Fn: FnPosterize, I: [6]int{4}}, false},
	{"invert", Step{Fn: FnInvert}, false},
	{"equalize", Step{Fn: FnEqualize}, false},
	{"autocontrast", Step{Fn: FnAutocontrast}, false},
	{"gaussian_blur_k9", Step{Fn: FnGaussianBlur, I: [6]int{9, 9}, F: [6]float64{1, 1}}, false},
	{"gaussian_blur_k23", Step{Fn: FnGaussianBlur, I: [6]int{23, 23}, F: [6]float64{1.5, 1.5}}, false},
	{"horizontal_flip", Step{Fn: FnHorizontalFlip}, false},
	{"vertical_flip", Step{Fn: FnVerticalFlip}, false},
	{"rotate/bilinear", Step{Fn: FnRotate, F: [6]float64{30.5}, Interp: InterpBilinear}, false},
	{"rotate/bilinear-go", Step{Fn: FnRotate, F: [6]float64{30.5}, Interp: InterpBilinear}, true},
	{"rotate/bicubic", Step{Fn: FnRotate, F: [6]float64{30.5}, Interp: InterpBicubic}, false},
	{"rotate/bicubic-go", Step{Fn: FnRotate, F: [6]float64{30.5}, Interp: InterpBicubic}, true},
	{"rotate/nearest", Step{Fn: FnRotate, F: [6]float64{30.5}, Interp: InterpNearest}, false},
	{"rotate/nearest-go", Step{Fn: FnRotate, F: [6]float64{30.5}, Interp: InterpNearest}, true},
	{"affine/bilinear", Step{Fn: FnAffine, F: [6]float64{10, 5, 3, 1.1, 8, 2}, Interp: InterpBilinear}, false},
	{"affine/bilinear-go", Step{Fn: FnAffine, F: [6]float64{10, 5, 3, 1.1, 8, 2}, Interp: InterpBilinear}, true},
	{"affine/nearest", Step{Fn: FnAffine, F: [6]float64{10, 5, 3, 1.1, 8, 2}, Interp: InterpNearest}, false},
	{"affine/nearest-go", Step{Fn: FnAffine, F: [6]float64{10, 5, 3, 1.1, 8, 2}, Interp: InterpNearest}, true},
	{"erase", Step{Fn: FnErase, I: [6]int{20, 30, 100, 120}, Fill: [3]float64{124, 116, 104}}, false},
	{"erase/random", Step{Fn: FnErase, I: [6]int{20, 30, 100, 120}, Random: true, Seed: 7}, false},
}

// BenchmarkKernels times each kernel on a 224x224 crop of a real photo
// (CHW uint8), as BenchmarkKernels/<op>/224. Each op starts
// from the crop: the time includes copying it in (150 KB), which
// BenchmarkKernels/copy/224 times alone. SetBytes is the image's bytes;
// cpu-ns/op is the process's CPU time per op (getrusage, hence unix
// only), the steadier figure on a shared machine.
func BenchmarkKernels(b *testing.B) {
	src := benchCrop(b, 224, 224)
	pix := make([]byte, len(src))
	p := planes{pix: pix, w: 224, h: 224}
	b.Run("copy/224", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(src)))
		cpu := cpuTime()
		for b.Loop() {
			copy(pix, src)
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
	for _, k := range kernelBenches {
		b.Run(k.name+"/224", func(b *testing.B) {
			var s opScratch
			run := applyStep
			if k.goOnly {
				run = geomGo
			}
			copy(pix, src)
			run(p, &k.step, &s) // warm the scratch
			b.ReportAllocs()
			b.SetBytes(int64(len(src)))
			cpu := cpuTime()
			for b.Loop() {
				copy(pix, src)
				run(p, &k.step, &s)
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchCrop is the centre w x h of a photo of testdata/photos, CHW.
func benchCrop(tb testing.TB, w, h int) []byte {
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		tb.Fatal(err)
	}
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		tb.Fatal(err)
	}
	r := img.Bounds()
	if r.Dx() < w || r.Dy() < h {
		tb.Fatalf("photo %v smaller than %dx%d", r, w, h)
	}
	x0, y0 := r.Min.X+(r.Dx()-w)/2, r.Min.Y+(r.Dy()-h)/2
	out := make([]byte, 3*w*h)
	for y := range h {
		for x := range w {
			c, g, bl, _ := img.At(x0+x, y0+y).RGBA()
			i := y*w + x
			out[i], out[w*h+i], out[2*w*h+i] = byte(c>>8), byte(g>>8), byte(bl>>8)
		}
	}
	return out
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// geomGo is applyStep for a rotate or affine step with the Go resampling.
func geomGo(p planes, st *Step, s *opScratch) {
	var m [6]float64
	if st.Fn == FnRotate {
		m = inverseAffine(p.w, p.h, st.Center, st.HasCenter, -pyMod(st.F[0], 360), [2]float64{}, 1, [2]float64{})
	} else {
		m = inverseAffine(p.w, p.h, st.Center, st.HasCenter, st.F[0], [2]float64{st.F[1], st.F[2]}, st.F[3], [2]float64{st.F[4], st.F[5]})
	}
	g := newAffineGrid(&m, p.w, p.h)
	f := [3]float32{float32(st.Fill[0]), float32(st.Fill[1]), float32(st.Fill[2])}
	resampleAffineGo(p, &g, st.Interp, f, st.FillNone, s)
}
