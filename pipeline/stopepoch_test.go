package pipeline

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// The stop_epoch tests here decode (pixels and targets on every decode
// path); those of its draws alone are pipeline/transform's
// (stopepoch_ext_test.go).

// TestExactStopEpochPixels: from the stop on, a detr sample that drew no flip
// is the photo resized to 640x640, pixels and targets, on every decode
// path and both decode modes (a flipped one is checked against
// torchvision by python/tests/test_stop_epoch.py).
func TestExactStopEpochPixels(t *testing.T) {
	exactTest(t)
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	full, err := transform.ParseTransform("detr", transform.CHW)
	if err != nil {
		t.Fatal(err)
	}
	resize := mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpResize, Size: [2]int{640, 640}}, ops.Op{Kind: ops.OpSanitizeBoundingBoxes, Args: &ops.SanitizeArgs{MinSize: 1, MinArea: 1}})
	ds := fixedBoxes{{40, 60, 200, 300}, {300, 100, 500, 370}, {10, 10, 30, 40}}
	for _, mode := range []transform.DecodeMode{transform.DecodeExact, transform.DecodeFast} {
		stop, err := full.WithStopEpoch(1, nil)
		if err != nil {
			t.Fatal(err)
		}
		stop = stop.WithDecode(mode)
		if stop.AtEpoch(1).DecodeMode() != mode {
			t.Fatalf("WithDecode(%s) left the variant after the stop with %s", mode, stop.AtEpoch(1).DecodeMode())
		}
		for _, c := range decoderKinds {
			d := NewDecoder(c.opts...)
			want := make([]byte, resize.SampleBytes())
			if err := d.DecodeSample(Sample{Data: data, Targets: ds}, resize, det.Key{}, want); err != nil {
				t.Fatal(err)
			}
			wantTg, err := d.appendTargets(nil, resize, nil)
			if err != nil {
				t.Fatal(err)
			}
			plain, flipped := 0, 0
			for i := range uint64(8) {
				got := make([]byte, stop.SampleBytes())
				if err := d.DecodeSample(Sample{Data: data, Targets: ds}, stop, det.Key{Seed: 3, Epoch: 1, Index: i}, got); err != nil {
					t.Fatal(err)
				}
				trace := string(d.AppendTrace(nil))
				if d.plan.Views[0].Geom.PreFlip {
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
				tg, err := d.appendTargets(nil, stop, nil)
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

// TestExactStopEpochZoomGeometries: RandomZoomOut stopped before a RandomCrop, a
// CenterCrop or a Resize(h, w): from the stop on each sample is, pixels
// and trace, the same op list without the zoom at the same key (the crop
// draws from the geometry's stream either way), on every decode path;
// before it, the zoom's canvas. An exactness test: bytes against bytes on
// one goroutine.
func TestExactStopEpochZoomGeometries(t *testing.T) {
	exactTest(t)
	data, err := os.ReadFile("../testdata/photos/autumn/000000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	zoom := ops.Op{Kind: transform.OpRandomZoomOut, P: 1, Args: &transform.ZoomOutArgs{SideRange: [2]float64{1.5, 3}, Filling: ops.Filling{Fill: [3]float64{10, 200, 30}}}}
	for _, geo := range [][]ops.Op{
		{{Kind: transform.OpRandomCrop, Size: [2]int{96, 128}, Args: &transform.RandomCropArgs{PadIfNeeded: true, Filling: ops.Filling{Fill: [3]float64{10, 200, 30}}}}},
		{{Kind: transform.OpCenterCrop, Size: [2]int{96, 128}}},
		{{Kind: transform.OpResize, Size: [2]int{96, 128}}, {Kind: ops.OpRandomHorizontalFlip, P: 0.5}},
	} {
		full := mustTransform(t, transform.CHW, append([]ops.Op{zoom}, geo...)...)
		plain := mustTransform(t, transform.CHW, geo...)
		stop, err := full.WithStopEpoch(1, []ops.OpKind{transform.OpRandomZoomOut})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range decoderKinds {
			d := NewDecoder(c.opts...)
			for i := range uint64(4) {
				for _, ep := range []uint64{0, 1} {
					k := det.Key{Seed: 9, Epoch: ep, Index: i}
					ref := plain
					if ep == 0 {
						ref = full
					}
					want := make([]byte, ref.SampleBytes())
					if err := d.Decode(data, ref, k, want); err != nil {
						t.Fatal(err)
					}
					wantTrace := string(d.AppendTrace(nil))
					got := make([]byte, stop.SampleBytes())
					if err := d.Decode(data, stop, k, got); err != nil {
						t.Fatal(err)
					}
					trace := string(d.AppendTrace(nil))
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
