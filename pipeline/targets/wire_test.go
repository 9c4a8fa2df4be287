package targets

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
)

// TestAppendOverlap: a sample's targets with the overlap mask are its
// instances in the mask's order (cv.PolygonsToMasksOverlap's), the
// overlap bit, then the W/4 x H/4 map after zeros to a multiple of 4:
// uint8 up to 255 instances, int32 past them (300 here, as ultralytics);
// an instance without its polygon, or a bound too small, is refused.
func TestAppendOverlap(t *testing.T) {
	for _, k := range []int{3, 300} {
		tg := &Targets{W: 66, H: 41}
		tg.P = 1
		for j := range k {
			x, y, s := float32(j%60), float32(j%37), float32(1+j%9)
			tg.Add([4]float32{x, y, x + s, y + s}, int64(j), j%2 == 0)
			tg.Points = append(tg.Points, [2]float32{x, y})
			tg.Vis = append(tg.Vis, uint8(j%3))
			tg.Segments = append(tg.Segments, [][2]float32{{x, y}, {x + s, y}, {x + s, y + s}, {x, y + s}})
		}
		want, order := cv.PolygonsToMasksOverlap(tg.Segments, tg.W, tg.H, OverlapRatio)
		boxes := slices.Clone(tg.Boxes)
		tg.WantOverlap = true
		b, err := tg.AppendOverlap(nil, OverlapRatio, true, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		le := binary.LittleEndian
		at := int((TargetsSize(k, 1) + 3) / 4 * 4)
		if le.Uint32(b[20:])&targetsOverlap == 0 || int64(len(b)) != int64(at)+OverlapMaskSize(tg.W, tg.H, k) {
			t.Fatalf("k %d: word %#x, %d bytes", k, le.Uint32(b[20:]), len(b))
		}
		for n, o := range order {
			if tg.Boxes[n] != boxes[o] || tg.Labels[n] != int64(o) || tg.Points[n] != [2]float32{boxes[o][0], boxes[o][1]} {
				t.Fatalf("k %d: instance %d is not the mask's %d-th", k, n, o)
			}
		}
		for i, v := range want {
			var got int32
			if k > 255 {
				got = int32(le.Uint32(b[at+4*i:]))
			} else {
				got = int32(b[at+i])
			}
			if got != v {
				t.Fatalf("k %d: map value %d is %d, want %d", k, i, got, v)
			}
		}
		if _, err := tg.AppendOverlap(nil, OverlapRatio, true, int64(len(b))-1); !errors.As(err, new(*dataset.TargetsTooLarge)) {
			t.Errorf("k %d: over the bound: %v", k, err)
		}
	}
	tg := &Targets{W: 8, H: 8, WantOverlap: true}
	tg.Add([4]float32{1, 1, 2, 2}, 0, false)
	if _, err := tg.AppendOverlap(nil, OverlapRatio, true, 1<<20); err == nil || !strings.Contains(err.Error(), "1 instances with 0 polygons") {
		t.Errorf("an instance without its polygon: %v", err)
	}
}

// TestAppendInstanceMasks: with mask_overlap=False the instances keep
// their order and, after zeros to a multiple of 4, cv.AppendPolygonMasks'
// bits follow (MaskSize's bytes), at a ratio other than 4 too; a ratio
// past the canvas' smaller side is refused as ultralytics' Format
// refuses it.
func TestAppendInstanceMasks(t *testing.T) {
	for _, r := range []int{1, 3, 4} {
		tg := &Targets{W: 66, H: 41}
		for j := range 5 {
			x, y, s := float32(j*9), float32(j*5), float32(4+j*3)
			tg.Add([4]float32{x, y, x + s, y + s}, int64(j), false)
			tg.Segments = append(tg.Segments, [][2]float32{{x, y}, {x + s, y}, {x + s, y + s}, {x, y + s}})
		}
		boxes := slices.Clone(tg.Boxes)
		tg.WantOverlap = true
		b, err := tg.AppendOverlap(nil, r, false, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		at := int((TargetsSize(5, 0) + 3) / 4 * 4)
		if !slices.Equal(tg.Boxes, boxes) || int64(len(b)) != int64(at)+MaskSize(tg.W, tg.H, 5, r, false) {
			t.Fatalf("ratio %d: %d bytes, boxes reordered %v", r, len(b), !slices.Equal(tg.Boxes, boxes))
		}
		if want := cv.AppendPolygonMasks(nil, tg.Segments, tg.W, tg.H, r); !slices.Equal(b[at:], want) {
			t.Fatalf("ratio %d: the masks are not cv.AppendPolygonMasks'", r)
		}
	}
	tg := &Targets{W: 8, H: 6, WantOverlap: true}
	tg.Add([4]float32{1, 1, 2, 2}, 0, false)
	tg.Segments = append(tg.Segments, [][2]float32{{1, 1}, {2, 2}})
	for _, ov := range []bool{true, false} {
		if _, err := tg.AppendOverlap(nil, 7, ov, 1<<20); err == nil || !strings.Contains(err.Error(), "mask_ratio=7 downsamples the 8x6 canvas to zero size; use mask_ratio <= 6") {
			t.Errorf("overlap %v: a ratio past the canvas: %v", ov, err)
		}
	}
}
