//go:build cgo

package codec

import (
	"bytes"
	"image/jpeg"
	"image/png"
	"testing"
)

// FuzzScratch: any bytes, parsed by ParseHeader and decoded through the
// binding alone (JPEG, PNG, WebP) with a view drawn from the fuzzer's
// numbers: an error or the view's bytes, never a crash, and nothing
// written past the view (the output has a guard after it). The pipeline's
// FuzzDecode and its index fuzzers drive the same C through the Decoder,
// with the decoder index and the coefficient cache on.
func FuzzScratch(f *testing.F) {
	img := picture(48, 32)
	var j, p bytes.Buffer
	if err := jpeg.Encode(&j, img, &jpeg.Options{Quality: 80}); err != nil {
		f.Fatal(err)
	}
	if err := png.Encode(&p, img); err != nil {
		f.Fatal(err)
	}
	f.Add(j.Bytes(), uint16(0), uint16(0), uint16(48), uint16(32), uint8(24), uint8(16), uint8(0))
	f.Add(j.Bytes(), uint16(5), uint16(3), uint16(20), uint16(17), uint8(40), uint8(9), uint8(0x0A))
	f.Add(p.Bytes(), uint16(1), uint16(2), uint16(40), uint16(20), uint8(7), uint8(33), uint8(0x15))
	f.Fuzz(func(t *testing.T, data []byte, x, y, w, h uint16, ow, oh, mode uint8) {
		hd, err := ParseHeader(data)
		if err != nil || hd.W > 4096 || hd.H > 4096 || hd.Comps == 4 {
			return
		}
		x0, y0 := int(x)%hd.W, int(y)%hd.H
		cw, ch := 1+int(w)%(hd.W-x0), 1+int(h)%(hd.H-y0)
		outW, outH := 1+int(ow)%64, 1+int(oh)%64
		g := Geometry{
			Box:  Box{X: float64(x0), Y: float64(y0), W: float64(cw), H: float64(ch)},
			Clip: Clip{X0: x0, Y0: y0, X1: x0 + cw, Y1: y0 + ch},
			SX:   Span{Base: x0, In: cw, Out: outW}, SY: Span{Base: y0, In: ch, Out: outH},
			OutW: outW, OutH: outH, Interp: int(mode) % 3, Antialias: mode&4 != 0, Flip: mode&8 != 0,
		}
		j := Job{SrcW: hd.W, SrcH: hd.H, Comps: hd.Comps, HWC: mode&16 != 0, Scaling: Scaling(mode>>5) % 3,
			MaxScans: 100, MaxMemory: 64 << 20}
		n := 3 * outW * outH
		out := make([]byte, n+64)
		for i := n; i < len(out); i++ {
			out[i] = 0xA5
		}
		s, err := NewScratch()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Free()
		s.Set(&j, []Geometry{g}, []int{0}, n)
		switch hd.Format {
		case FormatJPEG:
			_ = s.Err(s.Decode(data, out, nil, nil))
		case FormatPNG:
			_ = s.Err(s.DecodePNG(data, out, nil))
		case FormatWebP:
			_ = s.Err(s.DecodeWebP(data, out, nil))
		default:
			return
		}
		for i := n; i < len(out); i++ {
			if out[i] != 0xA5 {
				t.Fatalf("byte %d past the view's %d written", i, n)
			}
		}
	})
}
