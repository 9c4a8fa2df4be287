package cv

import (
	"math"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

func benchPlanes(w, h int) kernels.Planes {
	p := kernels.Planes{Pix: make([]byte, 3*w*h), W: w, H: h}
	for i := range p.Pix {
		p.Pix[i] = byte(i*7 + i/w*13)
	}
	return p
}

// BenchmarkKernels: each kernel on a 640x640 image (python/tests/
// test_yolo_kernels.py's cases, at YOLO's size); compare with cv2 on one
// core (taskset -c 0, cv2.setNumThreads(1)). The go/... cases are the Go
// versions (the pure-Go build's) of the kernels with a C path in cgo
// builds, side by side.
func BenchmarkKernels(b *testing.B) {
	src := benchPlanes(640, 640)
	b.Run("resize/640x640-427x640", func(b *testing.B) {
		dst := benchPlanes(427, 640)
		for i := 0; i < b.N; i++ {
			ResizeLinear(dst, src)
		}
	})
	b.Run("go/resize/640x640-427x640", func(b *testing.B) {
		dst := benchPlanes(427, 640)
		for i := 0; i < b.N; i++ {
			resizeLinearGo(dst, src, resizeTaps(dst.W, src.W, true), resizeTaps(dst.H, src.H, false))
		}
	})
	affine := [6]float64{0.9, 0.1, 20, -0.1, 0.95, 10}
	persp := [9]float64{0.9, 0.1, 20, -0.1, 0.95, 10, 0.0002, -0.0001, 1}
	b.Run("warpaffine/640", func(b *testing.B) {
		dst := benchPlanes(640, 640)
		for i := 0; i < b.N; i++ {
			WarpAffine(dst, src, affine, 114)
		}
	})
	b.Run("go/warpaffine/640", func(b *testing.B) {
		dst := benchPlanes(640, 640)
		f := warpMatrix(func(m [6]float64) []float64 { return m[:] }(InvertAffine(affine)))
		for i := 0; i < b.N; i++ {
			warpGo(dst, src, f, false, 114)
		}
	})
	b.Run("warpperspective/640", func(b *testing.B) {
		dst := benchPlanes(640, 640)
		for i := 0; i < b.N; i++ {
			WarpPerspective(dst, src, persp, 114)
		}
	})
	b.Run("go/warpperspective/640", func(b *testing.B) {
		dst := benchPlanes(640, 640)
		f := warpMatrix(func(m [9]float64) []float64 { return m[:] }(InvertPerspective(persp)))
		for i := 0; i < b.N; i++ {
			warpGo(dst, src, f, true, 114)
		}
	})
	// The HSV cases work on a copy of src made afresh each time (in place
	// on src, the value's gain below 1 would make it black in a few calls).
	b.Run("hsv/640", func(b *testing.B) {
		im := benchPlanes(640, 640)
		for i := 0; i < b.N; i++ {
			copy(im.Pix, src.Pix)
			RandomHSV(im, [3]float64{0.01, 0.3, -0.2})
		}
	})
	b.Run("go/hsv/640", func(b *testing.B) {
		im := benchPlanes(640, 640)
		for i := 0; i < b.N; i++ {
			copy(im.Pix, src.Pix)
			hue, sat, val := HSVLUTs([3]float64{0.01, 0.3, -0.2})
			hsvPixelsGo(im, &hue, &sat, &val)
		}
	})
}

// warpMatrix is an inverse matrix as the warps round it, to float; an
// affine one's last row 0, 0, 1.
func warpMatrix(inv []float64) [9]float32 {
	f := [9]float32{8: 1}
	for i, v := range inv {
		f[i] = float32(v)
	}
	return f
}

// BenchmarkPolygonsToMasksOverlap: a 640x640 sample's overlap mask (what
// a job asking for "overlap_mask" makes a sample) of 10 instances of 1000
// points each (ultralytics' resampled segments), discs of radius 20 to
// 200 pixels, at mask_ratio 4; regions is the kernel, whole the plain
// way (every instance filled and resized on the whole image).
func BenchmarkPolygonsToMasksOverlap(b *testing.B) {
	segs := make([][][2]float32, 10)
	for k := range segs {
		r, cx, cy := float64(20+20*k), float64(100+40*k), float64(320-15*k)
		s := make([][2]float32, 1000)
		for j := range s {
			a := 2 * math.Pi * float64(j) / 1000
			s[j] = [2]float32{float32(cx + r*math.Cos(a)), float32(cy + r*math.Sin(a))}
		}
		segs[k] = s
	}
	b.Run("regions", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			PolygonsToMasksOverlap(segs, 640, 640, 4)
		}
	})
	b.Run("whole", func(b *testing.B) { // each instance on the whole image: the plain way
		for i := 0; i < b.N; i++ {
			polygonsToMasksOverlapFull(segs, 640, 640, 4)
		}
	})
}
