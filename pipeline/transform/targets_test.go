package transform

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// TestMoveBoxes checks the box kernels one by one against their
// definitions in torchvision's functional ops (each in float32); the
// Python test (test_targets.py) checks whole samples against torchvision.
func TestMoveBoxes(t *testing.T) {
	src := [][4]float32{{10.5, 20.25, 110.75, 90}, {-3, 5, 30, 400}, {0, 0, 200, 100}}
	clamp := func(v float32, m int) float32 { return min(max(v, 0), float32(m)) }
	for _, tc := range []struct {
		name   string
		steps  []fn.Step
		w, h   int
		expect func(b [4]float32) [4]float32
	}{
		{"crop", []fn.Step{{Fn: fn.Crop, I: [6]int{15, 7, 60, 80}}}, 80, 60, func(b [4]float32) [4]float32 {
			return [4]float32{clamp(b[0]-7, 80), clamp(b[1]-15, 60), clamp(b[2]-7, 80), clamp(b[3]-15, 60)}
		}},
		{"crop past the image", []fn.Step{{Fn: fn.Crop, I: [6]int{-10, -20, 300, 300}}}, 300, 300, func(b [4]float32) [4]float32 {
			return [4]float32{clamp(b[0]+20, 300), clamp(b[1]+10, 300), clamp(b[2]+20, 300), clamp(b[3]+10, 300)}
		}},
		{"pad", []fn.Step{{Fn: fn.Pad, I: [6]int{3, 4, 5, 6}}}, 208, 110, func(b [4]float32) [4]float32 {
			return [4]float32{clamp(b[0]+3, 208), clamp(b[1]+4, 110), clamp(b[2]+3, 208), clamp(b[3]+4, 110)}
		}},
		{"resize", []fn.Step{{Fn: fn.Resize, I: [6]int{4: 33, 5: 70}}}, 70, 33, func(b [4]float32) [4]float32 {
			rx, ry := float32(70.0/200), float32(33.0/100)
			return [4]float32{b[0] * rx, b[1] * ry, b[2] * rx, b[3] * ry} // not clamped
		}},
		{"resize to the same size", []fn.Step{{Fn: fn.Resize, I: [6]int{4: 100, 5: 200}}}, 200, 100, func(b [4]float32) [4]float32 { return b }},
		{"hflip", []fn.Step{{Fn: fn.HorizontalFlip}}, 200, 100, func(b [4]float32) [4]float32 {
			return [4]float32{200 - b[2], b[1], 200 - b[0], b[3]}
		}},
		{"vflip", []fn.Step{{Fn: fn.VerticalFlip}}, 200, 100, func(b [4]float32) [4]float32 {
			return [4]float32{b[0], 100 - b[3], b[2], 100 - b[1]}
		}},
		{"center_crop", []fn.Step{{Fn: fn.CenterCrop, I: [6]int{4: 51, 5: 121}}}, 121, 51, func(b [4]float32) [4]float32 {
			// round((100-51)/2) = 24 (half to even), round((200-121)/2) = 40
			return [4]float32{clamp(b[0]-40, 121), clamp(b[1]-24, 51), clamp(b[2]-40, 121), clamp(b[3]-24, 51)}
		}},
		{"resized_crop", []fn.Step{{Fn: fn.ResizedCrop, I: [6]int{10, 20, 50, 100, 64, 64}}}, 64, 64, func(b [4]float32) [4]float32 {
			r := float32(64.0 / 100)
			q := float32(64.0 / 50)
			return [4]float32{clamp(b[0]-20, 100) * r, clamp(b[1]-10, 50) * q, clamp(b[2]-20, 100) * r, clamp(b[3]-10, 50) * q}
		}},
		{"photometric", []fn.Step{{Fn: fn.AdjustBrightness, F: [6]float64{1.3}}, {Fn: fn.Erase, I: [6]int{1, 2, 3, 4}}, {Fn: fn.Normalize}}, 200, 100,
			func(b [4]float32) [4]float32 { return b }},
	} {
		boxes := append([][4]float32(nil), src...)
		w, h, err := MoveBoxes(boxes, 200, 100, tc.steps)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if w != tc.w || h != tc.h {
			t.Errorf("%s: canvas %dx%d, want %dx%d", tc.name, w, h, tc.w, tc.h)
		}
		for k := range src {
			if want := tc.expect(src[k]); boxes[k] != want {
				t.Errorf("%s: box %v became %v, want %v", tc.name, src[k], boxes[k], want)
			}
		}
	}
	// A flip twice is the identity, on any canvas.
	boxes := append([][4]float32(nil), src...)
	if _, _, err := MoveBoxes(boxes, 200, 100, []fn.Step{{Fn: fn.HorizontalFlip}, {Fn: fn.VerticalFlip}, {Fn: fn.HorizontalFlip}, {Fn: fn.VerticalFlip}}); err != nil || boxes[0] != src[0] {
		t.Errorf("four flips: %v %v", boxes, err)
	}
	for _, f := range []fn.Fn{fn.MixBegin, fn.MixChain} {
		_, _, err := MoveBoxes(boxes, 200, 100, []fn.Step{{Fn: f}})
		if !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), f.String()) {
			t.Errorf("%s: %v, want it refused by name", f.String(), err)
		}
	}
}

// TestAppendTargets checks the wire layout docs/detection.md gives.
func TestAppendTargets(t *testing.T) {
	tg := targets.Targets{Instances: Instances{ImageID: -7}, W: 640, H: 480}
	tg.Add([4]float32{1, 2, 3, 4}, 5, false)
	tg.Add([4]float32{float32(math.Inf(1)), -0.5, 6, 7}, 1<<40, true)
	b := targets.AppendTargets(nil, &tg)
	le := binary.LittleEndian
	if int64(len(b)) != targets.TargetsSize(2, 0) || len(b) != 24+2*25 {
		t.Fatalf("%d bytes", len(b))
	}
	if le.Uint32(b) != 480 || le.Uint32(b[4:]) != 640 || int64(le.Uint64(b[8:])) != -7 || le.Uint32(b[16:]) != 2 || le.Uint32(b[20:]) != 0 {
		t.Errorf("header % x", b[:24])
	}
	for k, bx := range tg.Boxes {
		for c := range 4 {
			if v := math.Float32frombits(le.Uint32(b[24+16*k+4*c:])); v != bx[c] {
				t.Errorf("box %d %d: %v", k, c, v)
			}
		}
		if l := int64(le.Uint64(b[24+32+8*k:])); l != tg.Labels[k] {
			t.Errorf("label %d: %d", k, l)
		}
		if c := b[24+48+k]; c != tg.Crowd[k] {
			t.Errorf("crowd %d: %d", k, c)
		}
	}
}

// TestCheckTargets refuses the ops targets do not support yet, naming
// them, wherever they are; the rest pass.
func TestCheckTargets(t *testing.T) {
	rrc := optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}, Args: &RRCArgs{Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}}}
	ok, err := NewTransform(CHW, rrc, optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5}, optab.Op{Kind: optab.OpRandomVerticalFlip, P: 0.5},
		optab.Op{Kind: optab.OpRandomApply, P: 0.8, Ops: []optab.Op{optab.ColorJitterOp(0.4, 0.4, 0.4, 0.1)}}, optab.Op{Kind: optab.OpRandomGrayscale, P: 0.2},
		optab.Op{Kind: OpRandomRotation, Args: &RotationArgs{Degrees: [2]float64{-10, 10}}},
		optab.Op{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{{Kind: OpRandomAffine, Args: &AffineArgs{Degrees: [2]float64{-10, 10}, Scale: [2]float64{0.5, 2}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckTargets(ok); err != nil {
		t.Errorf("%v", err)
	}
	for _, tc := range []struct {
		op   optab.Op
		name string
	}{
		{optab.Op{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{{Kind: OpRandomRotation, Args: &RotationArgs{Degrees: [2]float64{-10, 10}}}, {Kind: optab.OpTrivialAugmentWide, Args: &optab.TrivialAugmentWideArgs{Bins: 31}}}},
			"RandomApply (op 1): TrivialAugmentWide (op 1)"},
		{optab.Op{Kind: optab.OpTrivialAugmentWide, Args: &optab.TrivialAugmentWideArgs{Bins: 31}}, "TrivialAugmentWide"},
	} {
		tr, err := NewTransform(CHW, rrc, tc.op)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = CheckTargets(tr)
		if !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), "targets do not support it yet") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// BenchmarkTargets is one sample's targets of 20 boxes through a
// RandomResizedCrop, a flip and a color op, encoded.
func BenchmarkTargets(b *testing.B) {
	src := make([][4]float32, 20)
	for k := range src {
		f := float32(k)
		src[k] = [4]float32{f * 10, f * 5, f*10 + 40, f*5 + 30}
	}
	steps := []fn.Step{{Fn: fn.ResizedCrop, I: [6]int{10, 20, 300, 280, 224, 224}}, {Fn: fn.HorizontalFlip}, {Fn: fn.AdjustBrightness}}
	tg := targets.Targets{Instances: Instances{Boxes: make([][4]float32, 20), Labels: make([]int64, 20), Crowd: make([]uint8, 20)}}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		copy(tg.Boxes, src)
		tg.W, tg.H, _ = MoveBoxes(tg.Boxes, 640, 480, steps)
		buf = targets.AppendTargets(buf[:0], &tg)
	}
}

// TestSanitize: MoveTargets drops, at a sanitize_bounding_boxes step and
// with their labels and crowd flags, the boxes torchvision's
// SanitizeBoundingBoxes drops (its _get_sanitize_bounding_boxes_mask):
// narrower or lower than min_size, smaller than min_area, a coordinate
// below 0 or past the canvas, NaN; and judges them where the step is, not
// after the steps that follow it.
func TestSanitize(t *testing.T) {
	nan := float32(math.NaN())
	tg := targets.Targets{Instances: Instances{
		Boxes: [][4]float32{
			{10, 10, 20, 20},      // kept
			{10, 10, 10.5, 30},    // 0.5 wide: dropped
			{10, 10, 30, 10.9},    // 0.9 high: dropped
			{0, 0, 1, 1},          // 1x1, area 1: kept at min_area 1
			{-1, 0, 5, 5},         // x1 < 0: dropped
			{0, 0, 200.5, 5},      // past the 200-wide canvas: dropped
			{nan, 0, 5, 5},        // NaN: dropped
			{30, 40, 31.25, 41.5}, // 1.25 x 1.5: kept
		},
		Labels: []int64{0, 1, 2, 3, 4, 5, 6, 7},
		Crowd:  []uint8{1, 0, 0, 1, 0, 0, 0, 1},
	}}
	w, h, err := MoveTargets(&tg, 200, 100, []fn.Step{{Fn: fn.SanitizeBoxes, F: [6]float64{1, 1}}})
	if err != nil || w != 200 || h != 100 {
		t.Fatalf("Move: %dx%d, %v", w, h, err)
	}
	if want := []int64{0, 3, 7}; !slices.Equal(tg.Labels, want) || !slices.Equal(tg.Crowd, []uint8{1, 1, 1}) || len(tg.Boxes) != 3 ||
		tg.Boxes[2] != [4]float32{30, 40, 31.25, 41.5} {
		t.Errorf("kept labels %v crowd %v boxes %v; want labels %v", tg.Labels, tg.Crowd, tg.Boxes, want)
	}
	// min_area 2 drops the 1x1 box and the 1.875 one; then a resize by
	// 1/4 after the sanitize leaves the survivor's box at 2.5 wide, which a
	// sanitize there would have dropped at min_size 3.
	tg2 := targets.Targets{Instances: Instances{Boxes: [][4]float32{{0, 0, 1, 1}, {30, 40, 31.25, 41.5}, {0, 0, 10, 40}}, Labels: []int64{1, 2, 3}, Crowd: []uint8{0, 0, 0}}}
	w, h, err = MoveTargets(&tg2, 200, 100, []fn.Step{{Fn: fn.SanitizeBoxes, F: [6]float64{1, 2}}, {Fn: fn.Resize, I: [6]int{4: 25, 5: 50}}})
	if err != nil || w != 50 || h != 25 || !slices.Equal(tg2.Labels, []int64{3}) || tg2.Boxes[0] != [4]float32{0, 0, 2.5, 10} {
		t.Errorf("sanitize then resize: %dx%d %v labels %v boxes %v", w, h, err, tg2.Labels, tg2.Boxes)
	}
	if _, _, err := MoveBoxes(tg.Boxes, 200, 100, []fn.Step{{Fn: fn.SanitizeBoxes, F: [6]float64{1, 1}}}); !errors.Is(err, errs.Unsupported) {
		t.Errorf("MoveBoxes of a sanitize step: %v, want ErrUnsupported (it cannot drop labels)", err)
	}
}

// TestOverlapOpsNamesTheFamily: an op that moves the boxes but not the
// polygons is refused for the overlap mask, and the error names every op
// of the YOLO family that moves targets, as the registry has them (the
// multi-image ops too), so it stays true as the family grows.
func TestOverlapOpsNamesTheFamily(t *testing.T) {
	err := checkOverlapOps([]optab.Op{{Kind: OpMosaic}, {Kind: optab.OpRandomHorizontalFlip}}, "")
	if !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "RandomHorizontalFlip (op 1) moves the boxes") {
		t.Fatalf("a RandomHorizontalFlip after the YOLO geometry: %v, want it refused", err)
	}
	for _, k := range []optab.OpKind{OpYOLOLoadImage, OpYOLOLetterBox, OpYOLORandomPerspective, OpMosaic, OpMixUp, OpCopyPaste, OpCutMix, OpYOLORandomFlip} {
		if !strings.Contains(err.Error(), string(k)) {
			t.Errorf("the error does not name %s: %v", k, err)
		}
	}
	if err := checkOverlapOps([]optab.Op{{Kind: OpMosaic}, {Kind: OpMixUp}, {Kind: OpYOLORandomFlip}}, ""); err != nil {
		t.Errorf("the YOLO family's ops alone: %v", err)
	}
}
