package cv

import (
	"math"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// OpenCV's fixed point for a linear resize of uint8 (imgproc/resize.cpp):
// the weights are 11-bit, the horizontal pass keeps sums of 22 bits, and the
// vertical pass drops 4 bits from each before its 16-bit multiply.
const (
	resizeCoefBits  = 11
	resizeCoefScale = 1 << resizeCoefBits
)

// linearTaps is one axis of a linear resize: for output i, its first
// source index and the fixed-point weights of it and the next.
type linearTaps struct {
	ofs    []int32
	w0, w1 []int16
	// edge is the first output whose source index is the last: from there
	// the pass reads one source (OpenCV's xmax).
	edge int
}

// resizeTaps computes one axis' taps as cv::resize does for INTER_LINEAR:
// the source coordinate (d+0.5)*scale-0.5 in double, rounded to float, its
// floor the index and the rest the weight, each weight times 2048 rounded
// to nearest even (saturate_cast<short>). Columns (clamp) are clamped at
// both ends to the first or last with weights (2048, 0); rows are not: a
// row before the first or past the last reads the edge row under both
// weights, whose two products are each floored apart.
func resizeTaps(dst, src int, clamp bool) linearTaps {
	t := linearTaps{ofs: make([]int32, dst), w0: make([]int16, dst), w1: make([]int16, dst), edge: dst}
	scale := 1 / (float64(dst) / float64(src))
	for d := 0; d < dst; d++ {
		f := float32(float64(float64(float64(d)+0.5)*scale) - 0.5)
		s := int(math.Floor(float64(f)))
		f -= float32(s)
		if !clamp {
			t.ofs[d] = int32(s)
			t.w0[d] = int16(math.RoundToEven(float64((1 - f) * resizeCoefScale)))
			t.w1[d] = int16(math.RoundToEven(float64(f * resizeCoefScale)))
			continue
		}
		if s < 0 {
			f, s = 0, 0
		}
		if s+1 >= src {
			t.edge = min(t.edge, d)
			if s >= src-1 {
				f, s = 0, src-1
			}
		}
		t.ofs[d] = int32(s)
		t.w0[d] = int16(math.RoundToEven(float64((1 - f) * resizeCoefScale)))
		t.w1[d] = int16(math.RoundToEven(float64(f * resizeCoefScale)))
	}
	return t
}

// ResizeLinear resizes src into dst (their sizes say how) as
// cv2.resize(img, (dst.W, dst.H), interpolation=cv2.INTER_LINEAR) does on
// uint8: OpenCV's bytes. The same size is a copy; an exact halving on both
// sides is OpenCV's INTER_AREA (which cv::resize takes then), the mean of
// each 2x2 block rounded half up.
func ResizeLinear(dst, src kernels.Planes) {
	n, dn := src.W*src.H, dst.W*dst.H
	switch {
	case src.W == dst.W && src.H == dst.H:
		copy(dst.Pix[:3*n], src.Pix[:3*n])
		return
	case src.W == 2*dst.W && src.H == 2*dst.H:
		for c := 0; c < 3; c++ {
			halve(dst.Pix[c*dn:(c+1)*dn], src.Pix[c*n:(c+1)*n], dst.W, dst.H)
		}
		return
	}
	resizeLinear(dst, src, resizeTaps(dst.W, src.W, true), resizeTaps(dst.H, src.H, false))
}

// resizeLinearGo is ResizeLinear's two passes with the taps made:
// resizeLinear's Go version, the pure-Go build's and the reference of the C
// (cv.c) in the tests.
func resizeLinearGo(dst, src kernels.Planes, tx, ty linearTaps) {
	n, dn := src.W*src.H, dst.W*dst.H
	rows := [2][]int32{make([]int32, dst.W), make([]int32, dst.W)}
	for c := 0; c < 3; c++ {
		sp, dp := src.Pix[c*n:(c+1)*n], dst.Pix[c*dn:(c+1)*dn]
		have := [2]int{-1, -1} // the source rows the two buffers hold
		for dy := 0; dy < dst.H; dy++ {
			sy := min(max(int(ty.ofs[dy]), 0), src.H-1)
			sy1 := min(max(int(ty.ofs[dy])+1, 0), src.H-1)
			var r0, r1 []int32
			r0 = hrow(&rows, &have, sy, sp, src.W, tx)
			r1 = hrow(&rows, &have, sy1, sp, src.W, tx)
			if sy1 == sy {
				r1 = r0
			}
			b0, b1 := int32(ty.w0[dy]), int32(ty.w1[dy])
			out := dp[dy*dst.W : (dy+1)*dst.W]
			for x := range out {
				// VResizeLinear<uchar, int, short, FixedPtCast<..., 22>>:
				// each sum shifted down 4, multiplied by its 11-bit weight,
				// shifted down 16, then the two added and rounded by 2 bits.
				out[x] = uint8((((b0 * (r0[x] >> 4)) >> 16) + ((b1 * (r1[x] >> 4)) >> 16) + 2) >> 2)
			}
		}
	}
}

// hrow returns the horizontal pass of source row sy, from one of the two
// buffers if it holds that row, else computed into the buffer that does not
// hold the other row wanted now.
func hrow(rows *[2][]int32, have *[2]int, sy int, sp []byte, sw int, tx linearTaps) []int32 {
	for i := range have {
		if have[i] == sy {
			return rows[i]
		}
	}
	// Rows go down: replace the lower of the two.
	i := 0
	if have[1] < have[0] {
		i = 1
	}
	have[i] = sy
	row, src := rows[i], sp[sy*sw:(sy+1)*sw]
	for x := 0; x < tx.edge; x++ {
		s := tx.ofs[x]
		row[x] = int32(src[s])*int32(tx.w0[x]) + int32(src[s+1])*int32(tx.w1[x])
	}
	for x := tx.edge; x < len(row); x++ {
		row[x] = int32(src[tx.ofs[x]]) * resizeCoefScale
	}
	return row
}

// halve is cv::resize's INTER_AREA for an exact factor of 2 on uint8 (its
// SIMD path, which covers every pixel of the sizes tested): (a+b+c+d+2)>>2.
func halve(dst, src []byte, w, h int) {
	sw := 2 * w
	for y := 0; y < h; y++ {
		s0, s1 := src[2*y*sw:(2*y+1)*sw], src[(2*y+1)*sw:(2*y+2)*sw]
		d := dst[y*w : (y+1)*w]
		for x := range d {
			d[x] = uint8((int(s0[2*x]) + int(s0[2*x+1]) + int(s1[2*x]) + int(s1[2*x+1]) + 2) >> 2)
		}
	}
}

// LoadSize is the size ultralytics' BaseDataset.load_image resizes a w x h
// image to (rect_mode, the long side to imgsz): r = imgsz / max(h, w), each
// side min(ceil(side * r), imgsz), or the image's own size when r is 1.
func LoadSize(w, h, imgsz int) (int, int) {
	r := float64(imgsz) / float64(max(h, w))
	if r == 1 {
		return w, h
	}
	return min(int(math.Ceil(float64(w)*r)), imgsz), min(int(math.Ceil(float64(h)*r)), imgsz)
}

// The parity case "resize": images[0] to dw x dh (ResizeLinear).
func init() {
	addCase("resize", 1, func(c *CaseIn) (CaseOut, error) {
		var a sizeArgs
		if err := c.Args(&a); err != nil {
			return CaseOut{}, err
		}
		if err := a.checkSize(); err != nil {
			return CaseOut{}, err
		}
		dst := newPlanes(a.DW, a.DH)
		ResizeLinear(dst, c.Images[0])
		return CaseOut{Images: []kernels.Planes{dst}}, nil
	})
}
