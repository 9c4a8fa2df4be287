package pipeline

// Floating point in this file: every product that is added or subtracted is
// wrapped in float32(...), which rounds it and so stops the compiler from
// fusing it into a multiply-add (the Go spec allows that, and arm64, ppc64,
// s390x, riscv64 and amd64 with GOAMD64=v3 do it): a sample must be the
// same bytes on every machine.

import (
	"encoding/binary"
	"math"
)

// jitter applies ColorJitter's brightness, contrast and saturation in the
// plan's order, with torchvision.transforms.v2 semantics on uint8 tensors:
// float math, clamp to [0, 255], truncate back to uint8.
func jitter(pix []byte, layout Layout, p *samplePlan) {
	n := len(pix) / 3
	at := func(i int) (int, int, int) { // offsets of pixel i's r, g, b
		if layout == HWC {
			return 3 * i, 3*i + 1, 3*i + 2
		}
		return i, n + i, 2*n + i
	}
	gray := func(i int) float32 {
		r, g, b := at(i)
		return float32(math.Trunc(float64(float32(0.2989*float32(pix[r])) + float32(0.587*float32(pix[g])) + float32(0.114*float32(pix[b])))))
	}
	blend := func(v, other, f float32) byte {
		x := float32(f*v) + float32((1-f)*other)
		return byte(min(max(x, 0), 255))
	}
	for _, op := range p.order {
		f := float32(p.jit[op])
		if f == 1 {
			continue
		}
		switch op {
		case 0: // brightness: blend with black
			for i := range pix {
				pix[i] = blend(float32(pix[i]), 0, f)
			}
		case 1: // contrast: blend with the mean of the grayscale image
			var sum float64
			for i := 0; i < n; i++ {
				sum += float64(gray(i))
			}
			mean := float32(sum / float64(n))
			for i := range pix {
				pix[i] = blend(float32(pix[i]), mean, f)
			}
		case 2: // saturation: blend with the pixel's gray
			for i := 0; i < n; i++ {
				g := gray(i)
				r, gg, b := at(i)
				pix[r] = blend(float32(pix[r]), g, f)
				pix[gg] = blend(float32(pix[gg]), g, f)
				pix[b] = blend(float32(pix[b]), g, f)
			}
		}
	}
}

// normalize writes (pix/255 - mean) / std as little-endian float32 into out.
func normalize(pix, out []byte, layout Layout, op *Op) {
	n := len(pix) / 3
	var scale, bias [3]float32
	for c := range 3 {
		scale[c] = float32(1 / (255 * op.Std[c]))
		bias[c] = float32(-op.Mean[c] / op.Std[c])
	}
	for i, v := range pix {
		c := i / n
		if layout == HWC {
			c = i % 3
		}
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(float32(v)*scale[c])+bias[c]))
	}
}
