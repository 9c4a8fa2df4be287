package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// ssdRecipes are the detection references' recipes that do not resize,
// as from_torchvision converts DetectionPresetTrain's: "hflip",
// "ssdlite" and "ssd" (RandomZoomOut's fill the mean).
func ssdRecipes() map[string][]optab.Op {
	flip := optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5}
	tail := []optab.Op{{Kind: optab.OpConvertBoundingBoxFormat, Args: &optab.BoxFormatArgs{Format: targets.BoxXYXY}}, {Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}}}
	zoom := optab.Op{Kind: OpRandomZoomOut, P: 0.5, Args: &ZoomOutArgs{SideRange: [2]float64{1, 4}, Filling: optab.Filling{Fill: [3]float64{123, 117, 104}}}}
	return map[string][]optab.Op{
		"hflip":   append([]optab.Op{flip}, tail...),
		"ssdlite": append([]optab.Op{iouOp(), flip}, tail...),
		"ssd":     append([]optab.Op{photometricOp(), zoom, iouOp(), flip}, tail...),
	}
}

// TestBoundRecipes: without a bound the recipes are refused, the message
// saying how to give one (max_size); with one each sample is its own size
// (the image's, its canvas' crop), Varies, the transform's size the
// bound; a sample past the bound fails TOO_LARGE naming its image's size
// and the bound; a geometry that fixes the size ignores the bound.
func TestBoundRecipes(t *testing.T) {
	boxes := targets.Targets{Instances: Instances{Boxes: [][4]float32{{40, 30, 220, 230}, {150.5, 10.25, 290, 60}}}}
	for name, ops := range ssdRecipes() {
		if _, err := NewTransform(CHW, ops...); err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "max_size=(h, w)") {
			t.Errorf("%s without a bound: %v, want refused naming max_size", name, err)
		}
		tr, err := NewTransformBound(CHW, [2]int{1300, 1200}, ops...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h, w := tr.Size(); !tr.Varies() || h != 1300 || w != 1200 {
			t.Fatalf("%s: Varies %v, size %dx%d: want per-sample sizes bounded by 1300x1200", name, tr.Varies(), h, w)
		}
		if got, want := tr.SampleBytes(), 3*1300*1200+SizeTrailer; got != want {
			t.Errorf("%s: SampleBytes %d, want the bound's %d", name, got, want)
		}
		crops, zooms := 0, 0
		for i := range uint64(300) {
			p, err := tr.planBoxes(300, 280, det.Key{Seed: 3, Index: i}, &boxes, nil)
			if err != nil {
				t.Fatalf("%s key %d: %v", name, i, err)
			}
			w, h := tr.SampleSize(&p)
			switch {
			case name == "hflip" && (w != 300 || h != 280):
				t.Fatalf("%s key %d: %dx%d, want the image's 300x280", name, i, w, h)
			case name != "hflip" && (w != p.CW || h != p.CH || w > 1200 || h > 1300):
				t.Fatalf("%s key %d: %dx%d, want its crop's %dx%d", name, i, w, h, p.CW, p.CH)
			}
			steps := tr.geometrySteps(&p, nil)
			for _, st := range steps {
				if st.Fn.String() == "resize" {
					t.Fatalf("%s key %d: a resize in %v", name, i, steps)
				}
			}
			if p.IoU {
				crops++
			}
			if p.Zoomed {
				zooms++
			}
		}
		if name != "hflip" && crops == 0 || name == "ssd" && zooms == 0 {
			t.Errorf("%s: %d crops, %d zooms of 300", name, crops, zooms)
		}
		// A bound under the image: its samples past it fail (hflip's all;
		// the crops' and canvases' larger than it), each naming the
		// image's size and the bound.
		small, _ := NewTransformBound(CHW, [2]int{270, 310}, ops...)
		failed := 0
		for i := range uint64(100) {
			_, err := small.planBoxes(300, 280, det.Key{Seed: 3, Index: i}, &boxes, nil)
			if err == nil {
				continue
			}
			failed++
			if !errors.Is(err, errs.TooLarge) || !strings.Contains(err.Error(), "the 300x280 image") || !strings.Contains(err.Error(), "past the job's bound of 310x270 (max_size=(270, 310)") {
				t.Fatalf("%s key %d: %v", name, i, err)
			}
		}
		if failed == 0 || failed == 100 && name != "hflip" {
			t.Errorf("%s: %d of 100 samples past a bound under the image", name, failed)
		}
	}
	// A geometry that fixes the size ignores the bound.
	fixed, err := NewTransformBound(CHW, [2]int{1300, 1200}, iouOp(), optab.Op{Kind: OpResize, Size: [2]int{300, 300}})
	if err != nil || fixed.Varies() {
		t.Fatalf("RandomIoUCrop then Resize((300, 300)) under a bound: %v, Varies %v", err, err == nil && fixed.Varies())
	}
	if h, w := fixed.Size(); h != 300 || w != 300 {
		t.Errorf("size %dx%d, want the Resize's", h, w)
	}
	for _, b := range [][2]int{{0, 5}, {5, -1}, {optab.MaxSide + 1, 5}} {
		if _, err := NewTransformBound(CHW, b, ssdRecipes()["hflip"]...); err == nil || !strings.Contains(err.Error(), "max_size") {
			t.Errorf("bound %v: %v, want refused", b, err)
		}
	}
	// A geometry op after the RandomIoUCrop other than Resize((h, w)) is
	// still refused under a bound.
	if _, err := NewTransformBound(CHW, [2]int{500, 500}, iouOp(), optab.Op{Kind: OpCenterCrop, Size: [2]int{100, 100}}); err == nil {
		t.Error("RandomIoUCrop then CenterCrop under a bound: accepted")
	}
}

// TestDataBound: a dataset's largest image times RandomZoomOut's
// side_range maximum (a pixel's slack), after the photometric ops; the
// image's own size without one; at most MaxSide; and the transform made
// from it names its source where a sample is past it.
func TestDataBound(t *testing.T) {
	r := ssdRecipes()
	if got := DataBound(r["ssd"], 640, 480); got != [2]int{4*480 + 1, 4*640 + 1} {
		t.Errorf("ssd: %v", got)
	}
	if got := DataBound(r["ssdlite"], 640, 480); got != [2]int{480, 640} {
		t.Errorf("ssdlite: %v", got)
	}
	if got := DataBound(r["ssd"], 4000, 30); got != [2]int{121, optab.MaxSide} {
		t.Errorf("ssd of a 4000x30 image: %v", got)
	}
	tr, err := NewTransformData(CHW, 640, 480, r["hflip"]...)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tr.Size(); h != 480 || w != 640 {
		t.Fatalf("hflip on images of at most 640x480: size %dx%d", h, w)
	}
	if _, err := tr.geomPlan(641, 100, det.Key{}); err == nil || !strings.Contains(err.Error(), "the dataset's largest image, 640x480 in its annotations") {
		t.Errorf("an image past its annotations' bound: %v", err)
	}
	if _, err := NewTransformData(CHW, 0, 0, r["hflip"]...); err == nil {
		t.Error("no sizes known: accepted")
	}
}

// TestBoundStopEpoch: the ssd recipe under a bound with D-FINE's
// stop_epoch: from it on no distortion, zoom or crop, each sample the
// image's own size; before it, as without.
func TestBoundStopEpoch(t *testing.T) {
	boxes := targets.Targets{Instances: Instances{Boxes: [][4]float32{{40, 30, 220, 230}}}}
	tr, err := NewTransformBound(CHW, [2]int{1300, 1300}, ssdRecipes()["ssd"]...)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tr.WithStopEpoch(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	grown := 0
	for i := range uint64(200) {
		for _, epoch := range []uint64{1, 2} {
			at := st.AtEpoch(epoch)
			p, err := at.planBoxes(300, 280, det.Key{Seed: 3, Epoch: epoch, Index: i}, &boxes, nil)
			if err != nil {
				t.Fatalf("epoch %d key %d: %v", epoch, i, err)
			}
			w, h := at.SampleSize(&p)
			if epoch == 2 && (w != 300 || h != 280 || p.Zoomed || p.IoU || len(at.pre) > 0) {
				t.Fatalf("after stop_epoch, key %d: %dx%d (zoomed %v, crop %v, %d ops before)", i, w, h, p.Zoomed, p.IoU, len(at.pre))
			}
			if epoch == 1 && (w > 300 || h > 280) {
				grown++
			}
		}
	}
	if grown == 0 {
		t.Error("before stop_epoch no sample past its image: the zoom is off")
	}
}

// TestBoundNoGeometryFirst: under a bound, ops with no geometry op are
// the image at its own size, but a geometry op after other ops is still
// refused as without one.
func TestBoundNoGeometryFirst(t *testing.T) {
	flip := optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5}
	rrc := optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{32, 32}}
	if _, err := NewTransformBound(CHW, [2]int{64, 64}, flip, rrc); err == nil || !strings.Contains(err.Error(), "op 0 is RandomHorizontalFlip: the first op must be the geometry") {
		t.Errorf("a flip then RandomResizedCrop under a bound: %v", err)
	}
	tr, err := NewTransformBound(CHW, [2]int{64, 64}, flip, optab.Op{Kind: optab.OpRandomVerticalFlip, P: 0.5})
	if err != nil || !tr.Varies() {
		t.Fatalf("two flips under a bound: %v", err)
	}
}
