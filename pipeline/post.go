package pipeline

import (
	"encoding/binary"
	"math"

	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// Floating point in this file: every product that is added or subtracted is
// wrapped in float32(...), which rounds it and so stops the compiler from
// fusing it into a multiply-add (the Go spec allows that, and arm64, ppc64,
// s390x, riscv64 and amd64 with GOAMD64=v3 do it): a sample must be the
// same bytes on every machine.

// normalize writes (pix/255 - mean) / std as little-endian float32 into out.
func normalize(pix, out []byte, layout transform.Layout, nop *ops.Op) {
	op := ops.ArgsOf[ops.NormalizeArgs](nop)
	n := len(pix) / 3
	var scale, bias [3]float32
	for c := range 3 {
		scale[c] = float32(1 / (255 * op.Std[c]))
		bias[c] = float32(-op.Mean[c] / op.Std[c])
	}
	for i, v := range pix {
		c := i / n
		if layout == transform.HWC {
			c = i % 3
		}
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(float32(v)*scale[c])+bias[c]))
	}
}

// padInto writes the w x h image whose visible part, vw x vh in src, has
// its top-left pixel at (x, y), into dst, fill elsewhere (torchvision's
// padding: a CenterCrop larger than the image's zeros, RandomCrop's
// constant fill), in layout.
func padInto(dst []byte, w, h int, src []byte, vw, vh, x, y int, fill [3]float64, layout transform.Layout) {
	if fill == [3]float64{} {
		clear(dst)
	} else if layout == transform.HWC {
		for i := 0; i < len(dst); i += 3 {
			dst[i], dst[i+1], dst[i+2] = byte(fill[0]), byte(fill[1]), byte(fill[2])
		}
	} else {
		for c := range 3 {
			pl := dst[c*w*h:][:w*h]
			for i := range pl {
				pl[i] = byte(fill[c])
			}
		}
	}
	if layout == transform.HWC {
		for r := range vh {
			copy(dst[3*((y+r)*w+x):][:3*vw], src[3*r*vw:][:3*vw])
		}
		return
	}
	for c := range 3 {
		for r := range vh {
			copy(dst[c*w*h+(y+r)*w+x:][:vw], src[c*vw*vh+r*vw:][:vw])
		}
	}
}
