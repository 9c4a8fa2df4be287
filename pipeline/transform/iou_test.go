package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

func iouOp() optab.Op {
	return optab.Op{Kind: OpRandomIoUCrop, Args: &IoUCropArgs{Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.5, 2}, Options: []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1}, Trials: 40}}
}

// TestIoUCropDraws: RandomIoUCrop's crops over many keys, as make_params
// makes them (test_detection_ops.py compares the distributions with
// torchvision's): inside the image, each side its scale of the image's,
// the aspect in range, a box's centre strictly inside, and at least one
// such box overlapping it by 0.5 when that is the only option; no crop at
// all with the option 1 alone, and without boxes a job's error.
func TestIoUCropDraws(t *testing.T) {
	const W, H = 500, 375
	boxes := targets.Targets{Instances: Instances{Boxes: [][4]float32{{40, 30, 420, 330}, {450.5, 10.25, 490, 60}, {100, 100, 220, 180}}}}
	resize := optab.Op{Kind: OpResize, Size: [2]int{32, 32}}
	half := iouOp()
	half.Args.(*IoUCropArgs).Options = []float64{0.5}
	for _, op := range []optab.Op{iouOp(), half} {
		tr := mustTransform(t, CHW, op, resize)
		crops := 0
		for i := range uint64(2000) {
			p, err := tr.planBoxes(W, H, det.Key{Seed: 9, Index: i}, &boxes, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !p.IoU {
				if p.CX != 0 || p.CY != 0 || p.CW != W || p.CH != H || len(optab.ArgsOf[IoUCropArgs](&op).Options) == 1 {
					t.Fatalf("key %d: no crop, plan %+v", i, p)
				}
				continue
			}
			crops++
			if p.CX < 0 || p.CY < 0 || p.CX+p.CW > W || p.CY+p.CH > H || p.CW < 149 || p.CH < 112 {
				t.Fatalf("key %d: crop %d,%d %dx%d", i, p.CX, p.CY, p.CW, p.CH)
			}
			if ar := float64(p.CW) / float64(p.CH); ar < 0.5 || ar > 2 {
				t.Fatalf("key %d: crop %dx%d, aspect %v", i, p.CW, p.CH, ar)
			}
			best, any := MaxIoU(boxes.Boxes, p.CY, p.CX, p.CH, p.CW)
			if !any || (len(optab.ArgsOf[IoUCropArgs](&op).Options) == 1 && best < 0.5) {
				t.Fatalf("key %d: crop %d,%d %dx%d: best IoU %v (a box inside: %v)", i, p.CX, p.CY, p.CW, p.CH, best, any)
			}
		}
		if crops < 1500 || (len(optab.ArgsOf[IoUCropArgs](&op).Options) == 1 && crops != 2000) {
			t.Errorf("options %v: %d crops of 2000", optab.ArgsOf[IoUCropArgs](&op).Options, crops)
		}
	}
	leave := iouOp()
	leave.Args.(*IoUCropArgs).Options = []float64{1}
	p, err := mustTransform(t, CHW, leave, resize).planBoxes(W, H, det.Key{}, &boxes, nil)
	if err != nil || p.IoU {
		t.Errorf("options [1]: %+v, %v", p, err)
	}
	if _, err := mustTransform(t, CHW, iouOp(), resize).geomPlan(W, H, det.Key{}); !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "a job with targets only") {
		t.Errorf("no boxes: %v", err)
	}
	// No crop can meet an IoU of 0.9 with no box: the sample fails.
	none := iouOp()
	none.Args.(*IoUCropArgs).Options, none.Args.(*IoUCropArgs).Trials = []float64{0.9}, 2
	if _, err := mustTransform(t, CHW, none, resize).planBoxes(W, H, det.Key{}, &targets.Targets{}, nil); err == nil || !strings.Contains(err.Error(), "found no crop") {
		t.Errorf("no boxes to meet: %v", err)
	}
}

// TestIoUCropBoxes: the crop's boxes are torchvision's crop of them, and
// those whose centre was not strictly inside the crop are (0, 0, 0, 0);
// box_iou's IoU in float32.
func TestIoUCropBoxes(t *testing.T) {
	boxes := [][4]float32{
		{10, 10, 30, 30}, // centre (20, 20): inside the crop at (15, 5)
		{0, 0, 20, 20},   // centre (10, 10): left of it
		{15, 5, 15, 25},  // centre (15, 15): on its left edge, not inside
		{50, 40, 90, 80}, // centre (70, 60): inside; cut to the crop
	}
	w, h, err := MoveBoxes(boxes, 100, 100, []fn.Step{{Fn: fn.IoUCrop, I: [6]int{5, 15, 60, 60}}})
	want := [][4]float32{{0, 5, 15, 25}, {}, {}, {35, 35, 60, 60}}
	if err != nil || w != 60 || h != 60 {
		t.Fatalf("%dx%d %v", w, h, err)
	}
	for k := range want {
		if boxes[k] != want[k] {
			t.Errorf("box %d: %v, want %v", k, boxes[k], want[k])
		}
	}
	// A 20x20 box, 15 of its columns inside a 20x40 crop: 300 / (400 +
	// 800 - 300); one whose centre is on the crop's edge does not count.
	if iou, any := MaxIoU([][4]float32{{15, 0, 35, 20}, {0, 0, 40, 40}}, 0, 20, 40, 20); !any || iou != float32(1.0/3) {
		t.Errorf("IoU %v, %v; want 1/3", iou, any)
	}
}

// TestIoUCropRefused: RandomIoUCrop's arguments and places that are not
// supported are refused when the transform is made, saying why.
func TestIoUCropRefused(t *testing.T) {
	resize := optab.Op{Kind: OpResize, Size: [2]int{32, 32}}
	with := func(f func(*optab.Op)) optab.Op { o := iouOp(); f(&o); return o }
	for _, tc := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{iouOp()}, "RandomIoUCrop needs Resize((h, w)) after it"},
		{[]optab.Op{iouOp(), {Kind: OpResize, Size: [2]int{32, 0}}, {Kind: OpCenterCrop, Size: [2]int{32, 32}}}, "RandomIoUCrop needs Resize((h, w))"},
		{[]optab.Op{iouOp(), {Kind: optab.OpRandomHorizontalFlip, P: 0.5}, {Kind: optab.OpRandomHorizontalFlip, P: 0.5}, resize}, "RandomIoUCrop needs Resize((h, w))"},
		{[]optab.Op{iouOp(), {Kind: optab.OpSanitizeBoundingBoxes}, resize}, "op 1 (SanitizeBoundingBoxes): min_size 0"},
		{[]optab.Op{with(func(o *optab.Op) { o.Args.(*IoUCropArgs).Scale = [2]float64{0, 1} }), resize}, "min_scale 0, max_scale 1"},
		{[]optab.Op{with(func(o *optab.Op) { o.Args.(*IoUCropArgs).Scale = [2]float64{0.3, 1.5} }), resize}, "max_scale <= 1"},
		{[]optab.Op{with(func(o *optab.Op) { o.Args.(*IoUCropArgs).Ratio = [2]float64{2, 1} }), resize}, "min_aspect_ratio 2"},
		{[]optab.Op{with(func(o *optab.Op) { o.Args.(*IoUCropArgs).Options = nil }), resize}, "sampler_options of 0 values"},
		{[]optab.Op{with(func(o *optab.Op) { o.Args.(*IoUCropArgs).Options = []float64{-0.1} }), resize}, "sampler_options [-0.1]"},
		{[]optab.Op{with(func(o *optab.Op) { o.Args.(*IoUCropArgs).Trials = 0 }), resize}, "trials=0"},
		{[]optab.Op{resize, iouOp()}, "RandomIoUCrop must be the first op"},
		{[]optab.Op{resize, {Kind: optab.OpRandomHorizontalFlip, P: 0.5}, iouOp()}, "RandomIoUCrop after other ops"},
	} {
		_, err := NewTransform(CHW, tc.ops...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(tc.ops), err, tc.want)
		}
	}
	tr := mustTransform(t, CHW, optab.Op{Kind: OpRandomZoomOut, P: 0.5, Args: &ZoomOutArgs{SideRange: [2]float64{1, 4}}}, iouOp(), optab.Op{Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}},
		optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5}, resize, optab.Op{Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}})
	if NeedsTargets(tr) == "" || CheckTargets(tr) != nil {
		t.Errorf("the DETR geometry: needs targets %q, checked %v", NeedsTargets(tr), CheckTargets(tr))
	}
}
