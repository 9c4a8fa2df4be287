package cv

import (
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
// core (taskset -c 0, cv2.setNumThreads(1)).
func BenchmarkKernels(b *testing.B) {
	src := benchPlanes(640, 640)
	b.Run("resize/640x640-427x640", func(b *testing.B) {
		dst := benchPlanes(427, 640)
		for i := 0; i < b.N; i++ {
			ResizeLinear(dst, src)
		}
	})
	b.Run("warpaffine/640", func(b *testing.B) {
		dst := benchPlanes(640, 640)
		for i := 0; i < b.N; i++ {
			WarpAffine(dst, src, [6]float64{0.9, 0.1, 20, -0.1, 0.95, 10}, 114)
		}
	})
	b.Run("hsv/640", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			RandomHSV(src, [3]float64{0.01, 0.3, -0.2})
		}
	})
}
