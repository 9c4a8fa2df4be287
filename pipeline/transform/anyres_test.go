package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
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
		op := &optab.Op{Kind: OpAnyResResize, Args: &AnyResResizeArgs{GridPinpoints: onevisionPinpoints()}}
		if c[2] == 1 {
			op.Args = &AnyResResizeArgs{GridPinpoints: small}
		}
		bw, bh, rw, rh := AnyResFit(op, c[0], c[1])
		if bw != c[3] || bh != c[4] || rw != c[5] || rh != c[6] {
			t.Errorf("AnyResFit(%dx%d, set %d) = %dx%d, resized %dx%d; transformers' %dx%d, %dx%d", c[0], c[1], c[2], bw, bh, rw, rh, c[3], c[4], c[5], c[6])
		}
	}
	for _, sizes := range [][]int{nil, {384}, {0, 384}, {384, optab.MaxSide + 1}} {
		if err := checkAnyRes(&optab.Op{Kind: OpAnyResResize, Args: &AnyResResizeArgs{GridPinpoints: sizes}}, 0); err == nil {
			t.Errorf("grid_pinpoints %v accepted", sizes)
		}
	}
}

// TestAnyResPlan: the plan resizes into the resolution and pads to it,
// centred (left and top floored), zeros: a CenterCrop's padding.
func TestAnyResPlan(t *testing.T) {
	tf, err := NewTransform(CHW, optab.Op{Kind: OpAnyResResize, Args: &AnyResResizeArgs{GridPinpoints: []int{336, 672, 672, 336, 672, 672, 1008, 336, 336, 1008}, Resampling: optab.Resampling{Interp: InterpBicubic}}})
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tf.Size(); h != 1008 || w != 1008 || !tf.Varies() {
		t.Fatalf("bound %dx%d, varies %v; want the largest pinpoint's 1008x1008, varying", h, w, tf.Varies())
	}
	p, err := tf.geomPlan(640, 480, det.Key{})
	if err != nil {
		t.Fatal(err)
	}
	if p.OutW != 672 || p.OutH != 672 || p.RW != 672 || p.RH != 504 || !p.Padded || p.PadL != 0 || p.PadT != 84 {
		t.Fatalf("plan %+v: want 672x504 in 672x672, padded 84 at the top", p)
	}
	p, err = tf.geomPlan(20, 12, det.Key{})
	if err != nil || p.OutW != 672 || p.OutH != 336 || p.RW != 560 || p.PadL != 56 || p.PadT != 0 {
		t.Fatalf("plan %+v, %v: want 560x336 in 672x336, padded 56 at the left", p, err)
	}
}

// TestAnyResTokens: the vision tokens of an image under AnyRes as
// transformers 5.24's processors count them (the values printed by
// LlavaOnevisionProcessor._get_number_of_features with its checkpoints'
// 729 tokens a patch, anyres_max_9 and the full strategy; and
// LlavaNextProcessor's with llava-v1.6's 336-px patch of 14-px tokens, a
// CLS and the default strategy, which takes one off: a base of 576), over
// 25 sizes: COCO's, tiny, long, square, 8-20 MP, and past every pinpoint.
func TestAnyResTokens(t *testing.T) {
	sizes := [][2]int{{480, 640}, {640, 480}, {427, 640}, {612, 612}, {20, 12}, {180, 1400}, {1000, 240}, {1500, 2000}, {8, 1190},
		{98, 70}, {4032, 3024}, {3000, 4000}, {384, 384}, {385, 384}, {768, 1152}, {1, 1}, {2304, 2304}, {5000, 300},
		{300, 5000}, {333, 500}, {500, 333}, {1024, 768}, {720, 1280}, {1080, 1920}, {2160, 3840}} // (h, w)
	ov := optab.Op{Kind: OpAnyResResize, Args: &AnyResResizeArgs{GridPinpoints: onevisionPinpoints(), Patch: 384, TokensGrid: 27, BaseTokens: 729, MaxPatches: 9}}
	next := optab.Op{Kind: OpAnyResResize, Args: &AnyResResizeArgs{GridPinpoints: []int{336, 672, 672, 336, 672, 672, 1008, 336, 336, 1008}, Patch: 336, TokensGrid: 24, BaseTokens: 576}}
	for _, c := range []struct {
		name string
		op   optab.Op
		want []int64
	}{
		{"onevision", ov, []int64{2929, 2943, 2709, 3699, 1215, 2146, 2349, 7309, 838, 1269, 7332, 7309, 1485, 1513, 5157, 1485, 7371, 2349, 2196, 1836, 1849, 4744, 5967, 7269, 7317}},
		{"next", next, []int64{2340, 2352, 2144, 2928, 936, 1306, 1944, 2340, 576, 1032, 2352, 2340, 2928, 2928, 2144, 1176, 2928, 936, 868, 1464, 1476, 2352, 1948, 1948, 1948}},
	} {
		for i, s := range sizes {
			got, err := anyResTokens(&c.op, s[1], s[0])
			if err != nil || got != c.want[i] {
				t.Errorf("%s: %dx%d (h x w): %d tokens, %v; transformers counts %d", c.name, s[0], s[1], got, err, c.want[i])
			}
		}
	}
	if _, err := anyResTokens(&optab.Op{Kind: OpAnyResResize, Args: &AnyResResizeArgs{GridPinpoints: onevisionPinpoints()}}, 640, 480); err == nil {
		t.Error("an AnyResResize without the model's count has tokens")
	}
}

// PadToSquare: the canvas a square of the longer side, the image centred
// as pad_to_square centres it (the odd pixel right or bottom), none for a
// square image; refused anywhere but first and before one Resize((h, w)).
// VisionTokensIn: with the square view beside AnyRes's, an image of a
// record of several is 729 + 1 tokens (LlavaOnevisionProcessor's
// replace_image_token), one of a record of one AnyRes's count.
func TestPadToSquare(t *testing.T) {
	sq := optab.Op{Kind: OpPadToSquare, Args: &PadToSquareArgs{Filling: optab.Filling{Fill: [3]float64{127, 127, 127}}}}
	resize := optab.Op{Kind: OpResize, Size: [2]int{384, 384}, Args: &ResizeArgs{Resampling: optab.Resampling{Interp: InterpBicubic}}}
	tf, err := NewTransform(CHW, sq, resize)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		w, h   int
		zoomed bool
		pad    [4]int
	}{{640, 480, true, [4]int{0, 80, 0, 80}}, {5, 4, true, [4]int{0, 0, 0, 1}}, {3, 8, true, [4]int{2, 0, 3, 0}}, {7, 7, false, [4]int{}}} {
		p, err := tf.geomPlan(c.w, c.h, det.Key{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if p.Zoomed != c.zoomed || p.ZoomPad != c.pad || (c.zoomed && (p.ZoomW != max(c.w, c.h) || p.ZoomH != p.ZoomW)) ||
			p.OutW != 384 || p.OutH != 384 {
			t.Errorf("%dx%d: zoomed %v, pad %v, canvas %dx%d, out %dx%d; want %v, %v, a square of %d, 384x384",
				c.w, c.h, p.Zoomed, p.ZoomPad, p.ZoomW, p.ZoomH, p.OutW, p.OutH, c.zoomed, c.pad, max(c.w, c.h))
		}
	}
	// Its own rules (first, a uint8 fill) and its rule for the ops after
	// it (one Resize((h, w))), said beside it (placePadToSquare,
	// afterPadToSquare).
	for _, c := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{resize, sq}, "PadToSquare must be the first op"},
		{[]optab.Op{sq}, "PadToSquare alone gives a size that varies per image"},
		{[]optab.Op{sq, {Kind: OpCenterCrop, Size: [2]int{8, 8}}}, "PadToSquare then CenterCrop is not supported"},
		{[]optab.Op{sq, {Kind: OpResize, Size: [2]int{8, 0}}}, "PadToSquare then Resize is not supported"},
		{[]optab.Op{sq, resize, resize}, "PadToSquare then Resize is not supported"},
		{[]optab.Op{sq, sq, resize}, "PadToSquare then PadToSquare is not supported"},
		{[]optab.Op{{Kind: OpPadToSquare, Args: &PadToSquareArgs{Filling: optab.Filling{Fill: [3]float64{127.5, 0, 0}}}}, resize}, "PadToSquare fill [127.5 0 0]: want integers"},
	} {
		if _, err := NewTransform(CHW, c.ops...); err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(c.ops), err, c.want)
		}
	}
	ov := optab.Op{Kind: OpAnyResResize, Args: &AnyResResizeArgs{GridPinpoints: onevisionPinpoints(), Patch: 384, TokensGrid: 27, BaseTokens: 729, MaxPatches: 9, Resampling: optab.Resampling{Interp: InterpBicubic}}}
	groups := []ViewGroup{{Name: "canvas", Count: 1, Ops: []optab.Op{ov}}, {Name: "base", Count: 1, Ops: []optab.Op{resize}}}
	two, err := NewViews(CHW, groups...)
	if err != nil {
		t.Fatal(err)
	}
	three, err := NewViews(CHW, append(groups, ViewGroup{Name: "square", Count: 1, Ops: []optab.Op{sq, resize}})...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tf     *Transform
		images int
		want   int64
	}{{three, 1, 2929}, {three, 2, 730}, {three, 5, 730}, {two, 2, 2929}, {two, 1, 2929}} {
		if got, err := c.tf.VisionTokensIn(640, 480, c.images); err != nil || got != c.want {
			t.Errorf("%d views, an image of a record of %d: %d tokens, %v; want %d", len(c.tf.views), c.images, got, err, c.want)
		}
	}
}
