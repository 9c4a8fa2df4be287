package transform_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// stop_epoch's draws (decodemode.go), traced through the Tracer the
// external tests set (helpers_ext_test.go): the root's tests keep those
// that decode (TestExactStopEpochPixels, TestExactStopEpochZoomGeometries).

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
	full, err := transform.ParseTransform("detr", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := full.WithStopEpoch(5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, kinds, ok := stop.StopEpoch(); !ok || e != 5 || !slices.Equal(kinds, transform.DETRStopOps) {
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
		before := det.Key{Seed: 7, Epoch: 4, Index: i}
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
		after := det.Key{Seed: 7, Epoch: 5, Index: i}
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
	if c, ca := stop.Cost(), stop.AtEpoch(5).Cost(); c != full.Cost() || ca.Max > c.Max || ca.Mean > c.Mean {
		t.Errorf("cost %v, after the stop %v, the preset's %v", c, ca, full.Cost())
	}
	if stop.MaxTraceBytes() < stop.AtEpoch(5).MaxTraceBytes() {
		t.Error("the trace bound is not the whole recipe's")
	}
	if stop.AtEpoch(4) != stop || stop.AtEpoch(5) == stop || stop.AtEpoch(1<<63) != stop.AtEpoch(5) {
		t.Error("AtEpoch: the recipe before epoch 5, the variant from it on")
	}
}

// TestStopEpochKeepsStreams: switching ops off, after the geometry too,
// leaves every other op's draws as they were (each op draws from a stream
// of its own): the steps after the stop are the recipe's at the same key
// without the switched-off ops' steps.
func TestStopEpochKeepsStreams(t *testing.T) {
	full := mustTransform(t, transform.CHW, optab.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{64, 64}}, optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5},
		optab.ColorJitterOp(0.4, 0.4, 0.4, 0.1), optab.Op{Kind: optab.OpRandomGrayscale, P: 0.5},
		optab.Op{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{{Kind: optab.OpGaussianBlur, Args: &optab.BlurArgs{KernelSize: [2]int{5, 5}, Sigma: [2]float64{0.1, 2}}}}},
		optab.Op{Kind: optab.OpRandomErasing, P: 0.5, Args: &optab.ErasingArgs{Scale: [2]float64{0.02, 0.33}, Ratio: [2]float64{0.3, 3.3}}})
	for _, tc := range []struct {
		kinds []optab.OpKind
		gone  []string
	}{
		{[]optab.OpKind{optab.OpColorJitter, optab.OpRandomGrayscale}, []string{"adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue", "rgb_to_grayscale"}},
		{[]optab.OpKind{optab.OpRandomHorizontalFlip}, []string{"horizontal_flip"}},
		{[]optab.OpKind{optab.OpRandomApply, optab.OpRandomErasing}, []string{"gaussian_blur", "erase"}},
	} {
		stop, err := full.WithStopEpoch(1, tc.kinds)
		if err != nil {
			t.Fatal(err)
		}
		removed := 0
		for i := range uint64(48) {
			k := det.Key{Seed: 11, Epoch: 1, Index: i}
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
	full, err := transform.ParseTransform("detr", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	iou, err := full.WithStopEpoch(1, []optab.OpKind{transform.OpRandomIoUCrop})
	if err != nil {
		t.Fatal(err)
	}
	zoom, err := full.WithStopEpoch(1, []optab.OpKind{transform.OpRandomZoomOut})
	if err != nil {
		t.Fatal(err)
	}
	boxes := [][4]float32{{40, 60, 200, 300}, {300, 100, 620, 460}}
	crops, pads := 0, 0
	for i := range uint64(48) {
		k := det.Key{Seed: 2, Epoch: 1, Index: i}
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

func mustTrace(t *testing.T, tr *transform.Transform, k det.Key) []byte {
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
	detr, err := transform.ParseTransform("detr", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	train, err := transform.ParseTransform("imagenet-train", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	simclr, err := transform.ParseTransform("simclr", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	view, err := transform.ParseTransform("simclr-view", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	norm := mustTransform(t, transform.CHW, optab.Op{Kind: transform.OpResize, Size: [2]int{8, 8}}, optab.Op{Kind: optab.OpNormalize, Args: &optab.NormalizeArgs{Mean: fn.ImagenetMean, Std: fn.ImagenetStd}})
	for _, tc := range []struct {
		tr    *transform.Transform
		kinds []optab.OpKind
		want  string
	}{
		{detr, []optab.OpKind{transform.OpResize}, "Resize cannot be switched off: it fixes the batch's size"},
		{detr, []optab.OpKind{"RandomIoUCrp"}, `"RandomIoUCrp" is not an op of the transform`},
		{detr, []optab.OpKind{optab.OpColorJitter}, `"ColorJitter" is not an op of the transform`},
		{train, nil, "has none of the DETR family's"},
		{train, []optab.OpKind{transform.OpRandomResizedCrop}, "RandomResizedCrop cannot be switched off"},
		{norm, []optab.OpKind{optab.OpNormalize}, "Normalize cannot be switched off"},
		{view, []optab.OpKind{optab.OpColorJitter}, `"ColorJitter" is not an op of the transform at its top level`}, // inside a RandomApply
		{simclr, []optab.OpKind{optab.OpRandomGrayscale}, "several views"},
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
