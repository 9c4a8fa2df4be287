package transform

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// TestKeypointsGolden holds the keypoint maths to the float32 bits
// torchvision computes (torchvision.transforms.v2.functional's flips,
// crop, center_crop, pad, resize, resized_crop, rotate and affine on
// float32 KeyPoints), over python/tests/test_targets_kpts.py's grid: each
// case one op as a trace step, 1 to 34 points (torch.matmul's three
// summation orders), points past the canvas. The Python test checks that
// the file is what torchvision computes.
func TestKeypointsGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/targets_kpts.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Torchvision string
		Cases       []struct {
			W, H         int
			Step         [2]json.RawMessage
			Points, Want [][2]float32
			Canvas       [2]int
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) < 50 {
		t.Fatalf("%d cases", len(doc.Cases))
	}
	fns := map[fn.Fn]bool{}
	for i, c := range doc.Cases {
		st, err := fn.ParseStep(c.Step)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		fns[st.Fn] = true
		pts := append([][2]float32(nil), c.Points...)
		w, h, err := MoveKeypoints(pts, c.W, c.H, []fn.Step{st})
		if err != nil || h != c.Canvas[0] || w != c.Canvas[1] {
			t.Fatalf("case %d (%s): %dx%d %v, want %dx%d", i, st.Fn, w, h, err, c.Canvas[1], c.Canvas[0])
		}
		for k := range pts {
			if pts[k] != c.Want[k] {
				t.Errorf("case %d (%s on %dx%d, %d points): point %v became %v, torchvision %s's %v", i, c.Step[1], c.W, c.H,
					len(pts), c.Points[k], pts[k], doc.Torchvision, c.Want[k])
			}
		}
	}
	if len(fns) != 9 {
		t.Errorf("the grid has %d ops, want 9: %v", len(fns), fns)
	}
}

// TestMoveKeypoints: what each op does to a point, by hand; a flip twice
// and a pad then a crop of the same offsets give the points back; ops on
// pixels leave them; other steps are refused, not skipped.
func TestMoveKeypoints(t *testing.T) {
	src := [][2]float32{{0, 0}, {10.5, 20.25}, {199, 99}, {-3, 250}}
	for _, tc := range []struct {
		name  string
		steps []fn.Step
		w, h  int
		want  [][2]float32
	}{
		{"hflip", []fn.Step{{Fn: fn.HorizontalFlip}}, 200, 100, [][2]float32{{199, 0}, {188.5, 20.25}, {0, 99}, {202, 250}}},
		{"vflip", []fn.Step{{Fn: fn.VerticalFlip}}, 200, 100, [][2]float32{{0, 99}, {10.5, 78.75}, {199, 0}, {-3, -151}}},
		{"crop", []fn.Step{{Fn: fn.Crop, I: [6]int{5, 10, 50, 60}}}, 60, 50, [][2]float32{{-10, -5}, {0.5, 15.25}, {189, 94}, {-13, 245}}},
		{"iou_crop", []fn.Step{{Fn: fn.IoUCrop, I: [6]int{5, 10, 50, 60}}}, 60, 50, [][2]float32{{-10, -5}, {0.5, 15.25}, {189, 94}, {-13, 245}}},
		{"pad", []fn.Step{{Fn: fn.Pad, I: [6]int{1, 2, 3, 4}}}, 204, 106, [][2]float32{{1, 2}, {11.5, 22.25}, {200, 101}, {-2, 252}}},
		{"resize", []fn.Step{{Fn: fn.Resize, I: [6]int{4: 50, 5: 400}}}, 400, 50, [][2]float32{{0, 0}, {21, 10.125}, {398, 49.5}, {-6, 125}}},
		{"resize same", []fn.Step{{Fn: fn.Resize, I: [6]int{4: 100, 5: 200}}}, 200, 100, src},
		// center_crop's anchor: round((100 - 51) / 2) = 24 (half to even), round((200 - 61) / 2) = 70.
		{"center_crop", []fn.Step{{Fn: fn.CenterCrop, I: [6]int{4: 51, 5: 61}}}, 61, 51, [][2]float32{{-70, -24}, {-59.5, -3.75}, {129, 75}, {-73, 226}}},
		{"resized_crop", []fn.Step{{Fn: fn.ResizedCrop, I: [6]int{10, 20, 50, 100, 25, 50}}}, 50, 25, [][2]float32{{-10, -5}, {-4.75, 5.125}, {89.5, 44.5}, {-11.5, 120}}},
		{"pixels", []fn.Step{{Fn: fn.AdjustBrightness, F: [6]float64{1.5}}, {Fn: fn.Erase, I: [6]int{1, 1, 5, 5}}, {Fn: fn.Normalize}}, 200, 100, src},
		{"flip twice", []fn.Step{{Fn: fn.HorizontalFlip}, {Fn: fn.VerticalFlip}, {Fn: fn.HorizontalFlip}, {Fn: fn.VerticalFlip}}, 200, 100, src},
		{"pad crop", []fn.Step{{Fn: fn.Pad, I: [6]int{7, 9, 1, 1}}, {Fn: fn.Crop, I: [6]int{9, 7, 100, 200}}}, 200, 100, src},
		{"rotate 0", []fn.Step{{Fn: fn.Rotate}}, 200, 100, src},
	} {
		pts := append([][2]float32(nil), src...)
		w, h, err := MoveKeypoints(pts, 200, 100, tc.steps)
		if err != nil || w != tc.w || h != tc.h {
			t.Errorf("%s: %dx%d %v, want %dx%d", tc.name, w, h, err, tc.w, tc.h)
			continue
		}
		for k := range pts {
			if pts[k] != tc.want[k] {
				t.Errorf("%s: point %d %v became %v, want %v", tc.name, k, src[k], pts[k], tc.want[k])
			}
		}
	}
	for _, f := range []fn.Fn{fn.MixBegin, fn.MixChain, fn.SanitizeBoxes, fn.ConvertBoxFormat, fn.Fn(fn.Count())} {
		pts := append([][2]float32(nil), src...)
		if _, _, err := MoveKeypoints(pts, 200, 100, []fn.Step{{Fn: f}}); !errors.Is(err, errs.Unsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", f, err)
		}
	}
	// A point turned about a given center by 90 degrees (torchvision's
	// rotate is counter-clockwise on the image: (x, y) about (cx, cy) goes
	// to (cx + (y - cy), cy - (x - cx))).
	pts := [][2]float32{{30, 10}}
	if _, _, err := MoveKeypoints(pts, 200, 100, []fn.Step{{Fn: fn.Rotate, F: [6]float64{90}, Center: [2]float64{20, 20}, HasCenter: true}}); err != nil ||
		math.Abs(float64(pts[0][0]-10)) > 1e-5 || math.Abs(float64(pts[0][1]-10)) > 1e-5 {
		t.Errorf("rotate 90 about (20, 20): %v %v, want about (10, 10)", pts, err)
	}
}

// TestTargetsKeypoints: Move moves the keypoints with the boxes, and a
// sanitize drops the instances' points with their boxes.
func TestTargetsKeypoints(t *testing.T) {
	var tg targets.Targets
	tg.P = 2
	tg.Add([4]float32{10, 10, 20, 20}, 1, false) // kept
	addPoints(&tg, []float64{12, 13, 2, 0, 0, 0})
	tg.Add([4]float32{0, 0, 0.5, 30}, 2, false) // too thin: dropped
	addPoints(&tg, nil)
	tg.Add([4]float32{30, 40, 90, 80}, 3, true) // kept
	addPoints(&tg, []float64{31.5, 41, 1, 89, 79, 2})
	w, h, err := MoveTargets(&tg, 200, 100, []fn.Step{{Fn: fn.HorizontalFlip}, {Fn: fn.SanitizeBoxes, F: [6]float64{1, 1}}, {Fn: fn.Pad, I: [6]int{1, 2, 0, 0}}})
	if err != nil || w != 201 || h != 102 {
		t.Fatalf("%dx%d %v", w, h, err)
	}
	wantPts := [][2]float32{{188, 15}, {200, 2}, {168.5, 43}, {111, 81}}
	if len(tg.Labels) != 2 || tg.Labels[0] != 1 || tg.Labels[1] != 3 || len(tg.Points) != 4 {
		t.Fatalf("labels %v points %v", tg.Labels, tg.Points)
	}
	for k := range wantPts {
		if tg.Points[k] != wantPts[k] {
			t.Errorf("point %d: %v, want %v", k, tg.Points[k], wantPts[k])
		}
	}
	if string(tg.Vis) != "\x02\x00\x01\x02" {
		t.Errorf("visibilities %v", tg.Vis)
	}
	// A step the keypoints do not support is an error of the whole move.
	if _, _, err := MoveTargets(&tg, 200, 100, []fn.Step{{Fn: fn.MixBegin}}); !errors.Is(err, errs.Unsupported) {
		t.Errorf("%v", err)
	}
}

// TestAppendTargetsKeypoints checks the wire layout with keypoints
// (docs/detection.md) and that TargetsSize is exact; without keypoints
// the bytes are those of before them (TestAppendTargets).
func TestAppendTargetsKeypoints(t *testing.T) {
	tg := targets.Targets{Instances: Instances{ImageID: 9}, W: 64, H: 48}
	tg.P = 3
	tg.Add([4]float32{1, 2, 3, 4}, 5, true)
	addPoints(&tg, []float64{1.5, 2.5, 2, 0, 0, 0, -7, 1e9, 1})
	tg.Add([4]float32{5, 6, 7, 8}, 6, false)
	addPoints(&tg, []float64{9, 10, 1, 11, 12, 2, 13, 14, 2})
	tg.Format = targets.BoxCXCYWH
	b := targets.AppendTargets(nil, &tg)
	le := binary.LittleEndian
	k, p := 2, 3
	if int64(len(b)) != targets.TargetsSize(k, p) || len(b) != 24+25*k+9*k*p {
		t.Fatalf("%d bytes, TargetsSize %d", len(b), targets.TargetsSize(k, p))
	}
	if le.Uint32(b[16:]) != 2 || le.Uint32(b[20:]) != uint32(targets.BoxCXCYWH)|3<<8 {
		t.Errorf("header % x", b[:24])
	}
	for j, pt := range tg.Points {
		at := 24 + 24*k + 8*j
		if x, y := math.Float32frombits(le.Uint32(b[at:])), math.Float32frombits(le.Uint32(b[at+4:])); x != pt[0] || y != pt[1] {
			t.Errorf("point %d: (%v, %v), want %v", j, x, y, pt)
		}
	}
	crowd := 24 + 24*k + 8*k*p
	if b[crowd] != 1 || b[crowd+1] != 0 || string(b[crowd+k:]) != "\x02\x00\x01\x01\x02\x02" {
		t.Errorf("crowd and visibility % x", b[crowd:])
	}
	if l := int64(le.Uint64(b[24+16*k+8:])); l != 6 {
		t.Errorf("label 1: %d", l)
	}
	// Without keypoints: 24 + 25K, the format word the format alone.
	var plain targets.Targets
	plain.Add([4]float32{1, 2, 3, 4}, 5, true)
	if b := targets.AppendTargets(nil, &plain); len(b) != 24+25 || le.Uint32(b[20:]) != 0 || int64(len(b)) != targets.TargetsSize(1, 0) {
		t.Errorf("without keypoints: %d bytes, % x", len(b), b[:24])
	}
}

// addPoints appends one instance's tg.P points from COCO-style (x, y, v)
// triplets, (0, 0) with visibility 0 past them, as pipeline/dataset's COCO
// source gives them (its TestSourceKeypoints checks that side).
func addPoints(tg *targets.Targets, kp []float64) {
	for j := range tg.P {
		if 3*j+2 < len(kp) {
			tg.Points = append(tg.Points, [2]float32{float32(kp[3*j]), float32(kp[3*j+1])})
			tg.Vis = append(tg.Vis, uint8(kp[3*j+2]))
			continue
		}
		tg.Points, tg.Vis = append(tg.Points, [2]float32{}), append(tg.Vis, 0)
	}
}
