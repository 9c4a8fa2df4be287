//go:build unix

package kernels

import (
	"bytes"
	"image/jpeg"
	"os"
	"syscall"
	"testing"
	"time"
)

// kernelBenches are the kernels BenchmarkKernels times, with the arguments
// bench/kernels.py gives torchvision's (keep the two in step). The "-go"
// ones time a geometric kernel's Go resampling (what CPUs without AVX2 and
// FMA and CGO_ENABLED=0 builds run) where the C one would run.
var kernelBenches = []struct {
	name string
	run  func(p Planes, s *Scratch)
}{
	{"adjust_brightness", func(p Planes, _ *Scratch) { AdjustBrightness(p, 1.3) }},
	{"adjust_contrast", func(p Planes, _ *Scratch) { AdjustContrast(p, 1.3) }},
	{"adjust_saturation", func(p Planes, _ *Scratch) { AdjustSaturation(p, 1.3) }},
	{"adjust_hue", func(p Planes, _ *Scratch) { AdjustHue(p, 0.1) }},
	{"adjust_sharpness", func(p Planes, s *Scratch) { AdjustSharpness(p, 1.7, s) }},
	{"rgb_to_grayscale", func(p Planes, _ *Scratch) { RGBToGrayscale(p) }},
	{"solarize", func(p Planes, _ *Scratch) { Solarize(p, 128) }},
	{"solarize_add", func(p Planes, _ *Scratch) { SolarizeAdd(p, 30, 128) }},
	{"posterize", func(p Planes, _ *Scratch) { Posterize(p, 4) }},
	{"invert", func(p Planes, _ *Scratch) { Invert(p) }},
	{"equalize", func(p Planes, _ *Scratch) { Equalize(p) }},
	{"autocontrast", func(p Planes, _ *Scratch) { Autocontrast(p) }},
	{"gaussian_blur_k9", func(p Planes, s *Scratch) { GaussianBlur(p, 9, 9, 1, 1, s) }},
	{"gaussian_blur_k23", func(p Planes, s *Scratch) { GaussianBlur(p, 23, 23, 1.5, 1.5, s) }},
	{"horizontal_flip", func(p Planes, _ *Scratch) { HorizontalFlip(p) }},
	{"vertical_flip", func(p Planes, _ *Scratch) { VerticalFlip(p) }},
	{"rotate/bilinear", benchRotate(Bilinear, false)},
	{"rotate/bilinear-go", benchRotate(Bilinear, true)},
	{"rotate/bicubic", benchRotate(Bicubic, false)},
	{"rotate/bicubic-go", benchRotate(Bicubic, true)},
	{"rotate/nearest", benchRotate(Nearest, false)},
	{"rotate/nearest-go", benchRotate(Nearest, true)},
	{"affine/bilinear", benchAffine(Bilinear, false)},
	{"affine/bilinear-go", benchAffine(Bilinear, true)},
	{"affine/nearest", benchAffine(Nearest, false)},
	{"affine/nearest-go", benchAffine(Nearest, true)},
	{"erase", func(p Planes, _ *Scratch) { Erase(p, 20, 30, 100, 120, [3]float64{124, 116, 104}) }},
	{"erase/random", func(p Planes, s *Scratch) {
		EraseRandom(p, 20, 30, 100, 120, 7, [3]float64{0.485, 0.456, 0.406}, [3]float64{0.229, 0.224, 0.225}, s)
	}},
}

// benchAffine is affine(angle 10, translate (5, 3), scale 1.1, shear (8,
// 2), fill 0), with the Go resampling when goOnly.
func benchAffine(interp Interpolation, goOnly bool) func(Planes, *Scratch) {
	a := AffineParams{Angle: 10, TX: 5, TY: 3, Scale: 1.1, ShearX: 8, ShearY: 2, Interp: interp}
	if !goOnly {
		return func(p Planes, s *Scratch) { Affine(p, &a, s) }
	}
	return func(p Planes, s *Scratch) {
		m := inverseAffine(p.W, p.H, a.Center, a.HasCenter, a.Angle, [2]float64{a.TX, a.TY}, a.Scale, [2]float64{a.ShearX, a.ShearY})
		g := newAffineGrid(&m, p.W, p.H)
		resampleAffineGo(p, &g, interp, [3]float32{}, false, s)
	}
}

// benchRotate is rotate(30.5 degrees, fill 0), with the Go resampling
// when goOnly.
func benchRotate(interp Interpolation, goOnly bool) func(Planes, *Scratch) {
	const angle = 30.5
	if !goOnly {
		return func(p Planes, s *Scratch) { Rotate(p, angle, interp, [2]float64{}, false, [3]float64{}, false, s) }
	}
	return func(p Planes, s *Scratch) {
		m := inverseAffine(p.W, p.H, [2]float64{}, false, -pyMod(angle, 360), [2]float64{}, 1, [2]float64{})
		g := newAffineGrid(&m, p.W, p.H)
		resampleAffineGo(p, &g, interp, [3]float32{}, false, s)
	}
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
	p := Planes{Pix: pix, W: 224, H: 224}
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
			var s Scratch
			copy(pix, src)
			k.run(p, &s) // warm the scratch
			b.ReportAllocs()
			b.SetBytes(int64(len(src)))
			cpu := cpuTime()
			for b.Loop() {
				copy(pix, src)
				k.run(p, &s)
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchCrop is the centre w x h of a photo of testdata/photos, CHW.
func benchCrop(tb testing.TB, w, h int) []byte {
	data, err := os.ReadFile("../../testdata/photos/autumn/000000.jpg")
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

// BenchmarkRotateExpand times rotate(30.5 degrees) of a 224x224 crop
// without expand (the C kernel where the CPU has it) and with it (Go:
// a 307x307 output), nearest and bilinear; out-px/s is output pixels a
// second.
func BenchmarkRotateExpand(b *testing.B) {
	src := benchCrop(b, 224, 224)
	for _, interp := range []Interpolation{Nearest, Bilinear} {
		for _, expand := range []bool{false, true} {
			name := map[Interpolation]string{Nearest: "nearest", Bilinear: "bilinear"}[interp] + map[bool]string{false: "/same", true: "/expand"}[expand]
			b.Run(name, func(b *testing.B) {
				pix := make([]byte, len(src), 3*310*310)
				var s Scratch
				n := 224 * 224
				for range b.N {
					copy(pix, src)
					p := Planes{Pix: pix[:len(src)], W: 224, H: 224}
					if expand {
						o := RotateExpand(p, pix[:cap(pix)], 30.5, interp, [2]float64{}, false, [3]float64{}, false, &s)
						n = o.W * o.H
					} else {
						Rotate(p, 30.5, interp, [2]float64{}, false, [3]float64{}, false, &s)
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "out-px/s")
			})
		}
	}
}
