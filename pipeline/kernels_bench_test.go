//go:build cgo

package pipeline

import (
	"fmt"
	"testing"
)

// geomBench is one geometric kernel benchmark: a step, or with goOnly its
// resampling by the Go version even where the C one runs.
type geomBench struct {
	name   string
	step   Step
	goOnly bool
}

// geomBenches are the geometric kernels' benchmarks on a 224x224 crop:
// BenchmarkKernels/<op>[/<interpolation>]/224. bench/kernels_geom.py times
// the same ops in torchvision for the ratios.
var geomBenches = func() []geomBench {
	rot := Step{Fn: FnRotate, F: [6]float64{30.5}}
	aff := Step{Fn: FnAffine, F: [6]float64{10, 5, 3, 1.1, 8, 2}}
	with := func(st Step, in Interpolation) Step { st.Interp = in; return st }
	return []geomBench{
		{"horizontal_flip", Step{Fn: FnHorizontalFlip}, false},
		{"vertical_flip", Step{Fn: FnVerticalFlip}, false},
		{"rotate/bilinear", with(rot, InterpBilinear), false},
		{"rotate/bilinear-go", with(rot, InterpBilinear), true},
		{"rotate/bicubic", with(rot, InterpBicubic), false},
		{"rotate/bicubic-go", with(rot, InterpBicubic), true},
		{"rotate/nearest", with(rot, InterpNearest), false},
		{"rotate/nearest-go", with(rot, InterpNearest), true},
		{"affine/bilinear", with(aff, InterpBilinear), false},
		{"affine/bilinear-go", with(aff, InterpBilinear), true},
		{"affine/nearest", with(aff, InterpNearest), false},
		{"affine/nearest-go", with(aff, InterpNearest), true},
		{"erase", Step{Fn: FnErase, I: [6]int{20, 30, 100, 120}, Fill: [3]float64{124, 116, 104}}, false},
		{"erase/random", Step{Fn: FnErase, I: [6]int{20, 30, 100, 120}, Random: true, Seed: 7}, false},
	}
}()

// BenchmarkKernels runs each kernel on a warm opScratch, as a Decoder
// does per sample; MB/s is of the image's bytes, cpu-ns/op the process's
// CPU time per op (the steadier figure on a shared machine).
func BenchmarkKernels(b *testing.B) {
	const side = 224
	img := noiseImage(side, side, 1)
	for _, bc := range geomBenches {
		b.Run(fmt.Sprintf("%s/%d", bc.name, side), func(b *testing.B) {
			pix := append([]byte(nil), img...)
			p := planes{pix: pix, w: side, h: side}
			var s opScratch
			st := bc.step
			run := func() { applyStep(p, &st, &s) }
			if bc.goOnly {
				run = func() { geomGo(p, &st, &s) }
			}
			run()
			b.SetBytes(int64(len(pix)))
			b.ReportAllocs()
			b.ResetTimer()
			start := benchCPUTime()
			for range b.N {
				run()
			}
			benchReportCPU(b, start, b.N)
		})
	}
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
