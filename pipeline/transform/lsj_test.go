package transform

import (
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// TestFixedSizeCropBoxes: FixedSizeCrop's boxes, as torchvision's: a
// crop subtracts the offset and clamps, and the boxes left without width
// or height go with their labels and crowd flags; without a crop (the
// image no larger than the size) none goes, even an empty one; the
// padding moves none and the canvas is the size.
func TestFixedSizeCropBoxes(t *testing.T) {
	boxes := func() *targets.Targets {
		return &targets.Targets{Instances: Instances{Boxes: [][4]float32{{10, 10, 50, 50}, {0, 0, 5, 90}, {60, 20, 60, 40}, {35, 70, 99, 99.5}},
			Labels: []int64{1, 2, 3, 4}, Crowd: []uint8{0, 1, 0, 1}}}
	}
	tg := boxes()
	w, h, err := MoveTargets(tg, 100, 100, []fn.Step{{Fn: fn.FixedSizeCrop, I: [6]int{20, 8, 60, 40, 60, 64}}})
	if err != nil || w != 64 || h != 60 {
		t.Fatalf("canvas %dx%d, %v", w, h, err)
	}
	want := [][4]float32{{2, 0, 40, 30}, {27, 50, 40, 60}}
	if !slices.Equal(tg.Boxes, want) || !slices.Equal(tg.Labels, []int64{1, 4}) || !slices.Equal(tg.Crowd, []uint8{0, 1}) {
		t.Errorf("cropped: %v %v %v, want %v, labels 1 4", tg.Boxes, tg.Labels, tg.Crowd, want)
	}
	tg = boxes()
	w, h, err = MoveTargets(tg, 100, 100, []fn.Step{{Fn: fn.FixedSizeCrop, I: [6]int{0, 0, 100, 100, 128, 120}}})
	if err != nil || w != 120 || h != 128 || !slices.Equal(tg.Boxes, boxes().Boxes) || len(tg.Labels) != 4 {
		t.Errorf("padded only: %dx%d %v %v", w, h, tg.Boxes, err)
	}
	if _, _, err := MoveBoxes(boxes().Boxes, 100, 100, []fn.Step{{Fn: fn.FixedSizeCrop, I: [6]int{0, 0, 50, 50, 50, 50}}}); err == nil {
		t.Error("MoveBoxes took fixed_size_crop, which drops boxes")
	}
}
