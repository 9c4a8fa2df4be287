package transform

import (
	"math"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// fallbackBox is torchvision's RandomResizedCrop fallback, written out from
// its source: a center crop of the whole image clamped to the ratio range.
func fallbackBox(W, H int, ratio [2]float64) (x, y, w, h int) {
	in := float64(W) / float64(H)
	switch {
	case in < ratio[0]:
		w, h = W, int(math.RoundToEven(float64(W)/ratio[0]))
	case in > ratio[1]:
		w, h = int(math.RoundToEven(float64(H)*ratio[1])), H
	default:
		w, h = W, H
	}
	return (W - w) / 2, (H - h) / 2, w, h
}

// TestRRCProperties checks RandomResizedCrop boxes over many keys and image
// shapes: always inside the image; and, unless the box is the fallback,
// with an area fraction within scale and an aspect within ratio, up to the
// rounding of w and h to integers.
func TestRRCProperties(t *testing.T) {
	for _, tc := range []struct {
		W, H         int
		scale, ratio [2]float64
		maxFallback  float64 // fraction of keys allowed to fall back
	}{
		{500, 375, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, 0.01},
		{375, 500, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, 0.01},
		{224, 224, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, 0.01},
		{1000, 10, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, 1},
		{10, 1000, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, 1},
		{64, 48, [2]float64{0.5, 0.9}, [2]float64{0.5, 2}, 0.01},
		{7, 5, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, 0.2},
		{1, 1, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, 1},
	} {
		fallbacks := 0
		const keys = 3000
		for i := range uint64(keys) {
			r := det.Key{Seed: 11, Index: i}.Stream(StreamCrop)
			x, y, w, h := RRCParams(&r, tc.W, tc.H, tc.scale, tc.ratio)
			if x < 0 || y < 0 || w <= 0 || h <= 0 || x+w > tc.W || y+h > tc.H {
				t.Fatalf("%dx%d key %d: box (%d,%d %dx%d) not inside the image", tc.W, tc.H, i, x, y, w, h)
			}
			fx, fy, fw, fh := fallbackBox(tc.W, tc.H, tc.ratio)
			if x == fx && y == fy && w == fw && h == fh {
				fallbacks++
				continue
			}
			area := float64(tc.W * tc.H)
			lo := (float64(w) - 0.5) * (float64(h) - 0.5) / area
			hi := (float64(w) + 0.5) * (float64(h) + 0.5) / area
			if hi < tc.scale[0] || lo > tc.scale[1] {
				t.Errorf("%dx%d key %d: box %dx%d covers %.3f..%.3f of the image, outside scale %v", tc.W, tc.H, i, w, h, lo, hi, tc.scale)
			}
			alo := (float64(w) - 0.5) / (float64(h) + 0.5)
			ahi := (float64(w) + 0.5) / (float64(h) - 0.5)
			if ahi < tc.ratio[0] || alo > tc.ratio[1] {
				t.Errorf("%dx%d key %d: box %dx%d has aspect %.3f..%.3f, outside ratio %v", tc.W, tc.H, i, w, h, alo, ahi, tc.ratio)
			}
		}
		if f := float64(fallbacks) / keys; f > tc.maxFallback {
			t.Errorf("%dx%d: %.1f%% of boxes fell back to the center crop, want at most %.1f%%", tc.W, tc.H, 100*f, 100*tc.maxFallback)
		}
	}
}

// TestRRCFallback pins the fallback for images no random try can fit, with
// the numbers torchvision gives.
func TestRRCFallback(t *testing.T) {
	def := [2]float64{0.08, 1}
	for _, tc := range []struct {
		name         string
		W, H         int
		scale, ratio [2]float64
		x, y, w, h   int
	}{
		// Too wide: full height, width round(10 * 4/3) = 13, centered.
		{"1000x10", 1000, 10, def, [2]float64{3.0 / 4, 4.0 / 3}, 493, 0, 13, 10},
		// Too tall: full width, height round(10 / (3/4)) = 13.
		{"10x1000", 10, 1000, def, [2]float64{3.0 / 4, 4.0 / 3}, 0, 493, 10, 13},
		// round(5 / 2) = round(2.5) = 2, Python's half to even.
		{"half to even", 5, 100, def, [2]float64{2, 3}, 0, 49, 5, 2},
		// Aspect within ratio but every try rounds to 0: the whole image.
		{"whole image", 3, 2, [2]float64{0.01, 0.01}, [2]float64{1.5, 1.5}, 0, 0, 3, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range uint64(20) {
				r := det.Key{Index: i}.Stream(StreamCrop)
				x, y, w, h := RRCParams(&r, tc.W, tc.H, tc.scale, tc.ratio)
				if x != tc.x || y != tc.y || w != tc.w || h != tc.h {
					t.Fatalf("key %d: box (%d,%d %dx%d), want (%d,%d %dx%d)", i, x, y, w, h, tc.x, tc.y, tc.w, tc.h)
				}
			}
		})
	}
}

func TestCenterOffset(t *testing.T) {
	for _, tc := range []struct{ size, crop, want int }{
		{257, 224, 16}, // 16.5 rounds to even: 16
		{259, 224, 18}, // 17.5 rounds to even: 18
		{256, 224, 16},
		{224, 224, 0},
		{225, 224, 0}, // 0.5 -> 0
		{227, 224, 2}, // 1.5 -> 2
		{341, 224, 58},
	} {
		if got := CenterOffset(tc.size, tc.crop); got != tc.want {
			t.Errorf("centerOffset(%d, %d) = %d, want %d", tc.size, tc.crop, got, tc.want)
		}
	}
}

func TestResizedSize(t *testing.T) {
	for _, tc := range []struct {
		W, H   int
		size   [2]int
		rw, rh int
	}{
		{500, 375, [2]int{256, 0}, 341, 256}, // 256*500/375 = 341.33, truncated
		{375, 500, [2]int{256, 0}, 256, 341},
		{256, 256, [2]int{256, 0}, 256, 256},
		{334, 285, [2]int{256, 0}, 300, 256},
		{1000, 10, [2]int{256, 0}, 25600, 256},
		{300, 299, [2]int{256, 0}, 256, 256}, // 256*300/299 = 256.86
		{500, 375, [2]int{100, 200}, 200, 100},
	} {
		if rw, rh := ResizedSize(tc.W, tc.H, tc.size); rw != tc.rw || rh != tc.rh {
			t.Errorf("resizedSize(%dx%d, %v) = %dx%d, want %dx%d", tc.W, tc.H, tc.size, rw, rh, tc.rw, tc.rh)
		}
	}
}

func TestPlanGeometry(t *testing.T) {
	eval, _ := ParseTransform("imagenet-eval", CHW)
	center := mustTransform(t, CHW, optab.Op{Kind: OpCenterCrop, Size: [2]int{224, 224}})
	for _, tc := range []struct {
		name                   string
		tr                     *Transform
		W, H                   int
		rw, rh, cx, cy, cw, ch int
	}{
		{"eval 500x375", eval, 500, 375, 341, 256, 58, 16, 224, 224}, // (341-224)/2 = 58.5 -> 58
		{"eval 375x500", eval, 375, 500, 256, 341, 16, 58, 224, 224},
		{"center 257x259", center, 257, 259, 0, 0, 16, 18, 224, 224}, // 16.5 -> 16, 17.5 -> 18
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.tr.geomPlan(tc.W, tc.H, det.Key{})
			if err != nil {
				t.Fatal(err)
			}
			if p.RW != tc.rw || p.RH != tc.rh || p.CX != tc.cx || p.CY != tc.cy || p.CW != tc.cw || p.CH != tc.ch {
				t.Errorf("plan resize %dx%d crop (%d,%d %dx%d), want resize %dx%d crop (%d,%d %dx%d)",
					p.RW, p.RH, p.CX, p.CY, p.CW, p.CH, tc.rw, tc.rh, tc.cx, tc.cy, tc.cw, tc.ch)
			}
			g := p.Region()
			if g.X0 < 0 || g.Y0 < 0 || g.X1 > tc.W || g.Y1 > tc.H ||
				g.BX < float64(g.X0) || g.BY < float64(g.Y0) || g.BX+g.BW > float64(g.X1) || g.BY+g.BH > float64(g.Y1) {
				t.Errorf("region %+v: box not within the clip rectangle inside %dx%d", g, tc.W, tc.H)
			}
		})
	}
	// An image narrower than a CenterCrop is padded, as torchvision pads
	// it: (224 - 100) // 2 columns of zeros on the left; the rows are
	// cropped from the middle (TestCenterCropPads checks the pixels).
	p, err := center.geomPlan(100, 300, det.Key{})
	if err != nil || !p.Padded || p.PadL != 62 || p.PadT != 0 {
		t.Errorf("100x300 under CenterCrop(224): %+v, %v; want padded 62 columns on the left", p, err)
	}
	if v := p.Visible(); v.CX != 0 || v.CW != 100 || v.OutW != 100 || v.CY != 38 || v.CH != 224 || v.OutH != 224 {
		t.Errorf("100x300 under CenterCrop(224): decodes %+v, want the 100x224 middle", v)
	}
}

// TestPlanGolden pins a few training plans: a change here changes what
// every training job sees for the same seed.
func TestPlanGolden(t *testing.T) {
	tr, _ := ParseTransform("imagenet-train", CHW)
	for _, tc := range []struct {
		k              det.Key
		cx, cy, cw, ch int
		flip           bool
	}{
		{det.Key{Seed: 42, Epoch: 3, Index: 1000}, 62, 17, 212, 186, false},
		{det.Key{Seed: 0, Epoch: 0, Index: 0}, 2, 58, 213, 264, false},
		{det.Key{Seed: 7, Epoch: 1, Index: 5}, 20, 4, 443, 349, true},
	} {
		p, err := tr.geomPlan(500, 375, tc.k)
		if err != nil {
			t.Fatal(err)
		}
		if p.CX != tc.cx || p.CY != tc.cy || p.CW != tc.cw || p.CH != tc.ch || p.Flip != tc.flip {
			t.Errorf("%+v: crop (%d,%d %dx%d) flip %v, want (%d,%d %dx%d) flip %v",
				tc.k, p.CX, p.CY, p.CW, p.CH, p.Flip, tc.cx, tc.cy, tc.cw, tc.ch, tc.flip)
		}
	}
}

func TestPlanDeterminism(t *testing.T) {
	tr := mustTransform(t, CHW,
		optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}},
		optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		optab.Op{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.4, Contrast: 0.4, Saturation: 0.4}})
	distinct := map[[4]int]bool{}
	for i := range uint64(200) {
		k := det.Key{Seed: 9, Epoch: 1, Index: i}
		a, _ := tr.geomPlan(320, 240, k)
		b, _ := tr.geomPlan(320, 240, k)
		if a != b {
			t.Fatalf("key %+v: two plans differ: %+v vs %+v", k, a, b)
		}
		distinct[[4]int{a.CX, a.CY, a.CW, a.CH}] = true
		sa, sb := tr.drawStepsFor(k, nil), tr.drawStepsFor(k, nil)
		if !slices.Equal(sa, sb) || len(sa) != 3 {
			t.Fatalf("key %+v: steps %v and %v: want the same 3 (brightness, contrast, saturation)", k, sa, sb)
		}
		seen := map[fn.Fn]bool{}
		for _, st := range sa {
			if f := st.F[0]; f < 0.6 || f > 1.4 {
				t.Errorf("jitter factor of %s = %v, outside [0.6, 1.4]", st.Fn, f)
			}
			seen[st.Fn] = true
		}
		if len(seen) != 3 {
			t.Errorf("jitter steps %v: want each adjustment once", sa)
		}
	}
	if len(distinct) < 190 {
		t.Errorf("200 keys gave only %d distinct crop boxes", len(distinct))
	}
	// The next epoch crops differently.
	a, _ := tr.geomPlan(320, 240, det.Key{Seed: 9, Epoch: 1, Index: 0})
	b, _ := tr.geomPlan(320, 240, det.Key{Seed: 9, Epoch: 2, Index: 0})
	if a == b {
		t.Errorf("epochs 1 and 2 made the same plan")
	}
}

func TestFlipRate(t *testing.T) {
	for _, p := range []float64{0, 0.25, 0.5, 1} {
		tr := mustTransform(t, CHW, optab.Op{Kind: OpCenterCrop, Size: [2]int{8, 8}}, optab.Op{Kind: optab.OpRandomHorizontalFlip, P: p})
		flips := 0
		const n = 4000
		for i := range uint64(n) {
			pl, _ := tr.geomPlan(16, 16, det.Key{Seed: 2, Index: i})
			if pl.Flip {
				flips++
			}
		}
		if rate := float64(flips) / n; math.Abs(rate-p) > 0.03 {
			t.Errorf("p=%v: flipped %.3f of samples", p, rate)
		}
	}
}
