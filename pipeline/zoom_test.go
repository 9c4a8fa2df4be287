package pipeline

import (
	"bytes"
	"errors"
	"image"
	"os"
	"strings"
	"testing"
	"time"
)

// TestZoomOutDraws: RandomZoomOut's draws over many keys, as torchvision's
// make_params makes them (python/tests/test_parity_sampling.py compares the
// distributions): drawn at its p; the canvas int(side * r) a side for one
// r in side_range; the image inside it; traced as torchvision's pad, then
// the op after it.
func TestZoomOutDraws(t *testing.T) {
	const W, H, keys = 500, 375, 4000
	for _, tc := range []struct {
		next Op
		fn   Fn
	}{
		{Op{Kind: OpResize, Size: [2]int{64, 80}}, FnResize},
		{Op{Kind: OpRandomCrop, Size: [2]int{300, 300}}, FnCrop},
		{Op{Kind: OpCenterCrop, Size: [2]int{200, 220}}, FnCenterCrop},
	} {
		tr := mustTransform(t, CHW, Op{Kind: OpRandomZoomOut, P: 0.6, SideRange: [2]float64{1.5, 3}, Fill: [3]float64{1, 2, 3}}, tc.next)
		drawn := 0
		for i := range uint64(keys) {
			p, err := tr.Plan(W, H, Key{Seed: 5, Index: i})
			if err != nil {
				t.Fatal(err)
			}
			steps := tr.GeometrySteps(&p, nil)
			if !p.Zoomed {
				if len(steps) > 0 && steps[0].Fn == FnPad {
					t.Fatalf("key %d: not zoomed, traced %v", i, steps)
				}
				continue
			}
			drawn++
			pd := p.ZoomPad
			cw, ch := W+pd[0]+pd[2], H+pd[1]+pd[3]
			if min(pd[0], pd[1], pd[2], pd[3]) < 0 || cw != p.ZoomW || ch != p.ZoomH {
				t.Fatalf("key %d: padding %v, canvas %dx%d (plan %dx%d)", i, pd, cw, ch, p.ZoomW, p.ZoomH)
			}
			if cw < 750 || cw > 1500 || ch < 562 || ch > 1125 {
				t.Fatalf("key %d: canvas %dx%d outside side_range (1.5, 3) of %dx%d", i, cw, ch, W, H)
			}
			// One r for both sides: each truncated from side * r.
			if rw, rh := float64(cw)/W, float64(ch)/H; rw-rh > 1.0/H || rh-rw > 1.0/W {
				t.Fatalf("key %d: canvas %dx%d is not one ratio of %dx%d", i, cw, ch, W, H)
			}
			if steps[0].Fn != FnPad || steps[0].I != [6]int{pd[0], pd[1], pd[2], pd[3]} || steps[0].Fill != [3]float64{1, 2, 3} {
				t.Fatalf("key %d: trace %v, want pad %v first", i, steps, pd)
			}
			if steps[len(steps)-1].Fn != tc.fn && tc.fn != FnCrop {
				t.Fatalf("key %d: trace %v, want %s last", i, steps, tc.fn)
			}
		}
		if f := float64(drawn) / keys; f < 0.57 || f > 0.63 {
			t.Errorf("%s: zoomed %.3f of the samples, want p = 0.6", tc.next.Kind, f)
		}
	}
}

// TestZoomOutRefused: RandomZoomOut's arguments and places that are not
// supported are refused when the transform is made, saying why.
func TestZoomOutRefused(t *testing.T) {
	zoom := Op{Kind: OpRandomZoomOut, P: 0.5, SideRange: [2]float64{1, 4}}
	resize := Op{Kind: OpResize, Size: [2]int{64, 64}}
	with := func(f func(*Op)) Op { z := zoom; f(&z); return z }
	for _, tc := range []struct {
		ops  []Op
		want string
	}{
		{[]Op{zoom}, "RandomZoomOut alone gives a size that varies"},
		{[]Op{with(func(z *Op) { z.SideRange = [2]float64{0.5, 2} }), resize}, "side_range [0.5 2]: want 1 <= min <= max <= 16"},
		{[]Op{with(func(z *Op) { z.SideRange = [2]float64{3, 2} }), resize}, "side_range"},
		{[]Op{with(func(z *Op) { z.SideRange = [2]float64{1, 17} }), resize}, "side_range"},
		{[]Op{with(func(z *Op) { z.P = 1.5 }), resize}, "RandomZoomOut p=1.5"},
		{[]Op{with(func(z *Op) { z.Fill = [3]float64{256, 0, 0} }), resize}, "fill [256 0 0]: want integers 0..255"},
		{[]Op{zoom, {Kind: OpResize, Size: [2]int{64, 0}}}, "Resize(64) of the shorter side after RandomZoomOut"},
		{[]Op{zoom, {Kind: OpRandomResizedCrop, Size: [2]int{64, 64}, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{0.75, 4.0 / 3}}}, "RandomResizedCrop after RandomZoomOut"},
		{[]Op{zoom, {Kind: OpPad, Padding: [4]int{1, 1, 1, 1}}, {Kind: OpCenterCrop, Size: [2]int{8, 8}}}, "Pad after RandomZoomOut"},
		{[]Op{zoom, resize, {Kind: OpCenterCrop, Size: [2]int{8, 8}}}, "RandomZoomOut, Resize then CenterCrop"},
		{[]Op{zoom, {Kind: OpRandomCrop, Size: [2]int{8, 8}, Padding: [4]int{2, 2, 2, 2}, Fill: [3]float64{9, 9, 9}}}, "RandomZoomOut fill [0 0 0] then RandomCrop padding with fill [9 9 9]"},
		{[]Op{resize, zoom}, "RandomZoomOut must be the first op"},
		{[]Op{resize, {Kind: OpRandomHorizontalFlip, P: 0.5}, zoom}, "RandomZoomOut after other ops"},
	} {
		_, err := NewTransform(CHW, tc.ops...)
		if err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", opsString(tc.ops), err, tc.want)
		}
	}
}

// TestZoomOutDecode: a zoomed sample resized (the image decoded at its own
// size, padded onto the canvas and resized by torch's kernels) is, on both
// decode paths, torch's kernels on the canvas that Pad then CenterCrop
// make of the same image (test_parity_random_crop.py checks the bytes
// against torchvision's pad and resize); a canvas over the pixel budget
// fails its sample, saying so.
func TestZoomOutDecode(t *testing.T) {
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	fill := [3]float64{10, 200, 30}
	for _, layout := range []Layout{CHW, HWC} {
		for _, c := range decoderKinds {
			zoom := mustTransform(t, layout, Op{Kind: OpRandomZoomOut, P: 1, SideRange: [2]float64{1.5, 3}, Fill: fill},
				Op{Kind: OpResize, Size: [2]int{90, 120}, Interp: InterpBicubic}, Op{Kind: OpRandomHorizontalFlip, P: 0.5})
			d := NewDecoder(c.opts...)
			flips := 0
			for i := range uint64(6) {
				got := make([]byte, zoom.SampleBytes())
				if err := d.Decode(data, zoom, Key{Seed: 1, Index: i}, got); err != nil {
					t.Fatal(err)
				}
				p := d.vd[0].plan
				if !p.Canvas || p.ZoomW*p.ZoomH <= p.SrcW*p.SrcH {
					t.Fatalf("plan %+v: not a canvas", p)
				}
				// The canvas, by the Pad path: HWC, then resampled.
				canvas := mustTransform(t, HWC, Op{Kind: OpPad, Padding: p.ZoomPad, Fill: fill}, Op{Kind: OpCenterCrop, Size: [2]int{p.ZoomH, p.ZoomW}})
				pix := make([]byte, canvas.SampleBytes())
				if err := d.Decode(data, canvas, Key{}, pix); err != nil {
					t.Fatal(err)
				}
				img := image.NewNRGBA(image.Rect(0, 0, p.ZoomW, p.ZoomH))
				for j := range p.ZoomW * p.ZoomH {
					copy(img.Pix[4*j:], pix[3*j:3*j+3])
				}
				cp := p
				cp.Geom, cp.SrcW, cp.SrcH, cp.CX, cp.CY, cp.CW, cp.CH = cropResize, p.ZoomW, p.ZoomH, 0, 0, p.ZoomW, p.ZoomH
				want := make([]byte, len(got))
				resampleTorch(img, &cp, layout, want)
				if !bytes.Equal(got, want) {
					mx, mean := diffStats(got, want)
					t.Errorf("%s %s key %d: not the Pad path's canvas resized (max %v, mean %v)", c.name, layout, i, mx, mean)
				}
				if p.Flip {
					flips++
				}
			}
			if flips == 0 || flips == 6 {
				t.Errorf("%s %s: %d of 6 flipped", c.name, layout, flips)
			}
			d.Close()
		}
	}
	tr := mustTransform(t, CHW, Op{Kind: OpRandomZoomOut, P: 1, SideRange: [2]float64{4, 4}}, Op{Kind: OpResize, Size: [2]int{8, 8}})
	d := NewDecoder(WithPixelBudget(1 << 20))
	defer d.Close()
	err = d.Decode(data, tr, Key{}, make([]byte, tr.SampleBytes()))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "RandomZoomOut's canvas") {
		t.Errorf("a canvas over the pixel budget: %v", err)
	}
}

// BenchmarkZoomOutResize: a COCO-sized photo zoomed out (torchvision's
// default side_range, always) and resized to 640x640 (resizeCanvas: with
// cgo, the resampler on the rows of the canvas its taps read).
func BenchmarkZoomOutResize(b *testing.B) {
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []float64{0, 1} {
		b.Run(map[float64]string{0: "not-zoomed", 1: "zoomed"}[p], func(b *testing.B) {
			tr := mustTransform(b, CHW, Op{Kind: OpRandomZoomOut, P: p, SideRange: [2]float64{1, 4}}, Op{Kind: OpResize, Size: [2]int{640, 640}})
			d := NewDecoder()
			defer d.Close()
			out := make([]byte, tr.SampleBytes())
			for i := 0; b.Loop(); i++ {
				if err := d.Decode(data, tr, Key{Seed: 1, Index: uint64(i)}, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestZoomOutCost: a RandomZoomOut before a Resize is predicted to cost its
// canvas, r*r times the image at worst for the largest r, which names it
// (at r = 16, 256 nominal photos of canvas, canvasNs a pixel: about 14 ms).
func TestZoomOutCost(t *testing.T) {
	resize := Op{Kind: OpResize, Size: [2]int{64, 64}}
	plain := mustTransform(t, CHW, resize).Cost()
	small := mustTransform(t, CHW, Op{Kind: OpRandomZoomOut, P: 0.5, SideRange: [2]float64{1, 4}}, resize).Cost()
	large := mustTransform(t, CHW, Op{Kind: OpRandomZoomOut, P: 0.5, SideRange: [2]float64{1, 16}}, resize).Cost()
	if !(plain.Max < small.Max && small.Max < large.Max && small.Mean < small.Max) || !strings.Contains(large.Dominant, "RandomZoomOut") {
		t.Errorf("resize %v; zoom (1, 4) %v; zoom (1, 16) %v", plain, small, large)
	}
	if large.Max < time.Duration(canvasNs*256*nominalSourcePx) {
		t.Errorf("a canvas of up to 16x16 photos predicted at %v at worst", large.Max)
	}
}

// BenchmarkDetrPreset: the preset "detr" on a photo (459x425,
// testdata/photos/shell/000015.jpg) with three boxes, per sample (the
// canvas path for every sample: the photometric distortion on the image,
// the zoom's canvas, the IoU crop, the resize to 640x640).
func BenchmarkDetrPreset(b *testing.B) { benchPreset(b, "detr") }

// benchPreset decodes the photo of the detection presets' benchmarks with
// its three boxes through preset name, a sample a loop.
func benchPreset(b *testing.B, name string) {
	tr, err := ParseTransform(name, CHW)
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile("../testdata/photos/shell/000015.jpg")
	if err != nil {
		b.Fatal(err)
	}
	d := NewDecoder()
	defer d.Close()
	d.SetBoxSource(fixedBoxes{{46, 85, 69, 383}, {138, 106, 367, 298}, {321, 319, 459, 425}}, 0)
	out := make([]byte, tr.SampleBytes())
	for i := 0; b.Loop(); i++ {
		if err := d.Decode(data, tr, Key{Seed: 1, Index: uint64(i)}, out); err != nil {
			b.Fatal(err)
		}
	}
}
