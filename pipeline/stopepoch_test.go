package pipeline

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// traceNames parses a one-view trace into its steps' names, and the steps
// themselves as JSON.
func traceNames(t *testing.T, trace []byte) ([]string, []string) {
	t.Helper()
	var steps []json.RawMessage
	if err := json.Unmarshal(trace, &steps); err != nil {
		t.Fatalf("trace %s: %v", trace, err)
	}
	var names, raws []string
	for _, s := range steps {
		var pair []json.RawMessage
		if err := json.Unmarshal(s, &pair); err != nil || len(pair) == 0 {
			t.Fatalf("step %s: %v", s, err)
		}
		var name string
		if err := json.Unmarshal(pair[0], &name); err != nil {
			t.Fatal(err)
		}
		names, raws = append(names, name), append(raws, string(s))
	}
	return names, raws
}

// TestStopEpochDetr: the detr preset with a stop_epoch of 5 draws exactly
// the preset's traces in epoch 4 (some with RandomPhotometricDistort's,
// RandomZoomOut's and RandomIoUCrop's steps), and in epoch 5 none of
// those: its SanitizeBoundingBoxes, the flip where the preset at the same
// key draws it (the flip's stream is its own: switching the others off
// shifts nothing), the Resize and the last SanitizeBoundingBoxes.
func TestStopEpochDetr(t *testing.T) {
	full, err := ParseTransform("detr", CHW)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := full.WithStopEpoch(5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, kinds, ok := stop.StopEpoch(); !ok || e != 5 || !slices.Equal(kinds, DETRStopOps) {
		t.Fatalf("StopEpoch() = %d, %v, %v", e, kinds, ok)
	}
	if !strings.Contains(stop.String(), "from epoch 5 without RandomPhotometricDistort, RandomZoomOut, RandomIoUCrop") {
		t.Errorf("String() = %q", stop.String())
	}
	boxes := [][4]float32{{40, 60, 200, 300}, {300, 100, 620, 460}, {10, 10, 30, 40}}
	off := map[string]bool{"pad": true, "iou_crop": true, "adjust_brightness": true, "adjust_contrast": true,
		"adjust_saturation": true, "adjust_hue": true, "permute_channels": true}
	seen := map[string]int{}
	flips := 0
	for i := range uint64(64) {
		before := Key{Seed: 7, Epoch: 4, Index: i}
		a, err := stop.TraceBoxes(640, 480, before, boxes)
		if err != nil {
			t.Fatal(err)
		}
		b, err := full.TraceBoxes(640, 480, before, boxes)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("epoch 4, sample %d: %s, the preset's %s", i, a, b)
		}
		names, _ := traceNames(t, a)
		for _, n := range names {
			if off[n] {
				seen[n]++
			}
		}
		after := Key{Seed: 7, Epoch: 5, Index: i}
		a, err = stop.TraceBoxes(640, 480, after, boxes)
		if err != nil {
			t.Fatal(err)
		}
		b, err = full.TraceBoxes(640, 480, after, boxes)
		if err != nil {
			t.Fatal(err)
		}
		names, raws := traceNames(t, a)
		theirs, _ := traceNames(t, b)
		flip := slices.Contains(theirs, "horizontal_flip")
		want := []string{"sanitize_bounding_boxes", "resize", "sanitize_bounding_boxes"}
		if flip {
			want = slices.Insert(want, 1, "horizontal_flip")
			flips++
		}
		if !slices.Equal(names, want) {
			t.Fatalf("epoch 5, sample %d: %s, want the steps %v (the preset's trace at that key: %s)", i, a, want, b)
		}
		if raws[len(raws)-2] != `["resize",{"size":[640,640],"interpolation":"bilinear","antialias":true}]` {
			t.Errorf("epoch 5, sample %d: resize %s", i, raws[len(raws)-2])
		}
	}
	for n := range off {
		if n != "permute_channels" && seen[n] == 0 { // a channel permutation is a 1-in-2 of a 1-in-2 draw
			t.Errorf("epoch 4: no sample drew %s (%v)", n, seen)
		}
	}
	if flips == 0 || flips == 64 {
		t.Errorf("epoch 5: %d of 64 flipped", flips)
	}
	// The cost model is the whole recipe's, an upper bound of the epochs
	// after the stop.
	if c, ca := stop.Cost(), stop.Sampler(sk).AtEpoch(5).Cost(); c != full.Cost() || ca.Max > c.Max || ca.Mean > c.Mean {
		t.Errorf("cost %v, after the stop %v, the preset's %v", c, ca, full.Cost())
	}
	if stop.MaxTraceBytes() < stop.Sampler(sk).AtEpoch(5).MaxTraceBytes() {
		t.Error("the trace bound is not the whole recipe's")
	}
	if stop.Sampler(sk).AtEpoch(4) != stop || stop.Sampler(sk).AtEpoch(5) == stop || stop.Sampler(sk).AtEpoch(1<<63) != stop.Sampler(sk).AtEpoch(5) {
		t.Error("AtEpoch: the recipe before epoch 5, the variant from it on")
	}
}

// TestStopEpochPixels: from the stop on, a detr sample that drew no flip
// is the photo resized to 640x640, pixels and targets, on every decode
// path and both decode modes (a flipped one is checked against
// torchvision by python/tests/test_stop_epoch.py).
func TestStopEpochPixels(t *testing.T) {
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	full, err := ParseTransform("detr", CHW)
	if err != nil {
		t.Fatal(err)
	}
	resize := mustTransform(t, CHW, Op{Kind: OpResize, Size: [2]int{640, 640}}, Op{Kind: OpSanitizeBoundingBoxes, MinSize: 1, MinArea: 1})
	ds := fixedBoxes{{40, 60, 200, 300}, {300, 100, 500, 370}, {10, 10, 30, 40}}
	for _, mode := range []DecodeMode{DecodeExact, DecodeFast} {
		stop, err := full.WithStopEpoch(1, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop = stop.WithDecode(mode)
		if stop.Sampler(sk).AtEpoch(1).DecodeMode() != mode {
			t.Fatalf("WithDecode(%s) left the variant after the stop with %s", mode, stop.Sampler(sk).AtEpoch(1).DecodeMode())
		}
		for _, c := range decoderKinds {
			d := NewDecoder(c.opts...)
			want := make([]byte, resize.SampleBytes())
			if err := d.Decode(data, resize, Key{}, want); err != nil {
				t.Fatal(err)
			}
			wantTg, err := d.appendTargets(nil, resize, ds, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			plain, flipped := 0, 0
			for i := range uint64(8) {
				got := make([]byte, stop.SampleBytes())
				d.SetBoxSource(ds, 0)
				if err := d.Decode(data, stop, Key{Seed: 3, Epoch: 1, Index: i}, got); err != nil {
					t.Fatal(err)
				}
				trace := string(d.AppendTrace(nil, stop))
				if d.vd[0].plan.PreFlip {
					flipped++
					if !strings.Contains(trace, "horizontal_flip") {
						t.Errorf("%s %s sample %d: flipped, trace %s", mode, c.name, i, trace)
					}
					continue // the flip before the resize: test_stop_epoch.py checks it against torchvision
				}
				plain++
				if !bytes.Equal(got, want) {
					mx, mean := diffStats(got, want)
					t.Errorf("%s %s sample %d: not the photo resized to 640x640 (max %v, mean %v); trace %s", mode, c.name, i, mx, mean, trace)
				}
				tg, err := d.appendTargets(nil, stop, ds, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(tg, wantTg) {
					t.Errorf("%s %s sample %d: targets %x, the resize's %x", mode, c.name, i, tg, wantTg)
				}
			}
			if plain == 0 || flipped == 0 {
				t.Errorf("%s %s: %d plain, %d flipped of 8", mode, c.name, plain, flipped)
			}
			d.Close()
		}
	}
}

// TestStopEpochKeepsStreams: switching ops off, after the geometry too,
// leaves every other op's draws as they were (each op draws from a stream
// of its own): the steps after the stop are the recipe's at the same key
// without the switched-off ops' steps.
func TestStopEpochKeepsStreams(t *testing.T) {
	full := mustTransform(t, CHW, Op{Kind: OpRandomResizedCrop, Size: [2]int{64, 64}}, Op{Kind: OpRandomHorizontalFlip, P: 0.5},
		ColorJitterOp(0.4, 0.4, 0.4, 0.1), Op{Kind: OpRandomGrayscale, P: 0.5},
		Op{Kind: OpRandomApply, P: 0.5, Ops: []Op{{Kind: OpGaussianBlur, KernelSize: [2]int{5, 5}, Sigma: [2]float64{0.1, 2}}}},
		Op{Kind: OpRandomErasing, P: 0.5, Scale: [2]float64{0.02, 0.33}, Ratio: [2]float64{0.3, 3.3}})
	for _, tc := range []struct {
		kinds []OpKind
		gone  []string
	}{
		{[]OpKind{OpColorJitter, OpRandomGrayscale}, []string{"adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue", "rgb_to_grayscale"}},
		{[]OpKind{OpRandomHorizontalFlip}, []string{"horizontal_flip"}},
		{[]OpKind{OpRandomApply, OpRandomErasing}, []string{"gaussian_blur", "erase"}},
	} {
		stop, err := full.WithStopEpoch(1, tc.kinds)
		if err != nil {
			t.Fatal(err)
		}
		removed := 0
		for i := range uint64(48) {
			k := Key{Seed: 11, Epoch: 1, Index: i}
			a, err := stop.Trace(500, 375, k)
			if err != nil {
				t.Fatal(err)
			}
			b, err := full.Trace(500, 375, k)
			if err != nil {
				t.Fatal(err)
			}
			_, got := traceNames(t, a)
			names, theirs := traceNames(t, b)
			var want []string
			for j, n := range names {
				if slices.Contains(tc.gone, n) {
					removed++
					continue
				}
				want = append(want, theirs[j])
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%v, sample %d: %s, want the recipe's %s without %v", tc.kinds, i, a, b, tc.gone)
			}
			k.Epoch = 0
			if a, _ := stop.Trace(500, 375, k); !bytes.Equal(a, mustTrace(t, full, k)) {
				t.Fatalf("%v, epoch 0, sample %d: %s, not the recipe's", tc.kinds, i, a)
			}
		}
		if removed == 0 {
			t.Errorf("%v: no sample drew the ops switched off", tc.kinds)
		}
	}
}

// TestStopEpochGeometryStreams: RandomIoUCrop stopped alone leaves the
// detr recipe's other draws as they were (the photometric steps, the
// zoom's padding, the flip, at the same key): after the stop a trace is
// the recipe's without its iou_crop step. RandomZoomOut stopped alone
// leaves the photometric steps and the flip, and the IoU crop draws on
// the image it gets (no canvas: its numbers the same, its crop on
// another size, as torchvision's would be).
func TestStopEpochGeometryStreams(t *testing.T) {
	full, err := ParseTransform("detr", CHW)
	if err != nil {
		t.Fatal(err)
	}
	iou, err := full.WithStopEpoch(1, []OpKind{OpRandomIoUCrop})
	if err != nil {
		t.Fatal(err)
	}
	zoom, err := full.WithStopEpoch(1, []OpKind{OpRandomZoomOut})
	if err != nil {
		t.Fatal(err)
	}
	boxes := [][4]float32{{40, 60, 200, 300}, {300, 100, 620, 460}}
	crops, pads := 0, 0
	for i := range uint64(48) {
		k := Key{Seed: 2, Epoch: 1, Index: i}
		b, err := full.TraceBoxes(640, 480, k, boxes)
		if err != nil {
			t.Fatal(err)
		}
		names, theirs := traceNames(t, b)
		var want, wantZoom []string
		for j, n := range names {
			if n != "iou_crop" {
				want = append(want, theirs[j])
			} else {
				crops++
			}
			if n != "pad" && n != "iou_crop" {
				wantZoom = append(wantZoom, theirs[j])
			} else if n == "pad" {
				pads++
			}
		}
		a, err := iou.TraceBoxes(640, 480, k, boxes)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := traceNames(t, a); !slices.Equal(got, want) {
			t.Fatalf("RandomIoUCrop stopped, sample %d: %s, want the recipe's %s without its iou_crop", i, a, b)
		}
		a, err = zoom.TraceBoxes(640, 480, k, boxes)
		if err != nil {
			t.Fatal(err)
		}
		_, got := traceNames(t, a)
		got = slices.DeleteFunc(got, func(s string) bool { return strings.HasPrefix(s, `["iou_crop"`) })
		if !slices.Equal(got, wantZoom) {
			t.Fatalf("RandomZoomOut stopped, sample %d: %s, want the recipe's %s without its pad (and its crop drawn anew)", i, a, b)
		}
	}
	if crops == 0 || pads == 0 {
		t.Errorf("%d crops, %d pads in 48 samples", crops, pads)
	}
}

func mustTrace(t *testing.T, tr *Transform, k Key) []byte {
	t.Helper()
	b, err := tr.Trace(500, 375, k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStopEpochRefused: what a stop_epoch cannot switch off, or names
// wrong, is refused, saying why.
func TestStopEpochRefused(t *testing.T) {
	detr, err := ParseTransform("detr", CHW)
	if err != nil {
		t.Fatal(err)
	}
	train, err := ParseTransform("imagenet-train", CHW)
	if err != nil {
		t.Fatal(err)
	}
	simclr, err := ParseTransform("simclr", CHW)
	if err != nil {
		t.Fatal(err)
	}
	view, err := ParseTransform("simclr-view", CHW)
	if err != nil {
		t.Fatal(err)
	}
	norm := mustTransform(t, CHW, Op{Kind: OpResize, Size: [2]int{8, 8}}, Op{Kind: OpNormalize, Mean: fn.ImagenetMean, Std: fn.ImagenetStd})
	for _, tc := range []struct {
		tr    *Transform
		kinds []OpKind
		want  string
	}{
		{detr, []OpKind{OpResize}, "Resize cannot be switched off: it fixes the batch's size"},
		{detr, []OpKind{"RandomIoUCrp"}, `"RandomIoUCrp" is not an op of the transform`},
		{detr, []OpKind{OpColorJitter}, `"ColorJitter" is not an op of the transform`},
		{train, nil, "has none of the DETR family's"},
		{train, []OpKind{OpRandomResizedCrop}, "RandomResizedCrop cannot be switched off"},
		{norm, []OpKind{OpNormalize}, "Normalize cannot be switched off"},
		{view, []OpKind{OpColorJitter}, `"ColorJitter" is not an op of the transform at its top level`}, // inside a RandomApply
		{simclr, []OpKind{OpRandomGrayscale}, "several views"},
	} {
		_, err := tc.tr.WithStopEpoch(3, tc.kinds)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.kinds, err, tc.want)
		}
	}
	stop, err := detr.WithStopEpoch(3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stop.WithStopEpoch(4, nil); err == nil {
		t.Error("a second stop_epoch was taken")
	}
}

// TestStopEpochZoomGeometries: RandomZoomOut stopped before a RandomCrop, a
// CenterCrop or a Resize(h, w): from the stop on each sample is, pixels
// and trace, the same op list without the zoom at the same key (the crop
// draws from the geometry's stream either way), on every decode path;
// before it, the zoom's canvas.
func TestStopEpochZoomGeometries(t *testing.T) {
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	zoom := Op{Kind: OpRandomZoomOut, P: 1, SideRange: [2]float64{1.5, 3}, Fill: [3]float64{10, 200, 30}}
	for _, geo := range [][]Op{
		{{Kind: OpRandomCrop, Size: [2]int{96, 128}, PadIfNeeded: true, Fill: [3]float64{10, 200, 30}}},
		{{Kind: OpCenterCrop, Size: [2]int{96, 128}}},
		{{Kind: OpResize, Size: [2]int{96, 128}}, {Kind: OpRandomHorizontalFlip, P: 0.5}},
	} {
		full := mustTransform(t, CHW, append([]Op{zoom}, geo...)...)
		plain := mustTransform(t, CHW, geo...)
		stop, err := full.WithStopEpoch(1, []OpKind{OpRandomZoomOut})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range decoderKinds {
			d := NewDecoder(c.opts...)
			for i := range uint64(4) {
				for _, ep := range []uint64{0, 1} {
					k := Key{Seed: 9, Epoch: ep, Index: i}
					ref := plain
					if ep == 0 {
						ref = full
					}
					want := make([]byte, ref.SampleBytes())
					if err := d.Decode(data, ref, k, want); err != nil {
						t.Fatal(err)
					}
					wantTrace := string(d.AppendTrace(nil, ref))
					got := make([]byte, stop.SampleBytes())
					if err := d.Decode(data, stop, k, got); err != nil {
						t.Fatal(err)
					}
					trace := string(d.AppendTrace(nil, stop))
					if !bytes.Equal(got, want) || trace != wantTrace {
						t.Errorf("%s, %s, epoch %d, sample %d: trace %s, want %s (bytes equal: %v)", geo[0].Kind, c.name, ep, i, trace, wantTrace, bytes.Equal(got, want))
					}
					if zoomed := strings.Contains(trace, `["pad"`); zoomed != (ep == 0) {
						t.Errorf("%s, epoch %d, sample %d: trace %s", geo[0].Kind, ep, i, trace)
					}
				}
			}
			d.Close()
		}
	}
}
