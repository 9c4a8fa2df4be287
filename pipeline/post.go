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
