package transform

import (
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"

	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// onevisionPinpoints is LlavaOnevisionImageProcessor's image_grid_pinpoints
// (transformers 5.24): 384 to 2304 a side, by 384, flat (height, width).
func onevisionPinpoints() []int {
	var out []int
	for h := 384; h <= 2304; h += 384 {
		for w := 384; w <= 2304; w += 384 {
			out = append(out, h, w)
		}
	}
	return out
}

// TestAnyResFit: select_best_resolution and get_patch_output_size as
// transformers 5.24 computes them (the values printed by it), over
// LLaVA-OneVision's pinpoints and a small set of five, for COCO-sized,
// tiny, long, square and large images: the resolution and the resized
// image's size in it.
func TestAnyResFit(t *testing.T) {
	small := []int{336, 672, 672, 336, 672, 672, 1008, 336, 336, 1008}
	for _, c := range [][7]int{ // w, h, small set, want resolution w, h, resized w, h
		{640, 480, 0, 768, 768, 768, 576},
		{640, 480, 1, 672, 672, 672, 504},
		{480, 640, 0, 768, 768, 576, 768},
		{480, 640, 1, 672, 672, 504, 672},
		{20, 12, 0, 384, 384, 384, 231},
		{20, 12, 1, 672, 336, 560, 336},
		{240, 1000, 0, 384, 1152, 277, 1152},
		{240, 1000, 1, 336, 1008, 242, 1008},
		{1400, 180, 0, 1536, 384, 1536, 198},
		{1400, 180, 1, 1008, 336, 1008, 130},
		{1, 1, 0, 384, 384, 384, 384},
		{1, 1, 1, 672, 336, 336, 336},
		{3000, 4000, 0, 1920, 2304, 1728, 2304},
		{3000, 4000, 1, 672, 672, 505, 672},
		{1190, 8, 0, 1536, 384, 1536, 11},
		{1190, 8, 1, 1008, 336, 1008, 7},
		{384, 384, 0, 384, 384, 384, 384},
		{384, 384, 1, 672, 672, 672, 672},
		{1000, 1000, 0, 1152, 1152, 1152, 1152},
		{2000, 1500, 0, 2304, 1536, 2048, 1536},
		{2000, 1500, 1, 672, 672, 672, 505},
		{777, 333, 0, 1152, 384, 896, 384},
		{777, 333, 1, 1008, 336, 784, 336},
		{5000, 100, 0, 2304, 384, 2304, 47},
		{5000, 100, 1, 1008, 336, 1008, 21},
	} {
		op := &optab.Op{Kind: OpAnyResResize, Sizes: onevisionPinpoints()}
		if c[2] == 1 {
			op.Sizes = small
		}
		bw, bh, rw, rh := AnyResFit(op, c[0], c[1])
		if bw != c[3] || bh != c[4] || rw != c[5] || rh != c[6] {
			t.Errorf("AnyResFit(%dx%d, set %d) = %dx%d, resized %dx%d; transformers' %dx%d, %dx%d", c[0], c[1], c[2], bw, bh, rw, rh, c[3], c[4], c[5], c[6])
		}
	}
	for _, sizes := range [][]int{nil, {384}, {0, 384}, {384, optab.MaxSide + 1}} {
		if err := checkAnyRes(&optab.Op{Kind: OpAnyResResize, Sizes: sizes}, 0); err == nil {
			t.Errorf("grid_pinpoints %v accepted", sizes)
		}
	}
}

// TestAnyResPlan: the plan resizes into the resolution and pads to it,
// centred (left and top floored), zeros: a CenterCrop's padding.
func TestAnyResPlan(t *testing.T) {
	tf, err := NewTransform(CHW, optab.Op{Kind: OpAnyResResize, Sizes: []int{336, 672, 672, 336, 672, 672, 1008, 336, 336, 1008}, Interp: InterpBicubic})
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tf.Size(); h != 1008 || w != 1008 || !tf.Varies() {
		t.Fatalf("bound %dx%d, varies %v; want the largest pinpoint's 1008x1008, varying", h, w, tf.Varies())
	}
	p, err := tf.sampler().Plan(640, 480, det.Key{})
	if err != nil {
		t.Fatal(err)
	}
	if p.OutW != 672 || p.OutH != 672 || p.RW != 672 || p.RH != 504 || !p.Padded || p.PadL != 0 || p.PadT != 84 {
		t.Fatalf("plan %+v: want 672x504 in 672x672, padded 84 at the top", p)
	}
	p, err = tf.sampler().Plan(20, 12, det.Key{})
	if err != nil || p.OutW != 672 || p.OutH != 336 || p.RW != 560 || p.PadL != 56 || p.PadT != 0 {
		t.Fatalf("plan %+v, %v: want 560x336 in 672x336, padded 56 at the left", p, err)
	}
}
