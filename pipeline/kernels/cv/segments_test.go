package cv

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConcatResamplesSegments: instances whose segments differ in length
// are concatenated with the shorter resampled to the longer (ultralytics'
// Instances.concatenate), and MixedSegments tells a list of polygons and
// box lines alone from one of polygons and empty images.
func TestConcatResamplesSegments(t *testing.T) {
	seg := func(k int, x float32) [][2]float32 {
		s := make([][2]float32, k)
		for i := range s {
			s[i] = [2]float32{x + float32(i), x}
		}
		return s
	}
	a := Instances{Boxes: [][4]float32{{0, 0, 1, 1}}, Cls: []int64{0}, Segments: [][][2]float32{seg(1000, 0)}}
	b := Instances{Boxes: [][4]float32{{0, 0, 1, 1}, {1, 1, 2, 2}}, Cls: []int64{1, 2}, Segments: [][][2]float32{seg(1202, 5), seg(1202, 7)}}
	empty := Instances{Boxes: [][4]float32{}, Cls: []int64{}}
	out := Concat(a, empty, b)
	if err := out.Check(); err != nil || out.Len() != 3 || len(out.Segments[0]) != 1202 {
		t.Fatalf("Concat: %v, %d instances, first segment of %d points", err, out.Len(), len(out.Segments[0]))
	}
	if out.Segments[0][0] != a.Segments[0][0] || &out.Segments[1][0] != &b.Segments[0][0] {
		t.Error("Concat: the first point moved, or the longer segments were copied")
	}
	boxes := Instances{Boxes: [][4]float32{{0, 0, 1, 1}}, Cls: []int64{3}}
	if MixedSegments(a, empty, b) || !MixedSegments(a, boxes) || MixedSegments(boxes, empty) {
		t.Error("MixedSegments")
	}
}

// TestOverlapRegionsIsTheWholeImages: the overlap mask made instance by
// instance within each polygon's extent (overlapRegions) is the one made
// on the whole image (polygonsToMasksOverlapFull), mask and order, for
// polygons that cross the image's sides, lie wholly off it, are a point
// or a line, at ratios 3, 4 and 5 on sizes not their multiples; and so
// are the instances' own masks (Format(mask_overlap=False)'s, as bits),
// and both at ratio 1 (fillRegions).
func TestOverlapRegionsIsTheWholeImages(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for c := range 300 {
		w, h, r := 8+rng.IntN(150), 8+rng.IntN(150), 3+rng.IntN(3)
		segs := make([][][2]float32, rng.IntN(7))
		for k := range segs {
			n := 1 + rng.IntN(40)
			if k == 1 && c%5 == 0 {
				n = 0
			}
			s := make([][2]float32, n)
			ox, oy := float32(rng.Float64()*1.6-0.3), float32(rng.Float64()*1.6-0.3)
			for j := range s {
				s[j] = [2]float32{(ox + float32(rng.Float64()*0.5-0.25)) * float32(w), (oy + float32(rng.Float64()*0.5-0.25)) * float32(h)}
				if c%7 == 0 {
					s[j][1] = s[0][1] // a horizontal line
				}
			}
			segs[k] = s
		}
		if w/r == 0 || h/r == 0 {
			continue
		}
		regs, areas := overlapRegions(segs, w, h, w/r, h/r)
		gm, gord := overlapOf(regs, areas, w/r, h/r)
		wm, word := polygonsToMasksOverlapFull(segs, w, h, r)
		if !slices.Equal(gord, word) || !slices.Equal(gm, wm) {
			t.Fatalf("case %d (%dx%d/%d, %d polygons): order %v, want %v; masks equal %v", c, w, h, r, len(segs), gord, word, slices.Equal(gm, wm))
		}
		// Format(mask_overlap=False)'s masks, as bits: each instance's
		// region the whole image's.
		gb := appendMaskBits(nil, regs, w/r, h/r)
		full, _ := instanceMasksFull(segs, w, h, r)
		wb := appendMaskBits(nil, full, w/r, h/r)
		if !bytes.Equal(gb, wb) || !bytes.Equal(AppendPolygonMasks(nil, segs, w, h, r), wb) {
			t.Fatalf("case %d (%dx%d/%d, %d polygons): the instances' masks differ from the whole image's", c, w, h, r, len(segs))
		}
		// At ratio 1, each instance kept to its polygon's extent
		// (fillRegions) against the whole image's.
		fr, fa := fillRegions(segs, w, h)
		full1, fa1 := instanceMasksFull(segs, w, h, 1)
		gm1, go1 := overlapOf(fr, fa, w, h)
		wm1, wo1 := overlapOf(full1, fa1, w, h)
		if !slices.Equal(fa, fa1) || !slices.Equal(go1, wo1) || !slices.Equal(gm1, wm1) ||
			!bytes.Equal(appendMaskBits(nil, fr, w, h), appendMaskBits(nil, full1, w, h)) {
			t.Fatalf("case %d (%dx%d/1, %d polygons): the regions differ from the whole image's", c, w, h, len(segs))
		}
	}
}
