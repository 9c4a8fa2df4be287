package transform

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestSmartSize holds SmartSize to transformers' smart_resize (5.24.0,
// models/qwen2_vl/image_processing_qwen2_vl.py), its outputs for these
// inputs printed by it: each branch (rounded, floored past max_pixels,
// ceiled under min_pixels), Python's round half to even (70 and 98 are
// 2.5 and 3.5 times 28), and the aspect limit. python/tests/test_vlm_qwen.py
// compares every photo's size with transformers' own through a server.
func TestSmartSize(t *testing.T) {
	q2 := optab.Op{Kind: OpSmartResize, Args: &SmartResizeArgs{MinPixels: 3136, MaxPixels: 1003520, Factor: 28}}
	q3 := optab.Op{Kind: OpSmartResize, Args: &SmartResizeArgs{MinPixels: 65536, MaxPixels: 16777216, Factor: 32}}
	budget := optab.Op{Kind: OpSmartResize, Args: &SmartResizeArgs{MinPixels: 14400, MaxPixels: 22500, Factor: 28}}
	for _, c := range []struct {
		name         string
		op           *optab.Op
		w, h, ww, wh int
	}{
		{"q2 tiny", &q2, 20, 12, 84, 56},
		{"q2 panorama", &q2, 1400, 180, 1400, 168},
		{"q2 portrait", &q2, 240, 1000, 252, 1008},
		{"q2 large", &q2, 2000, 1500, 1148, 840},
		{"q2 halfway", &q2, 70, 98, 56, 112},
		{"q2 strip", &q2, 1190, 8, 700, 28},
		{"q2 photo", &q2, 478, 387, 476, 392},
		{"q3 tiny", &q3, 20, 12, 352, 224},
		{"q3 large", &q3, 2000, 1500, 1984, 1504},
		{"q3 strip", &q3, 1190, 8, 3136, 32},
		{"budget panorama", &budget, 1400, 180, 392, 28},
		{"budget portrait", &budget, 240, 1000, 56, 280},
	} {
		w, h, err := SmartSize(c.op, c.w, c.h)
		if err != nil || w != c.ww || h != c.wh {
			t.Errorf("%s: %dx%d gives %dx%d (%v); want %dx%d", c.name, c.w, c.h, w, h, err, c.ww, c.wh)
		}
	}
	if _, _, err := SmartSize(&q2, 1010, 5); !errors.Is(err, errs.Unsupported) {
		t.Errorf("aspect 202: %v; want refused", err)
	}
	if _, _, err := SmartSize(&q2, 1000, 5); err != nil {
		t.Errorf("aspect 200: %v; want taken", err)
	}
}

// TestSmartResizeTransform checks the geometry's grammar and bound:
// alone, its own bound a square of twice max_pixels, the job's max_size
// taking its place.
func TestSmartResizeTransform(t *testing.T) {
	op := optab.Op{Kind: OpSmartResize, Args: &SmartResizeArgs{MinPixels: 3136, MaxPixels: 1003520, Factor: 28, Resampling: optab.Resampling{Interp: InterpBicubic}}}
	tr, err := NewTransform(CHW, op)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tr.Size(); h != 1428 || w != 1428 || !tr.Varies() {
		t.Errorf("bound %dx%d, varies %v; want 1428x1428, varying", h, w, tr.Varies())
	}
	if tr, err = NewTransformBound(CHW, [2]int{200, 3000}, op); err != nil {
		t.Fatal(err)
	} else if h, w := tr.Size(); h != 200 || w != 3000 {
		t.Errorf("under max_size (200, 3000): bound %dx%d", h, w)
	}
	if _, err := NewTransform(CHW, op, optab.ColorJitterOp(0.4, 0.4, 0.2, 0.1), optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5}); err != nil {
		t.Errorf("SmartResize, ColorJitter, RandomHorizontalFlip: %v", err)
	}
	for _, ops := range [][]optab.Op{
		{op, {Kind: OpCenterCrop, Size: [2]int{224, 224}}},
		{{Kind: OpSmartResize, Args: &SmartResizeArgs{MinPixels: 10, MaxPixels: 5, Factor: 28}}},
		{{Kind: OpSmartResize, Args: &SmartResizeArgs{MinPixels: 10, MaxPixels: 50, Factor: 0}}},
	} {
		if _, err := NewTransform(CHW, ops...); !errors.Is(err, errs.Unsupported) {
			t.Errorf("%s: %v; want refused", optab.OpsString(ops), err)
		}
	}
}

// TestColorJitterBeforeSmart: ColorJitter (and RandomPhotometricDistort)
// before a vision-language resize run on the image at its own size: the
// canvas path, the resize's size the image's own; not before another
// geometry, nor in several views.
func TestColorJitterBeforeSmart(t *testing.T) {
	cj := optab.Op{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Ranges: true, Jitter: [4][2]float64{{0.6, 1.4}, {0.6, 1.4}, {0.6, 1.4}, {-0.1, 0.1}}}}
	sm := optab.Op{Kind: OpSmartResize, Args: &SmartResizeArgs{MinPixels: 3136, MaxPixels: 1003520, Factor: 28, Resampling: optab.Resampling{Interp: InterpBicubic}}}
	tf, err := NewTransform(CHW, cj, sm)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tf.geomPlan(640, 480, det.Key{Seed: 1})
	if err != nil || len(tf.pre) != 1 || !p.Canvas || p.KW != 640 || p.KH != 480 || p.OutW != 644 || p.OutH != 476 {
		t.Errorf("ColorJitter then SmartResize of 640x480: pre %d, canvas %v %dx%d, out %dx%d, %v; want 1, the image's own canvas, 644x476",
			len(tf.pre), p.Canvas, p.KW, p.KH, p.OutW, p.OutH, err)
	}
	if _, err := NewTransform(CHW, cj, optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Scale: [2]float64{0.5, 1}, Ratio: [2]float64{0.75, 1.33}}}); err == nil {
		t.Error("ColorJitter before a RandomResizedCrop accepted")
	}
	resize := optab.Op{Kind: OpResize, Size: [2]int{8, 8}}
	_, err = NewViews(CHW, ViewGroup{Count: 1, Ops: []optab.Op{cj, sm}}, ViewGroup{Count: 1, Ops: []optab.Op{resize}})
	if err == nil || !strings.Contains(err.Error(), "give every group the same ops before its resize") {
		t.Errorf("ColorJitter before SmartResize in one view of two: %v; want refused", err)
	}
}

// TestSharedPre: a vision-language processor's views (a vision-language
// resize among them) that start with the same ColorJitter draw it once:
// every view's pre steps are view 0's, also a PadToSquare's; views of
// one size each draw their own (a self-supervised recipe's); a ColorJitter
// before Resize((h, w)) runs on the image at its own size.
func TestSharedPre(t *testing.T) {
	cj := optab.Op{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Ranges: true, Jitter: [4][2]float64{{0.6, 1.4}, {0.6, 1.4}, {0.6, 1.4}, {-0.1, 0.1}}}}
	tiles := optab.Op{Kind: OpTileResize, Args: &TileResizeArgs{TileSize: 448, MinTiles: 1, MaxTiles: 12, TokensPerTile: 256, Resampling: optab.Resampling{Interp: InterpBicubic}}}
	resize := optab.Op{Kind: OpResize, Size: [2]int{448, 448}, Args: &ResizeArgs{Resampling: optab.Resampling{Interp: InterpBicubic}}}
	sq := optab.Op{Kind: OpPadToSquare, Args: &PadToSquareArgs{Filling: optab.Filling{Fill: [3]float64{127, 127, 127}}}}
	one, err := NewTransform(CHW, cj, resize)
	if err != nil || len(one.pre) != 1 {
		t.Fatalf("ColorJitter then Resize((448, 448)): %v; want one op before the geometry", err)
	}
	if p, err := one.geomPlan(640, 480, det.Key{Seed: 1}); err != nil || !p.Canvas || p.KW != 640 || p.KH != 480 {
		t.Errorf("ColorJitter then Resize((448, 448)) of 640x480: canvas %v %dx%d, %v; want the image's own canvas", p.Canvas, p.KW, p.KH, err)
	}
	tf, err := NewViews(CHW, ViewGroup{Name: "tiles", Count: 1, Ops: []optab.Op{cj, tiles}},
		ViewGroup{Name: "thumbnail", Count: 1, Ops: []optab.Op{cj, resize}},
		ViewGroup{Name: "square", Count: 1, Ops: []optab.Op{cj, sq, resize}})
	if err != nil {
		t.Fatal(err)
	}
	if !tf.SharedPre() {
		t.Fatal("a processor's views with the same ColorJitter: not SharedPre")
	}
	for seed := range uint64(20) {
		k := det.Key{Seed: seed, Index: seed * 7}
		want := tf.View(0).drawPre(k, nil)
		if len(want) == 0 {
			continue
		}
		for v := 1; v < tf.Views(); v++ {
			if got := tf.View(v).drawPre(k, nil); !reflect.DeepEqual(got, want) {
				t.Errorf("seed %d: view %d draws %+v with view 0's key, view 0 %+v", seed, v, got, want)
			}
		}
	}
	ssl, err := NewViews(CHW, ViewGroup{Count: 2, Ops: []optab.Op{photometricOp(), resize}})
	if err != nil || ssl.SharedPre() {
		t.Errorf("two views of Resize((448, 448)) after a RandomPhotometricDistort: shared %v, %v; want each its own draw", ssl != nil && ssl.SharedPre(), err)
	}
}

// TestRandomResizedCropBeforeSmart: a RandomResizedCrop whose size
// smart_resize keeps, then SmartResize, is the crop alone (torchvision's
// resize to the same size returns the image), its vision tokens the
// size's; to a size smart_resize changes, the crop is made, then resized
// on the canvas path (cropBefore): every image that size, its tokens.
func TestRandomResizedCropBeforeSmart(t *testing.T) {
	sm := optab.Op{Kind: OpSmartResize, Args: &SmartResizeArgs{MinPixels: 3136, MaxPixels: 1003520, Factor: 28, Resampling: optab.Resampling{Interp: InterpBicubic}}}
	rrc := func(h, w int) optab.Op {
		return optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{h, w}, Args: &RRCArgs{Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.75, 1.33}, Resampling: optab.Resampling{Interp: InterpBicubic}}}
	}
	tf, err := NewTransform(CHW, rrc(448, 336), sm)
	if err != nil {
		t.Fatal(err)
	}
	if tf.resize != nil || tf.outH != 448 || tf.outW != 336 || tf.Varies() {
		t.Errorf("RandomResizedCrop(448, 336) then SmartResize: out %dx%d, varies %v; want the crop's 336x448, fixed", tf.outW, tf.outH, tf.Varies())
	}
	if n, err := tf.VisionTokens(640, 480); err != nil || n != 16*12 {
		t.Errorf("vision tokens %d, %v; want 192 (448/28 x 336/28)", n, err)
	}
	two, err := NewTransform(CHW, rrc(256, 256), sm)
	if err != nil {
		t.Fatal(err)
	}
	if two.preCrop == nil || two.outH != 252 || two.outW != 252 {
		t.Errorf("RandomResizedCrop(256) then SmartResize: crop %v, out %dx%d; want the crop before, 252x252", two.preCrop != nil, two.outW, two.outH)
	}
	if n, err := two.VisionTokens(640, 480); err != nil || n != 9*9 {
		t.Errorf("vision tokens %d, %v; want 81 (252/28 squared)", n, err)
	}
	p, err := two.geomPlan(640, 480, det.Key{Seed: 2})
	v := p.Visible()
	if err != nil || !p.Canvas || !p.PreCrop || p.KW != 256 || p.KH != 256 || p.OutW != 252 || p.OutH != 252 ||
		v.OutW != 256 || v.OutH != 256 || v.CW != p.PreCW || v.Interp != InterpBicubic {
		t.Errorf("RandomResizedCrop(256) then SmartResize of 640x480: %+v, %v; want the crop resized to 256x256, its canvas resized to 252x252", p, err)
	}
	if st, ok := p.PreCropStep(); !ok || st.Fn != fn.ResizedCrop || st.I[4] != 256 {
		t.Errorf("the crop's step %+v, %v", st, ok)
	}
}
