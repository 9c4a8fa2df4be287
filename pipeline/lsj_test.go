package pipeline

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// lsjOps is the large-scale-jitter geometry on a small target (so that
// both the crop and the padding happen), with a flip.
func lsjOps(target, crop int, fill [3]float64) []Op {
	return []Op{
		{Kind: OpScaleJitter, Size: [2]int{target, target}, Scale: [2]float64{0.1, 2}},
		{Kind: OpFixedSizeCrop, Size: [2]int{crop, crop}, Fill: fill},
		{Kind: OpRandomHorizontalFlip, P: 0.5},
	}
}

// TestScaleJitterDraws: ScaleJitter's sizes and FixedSizeCrop's offsets
// over many keys, as their make_params draw them
// (python/tests/test_lsj.py compares the distributions with
// torchvision's): one r for both sides, each int(side * r) with r the
// base ratio times a scale in scale_range, uniform (its mean); the crop's
// top and left one uniform times the room on each side; traced as resize
// then fixed_size_crop, which the trace parses back.
func TestScaleJitterDraws(t *testing.T) {
	const W, H, keys = 500, 375, 4000
	tr := mustTransform(t, CHW, lsjOps(400, 300, [3]float64{1, 2, 3})...)
	base := min(400.0/W, 400.0/H)
	var sum float64
	crops, pads, flips := 0, 0, 0
	for i := range uint64(keys) {
		p, err := tr.Sampler().Plan(W, H, Key{Seed: 3, Index: i})
		if err != nil {
			t.Fatal(err)
		}
		s := float64(p.RW) / W / base
		if s < 0.1-0.01 || s > 2+1e-9 || p.RH < int(float64(H)*base*0.1)-1 || p.RH > int(float64(H)*base*2) {
			t.Fatalf("key %d: resized to %dx%d: scale %v outside (0.1, 2)", i, p.RW, p.RH, s)
		}
		if rw, rh := float64(p.RW)/W, float64(p.RH)/H; rw-rh > 1.0/H || rh-rw > 1.0/W {
			t.Fatalf("key %d: %dx%d is not one ratio of %dx%d", i, p.RW, p.RH, W, H)
		}
		sum += s
		offW, offH := max(p.RW-300, 0), max(p.RH-300, 0)
		if p.CX < 0 || p.CX > offW || p.CY < 0 || p.CY > offH {
			t.Fatalf("key %d: crop at %d,%d of %dx%d", i, p.CX, p.CY, p.RW, p.RH)
		}
		if offW > 0 && offH > 0 { // one r: top/offH and left/offW agree
			if d := float64(p.CX)/float64(offW) - float64(p.CY)/float64(offH); d > 1.0/float64(offH)+1e-9 || d < -1.0/float64(offW)-1e-9 {
				t.Fatalf("key %d: left %d of %d, top %d of %d: not one r", i, p.CX, offW, p.CY, offH)
			}
		}
		if offW > 0 || offH > 0 {
			crops++
		}
		if p.Padded != (p.RW < 300 || p.RH < 300) || (p.Padded && (p.PadL != 0 || p.PadT != 0 || p.RCFill != [3]float64{1, 2, 3})) {
			t.Fatalf("key %d: %dx%d padded %v at %d,%d fill %v", i, p.RW, p.RH, p.Padded, p.PadL, p.PadT, p.RCFill)
		}
		if p.Padded {
			pads++
		}
		steps := tr.Sampler().GeometrySteps(&p, nil)
		want := []Step{{Fn: FnResize, I: [6]int{4: p.RH, 5: p.RW}, Antialias: true},
			{Fn: FnFixedSizeCrop, I: [6]int{p.CY, p.CX, min(p.RH, 300), min(p.RW, 300), 300, 300}, Fill: [3]float64{1, 2, 3}}}
		if p.Flip {
			flips++
			want = append(want, Step{Fn: FnHorizontalFlip})
		}
		if !slices.Equal(steps, want) {
			t.Fatalf("key %d: traced %+v, want %+v", i, steps, want)
		}
		back, err := ParseTrace(AppendTrace(nil, steps))
		if err != nil || !slices.Equal(back, steps) {
			t.Fatalf("key %d: trace parsed back as %+v (%v)", i, back, err)
		}
	}
	if m := sum / keys; m < 1.05-0.03 || m > 1.05+0.03 {
		t.Errorf("mean scale %.3f, want 1.05 (uniform in (0.1, 2))", m)
	}
	if crops < keys/4 || pads < keys/4 || flips < keys/3 || flips > 2*keys/3 {
		t.Errorf("%d of %d cropped, %d padded, %d flipped", crops, keys, pads, flips)
	}
}

// TestLSJDecode: a ScaleJitter and FixedSizeCrop sample (only the crop's
// window of the resized image resampled) is, on both decode paths and
// layouts, the Resize path's whole resized image (torch's kernels) cropped
// at the drawn place, padded on the right and bottom with the fill, and
// flipped when drawn; FixedSizeCrop alone is the decoded image cropped and
// padded. python/tests/test_lsj.py checks the bytes against torchvision.
func TestLSJDecode(t *testing.T) {
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	fill := [3]float64{123, 117, 104}
	for _, layout := range []Layout{CHW, HWC} {
		for _, c := range decoderKinds {
			for _, ops := range [][]Op{lsjOps(300, 240, fill), lsjOps(300, 240, fill)[1:]} {
				tr := mustTransform(t, layout, ops...)
				d := NewDecoder(c.opts...)
				kinds := map[string]int{}
				for i := range uint64(8) {
					got := make([]byte, tr.SampleBytes())
					if err := d.Decode(data, tr, Key{Seed: 2, Index: i}, got); err != nil {
						t.Fatal(err)
					}
					p := d.vd[0].plan
					rw, rh := p.SrcW, p.SrcH
					whole := make([]byte, 3*rw*rh)
					if tr.Sampler().JitterOp() != nil {
						rw, rh = p.RW, p.RH
						rs := mustTransform(t, HWC, Op{Kind: OpResize, Size: [2]int{rh, rw}})
						whole = make([]byte, rs.SampleBytes())
						err = d.Decode(data, rs, Key{}, whole)
					} else {
						err = d.Decode(data, mustTransform(t, HWC, Op{Kind: OpCenterCrop, Size: [2]int{rh, rw}}), Key{}, whole)
					}
					if err != nil {
						t.Fatal(err)
					}
					want := make([]byte, len(got))
					for y := range 240 {
						for x := range 240 {
							v := fill
							if x < min(rw, 240) && y < min(rh, 240) {
								o := 3 * ((p.CY+y)*rw + p.CX + x)
								v = [3]float64{float64(whole[o]), float64(whole[o+1]), float64(whole[o+2])}
							}
							ox := x
							if p.Flip {
								ox = 239 - x
							}
							for ch := range 3 {
								if layout == HWC {
									want[3*(y*240+ox)+ch] = byte(v[ch])
								} else {
									want[ch*240*240+y*240+ox] = byte(v[ch])
								}
							}
						}
					}
					if !bytes.Equal(got, want) {
						mx, mean := diffStats(got, want)
						t.Errorf("%s %s %s key %d (%dx%d at %d,%d, flip %v): not the resized image cropped and padded (max %v, mean %v)",
							c.name, layout, opsString(ops), i, rw, rh, p.CX, p.CY, p.Flip, mx, mean)
					}
					kinds[map[bool]string{true: "padded", false: "cropped"}[p.Padded]]++
				}
				if tr.Sampler().JitterOp() != nil && (kinds["padded"] == 0 || kinds["cropped"] == 0) {
					t.Errorf("%s: 8 keys drew %v", opsString(ops), kinds)
				}
				d.Close()
			}
		}
	}
}

// TestLSJRefused: ScaleJitter's and FixedSizeCrop's arguments and places
// that are not supported are refused when the transform is made.
func TestLSJRefused(t *testing.T) {
	ops := lsjOps(1024, 1024, [3]float64{})
	jit, crop, flip := ops[0], ops[1], ops[2]
	with := func(o Op, f func(*Op)) Op { f(&o); return o }
	for _, tc := range []struct {
		ops  []Op
		want string
	}{
		{[]Op{jit}, "ScaleJitter gives a size that varies"},
		{[]Op{jit, flip, crop}, "ScaleJitter gives a size that varies"},
		{[]Op{with(jit, func(o *Op) { o.Scale = [2]float64{0, 2} }), crop}, "scale_range [0 2]"},
		{[]Op{with(jit, func(o *Op) { o.Scale = [2]float64{2, 1} }), crop}, "scale_range"},
		{[]Op{with(jit, func(o *Op) { o.Scale = [2]float64{1, 17} }), crop}, "scale_range"},
		{[]Op{with(jit, func(o *Op) { o.Size = [2]int{0, 0} }), crop}, "size"},
		{[]Op{jit, with(crop, func(o *Op) { o.Fill = [3]float64{1.5, 0, 0} })}, "fill"},
		{[]Op{jit, crop, {Kind: OpResize, Size: [2]int{64, 64}}}, "op 2 (Resize) after FixedSizeCrop"},
		{[]Op{{Kind: OpResize, Size: [2]int{64, 64}}, jit, crop}, "ScaleJitter after other ops"},
		{[]Op{crop, flip, crop}, "FixedSizeCrop after other ops"},
	} {
		_, err := NewTransform(CHW, tc.ops...)
		if err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", opsString(tc.ops), err, tc.want)
		}
	}
	// A side resized to 0 pixels fails its sample, as torchvision's resize.
	tr := mustTransform(t, CHW, with(jit, func(o *Op) { o.Size = [2]int{8, 8}; o.Scale = [2]float64{0.01, 0.01} }), crop)
	if _, err := tr.Sampler().Plan(40, 30, Key{}); err == nil || !strings.Contains(err.Error(), "a side of 0 pixels") {
		t.Errorf("a side of 0: %v", err)
	}
}

// TestLSJEdges: ScaleJitter and FixedSizeCrop at the edges of their
// arguments, on images of a pixel, a line, a column: NewTransform refuses
// or accepts, a plan is made or fails with ErrUnsupported (a side resized
// to 0), never a panic; a made plan's trace parses back, moves boxes to
// the output's canvas, and small ones decode to their size.
func TestLSJEdges(t *testing.T) {
	sizes := [][2]int{{1, 1}, {1, 3000}, {3000, 1}, {3, 2}, {40, 30}}
	decoded := 0
	for _, target := range []int{1, 2, maxSide} {
		for _, sr := range [][2]float64{{1e-9, 1e-9}, {0.1, 2}, {maxJitter, maxJitter}} {
			for _, crop := range []int{1, 17, maxSide} {
				tr, err := NewTransform(CHW, Op{Kind: OpScaleJitter, Size: [2]int{target, target}, Scale: sr},
					Op{Kind: OpFixedSizeCrop, Size: [2]int{crop, crop}, Fill: [3]float64{255, 0, 7}}, Op{Kind: OpRandomHorizontalFlip, P: 0.5})
				if err != nil {
					t.Fatalf("target %d, scale_range %v, crop %d: %v", target, sr, crop, err)
				}
				for _, wh := range sizes {
					for k := range uint64(4) {
						p, err := tr.Sampler().Plan(wh[0], wh[1], Key{Seed: 9, Index: k})
						if err != nil {
							if !errors.Is(err, ErrUnsupported) {
								t.Fatalf("%dx%d: %v", wh[0], wh[1], err)
							}
							continue
						}
						steps := tr.Sampler().GeometrySteps(&p, nil)
						if back, err := ParseTrace(AppendTrace(nil, steps)); err != nil || !slices.Equal(back, steps) {
							t.Fatalf("%dx%d: trace %v parsed back as %v (%v)", wh[0], wh[1], steps, back, err)
						}
						tg := &Targets{Instances: Instances{Boxes: [][4]float32{{0, 0, float32(wh[0]), float32(wh[1])}}, Labels: []int64{1}, Crowd: []uint8{0}}}
						if w, h, err := MoveTargets(tg, wh[0], wh[1], steps); err != nil || w != crop || h != crop {
							t.Fatalf("%dx%d: boxes moved to a %dx%d canvas (%v), want %d", wh[0], wh[1], w, h, err, crop)
						}
						if crop <= 17 && wh[0] <= 40 && wh[1] <= 40 && k == 0 {
							out := make([]byte, tr.SampleBytes())
							d := NewDecoder()
							if err := d.Decode(encodePNG(testPicture(wh[0], wh[1])), tr, Key{Seed: 9}, out); err != nil {
								t.Fatalf("%dx%d, target %d, scale_range %v, crop %d: %v", wh[0], wh[1], target, sr, crop, err)
							}
							d.Close()
							decoded++
						}
					}
				}
			}
		}
	}
	if decoded == 0 {
		t.Error("no sample decoded")
	}
}

// BenchmarkLSJPreset: the preset "lsj" on a photo (459x425,
// testdata/photos/shell/000015.jpg) with three boxes, per sample: the
// resize's window of up to 1024x1024 resampled, the padding, the flip.
func BenchmarkLSJPreset(b *testing.B) { benchPreset(b, "lsj") }
