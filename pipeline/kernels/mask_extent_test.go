package kernels

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// colRuns is COCO's runs of the row-major mask rm (srcW columns):
// column-major, from a run of 0.
func colRuns(rm []byte, srcW int) []uint32 {
	h := 0
	if srcW > 0 {
		h = len(rm) / srcW
	}
	var counts []uint32
	var cur byte
	var run uint32
	for x := range srcW {
		for y := range h {
			if v := rm[y*srcW+x]; v != cur {
				counts, cur, run = append(counts, run), v, 0
			}
			run++
		}
	}
	return append(counts, run)
}

// extentRuns is the runs of rm (srcW columns) through the maps (and base)
// as the targets make them: decoded at its extent (MaskSource), sampled
// by MaskRunsExtent (through the tiles of base, when there is one).
func extentRuns(t *testing.T, rm []byte, srcW int, base []int32, bw int, ys, xs []int32) []uint32 {
	t.Helper()
	var s MaskSource
	if !s.Decode(colRuns(rm, srcW), len(rm)/max(srcW, 1), srcW) {
		t.Fatal("Decode refused a mask's own runs")
	}
	var tiles MaskTiles
	if len(base) > 0 {
		tiles.Build(base, bw, srcW, ys, xs)
	}
	runs, _ := MaskRunsExtent(nil, &s, srcW, base, bw, &tiles, ys, xs)
	return runs
}

// TestMaskRunsExtentMatchesCanvas: random instances (blobs anywhere on
// the source, a pixel, none, the whole of it) through random geometries
// (crops and pads, flips, nearest resizes, then maybe a rotation or an
// affine map, and more axis steps after it), sampled at their extent
// (MaskSource, MaskRunsExtent) and over the whole canvas (RowMajor,
// MaskRuns: the path before): the same runs, byte for byte; and the
// extent holds exactly the set pixels' bounding box.
func TestMaskRunsExtentMatchesCanvas(t *testing.T) {
	r := rand.New(rand.NewPCG(66, 3))
	for trial := range 400 {
		h, w := 1+r.IntN(60), 1+r.IntN(60)
		rm := make([]byte, h*w)
		switch kind := r.IntN(6); kind {
		case 0: // none
		case 1: // a pixel
			rm[r.IntN(h*w)] = 1
		case 2: // all of it
			for i := range rm {
				rm[i] = 1
			}
		default: // blobs, sparse inside their box
			for range 1 + r.IntN(3) {
				y0, x0 := r.IntN(h), r.IntN(w)
				y1, x1 := y0+r.IntN(h-y0), x0+r.IntN(w-x0)
				for y := y0; y <= y1; y++ {
					for x := x0; x <= x1; x++ {
						if r.IntN(4) != 0 {
							rm[y*w+x] = 1
						}
					}
				}
			}
		}
		var s MaskSource
		if !s.Decode(colRuns(rm, w), h, w) {
			t.Fatalf("trial %d: Decode refused the mask's runs", trial)
		}
		checkExtent(t, trial, &s, rm, h, w)
		ref, rows, _ := RowMajor(nil, nil, colRuns(rm, w), h, w)

		ys, xs := AxisIdentity(nil, h), AxisIdentity(nil, w)
		var base []int32
		bw := 0
		var tmp []int32
		axisSteps := func() {
			for gen := range r.IntN(4) {
				switch r.IntN(4) {
				case 0:
					top, left := r.IntN(len(ys)+10)-5, r.IntN(len(xs)+10)-5
					nh, nw := 1+r.IntN(len(ys)+8), 1+r.IntN(len(xs)+8)
					tmp = AxisCrop(tmp, ys, top, nh, FillCode(gen, 0))
					ys, tmp = tmp, ys
					tmp = AxisCrop(tmp, xs, left, nw, FillCode(gen, 9))
					xs, tmp = tmp, xs
				case 1:
					AxisFlip(xs)
				case 2:
					AxisFlip(ys)
				default:
					tmp = AxisResize(tmp, ys, 1+r.IntN(2*len(ys)+4))
					ys, tmp = tmp, ys
					tmp = AxisResize(tmp, xs, 1+r.IntN(2*len(xs)+4))
					xs, tmp = tmp, xs
				}
			}
		}
		axisSteps()
		if r.IntN(2) == 0 { // a turn: the maps made a canvas index, moved
			cw, ch := len(xs), len(ys)
			idx := CanvasIndex(nil, nil, 0, w, ys, xs)
			if r.IntN(2) == 0 {
				angle := []float64{90, 180, 270, 17, -33.3, 147}[r.IntN(6)]
				if (angle == 90 || angle == 270) && cw != ch {
					angle = 45
				}
				idx, _ = RotateIndex(idx, cw, ch, angle, [2]float64{}, false, FillCode(5, 0), nil)
			} else {
				a := AffineParams{Angle: r.Float64()*60 - 30, TX: r.Float64()*6 - 3, TY: r.Float64()*6 - 3, Scale: 0.5 + r.Float64(), ShearX: r.Float64()*20 - 10}
				idx, _ = AffineIndex(idx, cw, ch, &a, FillCode(5, 7), nil)
			}
			base, bw = idx, cw
			ys, xs = AxisIdentity(nil, ch), AxisIdentity(nil, cw)
			axisSteps()
		}
		want := MaskRuns(nil, ref, w, rows, base, bw, ys, xs)
		var tiles MaskTiles
		if len(base) > 0 {
			tiles.Build(base, bw, w, ys, xs)
		}
		if got, _ := MaskRunsExtent(nil, &s, w, base, bw, &tiles, ys, xs); !slices.Equal(got, want) {
			t.Fatalf("trial %d (%dx%d source, %dx%d output, base %v): the extent's runs %v, the canvas' %v", trial, w, h, len(xs), len(ys), len(base) > 0, got, want)
		}
		if got, _ := MaskRunsExtent(nil, &s, w, base, bw, nil, ys, xs); !slices.Equal(got, want) {
			t.Fatalf("trial %d (%dx%d source, %dx%d output, base %v), no tiles: the extent's runs %v, the canvas' %v", trial, w, h, len(xs), len(ys), len(base) > 0, got, want)
		}
	}
}

// checkExtent: s holds rm's set pixels, its box their bounding box.
func checkExtent(t *testing.T, trial int, s *MaskSource, rm []byte, h, w int) {
	t.Helper()
	x0, y0, x1, y1 := w, h, -1, -1
	for y := range h {
		for x := range w {
			if rm[y*w+x] != 0 {
				x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
			}
			if got := s.at(y, x); got != rm[y*w+x] {
				t.Fatalf("trial %d: pixel (%d, %d) is %d at the extent, %d in the mask", trial, y, x, got, rm[y*w+x])
			}
		}
	}
	if x1 < 0 {
		if s.W != 0 || s.H != 0 {
			t.Fatalf("trial %d: no pixel set, an extent of %dx%d", trial, s.W, s.H)
		}
		return
	}
	if s.X0 != x0 || s.Y0 != y0 || s.W != x1-x0+1 || s.H != y1-y0+1 {
		t.Fatalf("trial %d: extent (%d, %d) %dx%d, the set pixels' box (%d, %d) %dx%d", trial, s.X0, s.Y0, s.W, s.H, x0, y0, x1-x0+1, y1-y0+1)
	}
	for y := range s.H {
		if set := bytes.IndexByte(s.Pix[y*s.W:(y+1)*s.W], 1) >= 0; s.Rows[y] != set {
			t.Fatalf("trial %d: extent row %d has a pixel set: %v, Rows says %v", trial, y, set, s.Rows[y])
		}
	}
}

// TestMaskSourceRefusesBadRuns: runs that do not cover the mask, as
// RowMajor refuses them.
func TestMaskSourceRefusesBadRuns(t *testing.T) {
	var s MaskSource
	for _, c := range [][]uint32{{3, 2}, {1, 2}, {0, 5}, {5}} {
		if s.Decode(c, 2, 2) {
			t.Errorf("runs %v decoded into 2x2", c)
		}
	}
	if !s.Decode([]uint32{1, 2, 1}, 2, 2) || s.X0 != 0 || s.Y0 != 0 || s.W != 2 || s.H != 2 {
		t.Errorf("runs 1 2 1 of 2x2: extent (%d, %d) %dx%d, want (0, 0) 2x2", s.X0, s.Y0, s.W, s.H)
	}
}
