package transform

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// TestClampBoxesEveryFormat: ClampBoundingBoxes clamps the boxes in their
// format as torchvision's _clamp_bounding_boxes does (to XYXY, clamped,
// back), so it may follow a ConvertBoundingBoxFormat.
func TestClampBoxesEveryFormat(t *testing.T) {
	for _, tc := range []struct {
		f       targets.BoxFormat
		in, out [4]float32
	}{
		{targets.BoxXYXY, [4]float32{-1.5, 2, 25, 11}, [4]float32{0, 2, 20, 10}},
		// XYXY (-1.5, 2, 8.5, 11), clamped (0, 2, 8.5, 10).
		{targets.BoxXYWH, [4]float32{-1.5, 2, 10, 9}, [4]float32{0, 2, 8.5, 8}},
		// XYXY (-2, 3, 8, 7), clamped (0, 3, 8, 7): cx (0 * 2 + 8) / 2.
		{targets.BoxCXCYWH, [4]float32{3, 5, 10, 4}, [4]float32{4, 5, 8, 4}},
		// Inside, yet the round trip through XYXY rounds w and h, as
		// torchvision's F.clamp_bounding_boxes gives them.
		{targets.BoxCXCYWH, [4]float32{10.1, 5.3, 3.7, 2.9}, [4]float32{10.1, 5.3, 3.6999998092651367, 2.8999998569488525}},
	} {
		tg := targets.Targets{Format: tc.f}
		tg.Add(tc.in, 1, false)
		w, h, err := MoveTargets(&tg, 20, 10, []fn.Step{{Fn: fn.ClampBoxes}})
		if err != nil || w != 20 || h != 10 || tg.Boxes[0] != tc.out {
			t.Errorf("%s %v: %v (%dx%d, %v), want %v", tc.f, tc.in, tg.Boxes[0], w, h, err, tc.out)
		}
	}
	nan := float32(math.NaN())
	b := [][4]float32{{nan, -1, 3, 4}}
	targets.ClampBoxesAs(b, targets.BoxXYXY, 20, 10)
	if !math.IsNaN(float64(b[0][0])) || b[0][1] != 0 {
		t.Errorf("a NaN stays NaN (torch.clamp): %v", b[0])
	}
	if _, _, err := MoveBoxes(b, 20, 10, []fn.Step{{Fn: fn.ClampBoxes}}); !errors.Is(err, errs.Unsupported) {
		t.Errorf("MoveBoxes of a clamp: %v, want MoveTargets's", err)
	}
}

// TestClampAndSanitizeKeypoints: ClampKeyPoints clamps x to [0, W - 1]
// and y to [0, H - 1]; SanitizeKeyPoints drops every instance with a
// point outside [0, W) x [0, H) (or NaN) whole: box, label, crowd flag,
// points and visibilities.
func TestClampAndSanitizeKeypoints(t *testing.T) {
	mk := func() *targets.Targets {
		tg := &targets.Targets{}
		tg.P = 2
		tg.Add([4]float32{1, 1, 5, 5}, 1, false)
		addPoints(tg, []float64{0, 0, 0, 19.5, 9.75, 2}) // inside, on the edges' near side
		tg.Add([4]float32{2, 2, 6, 6}, 2, true)
		addPoints(tg, []float64{3, 4, 2, 20, 5, 1}) // x = W: outside
		tg.Add([4]float32{3, 3, 7, 7}, 3, true)
		addPoints(tg, []float64{3, 4, 1, 5, 6, 2})
		tg.Add([4]float32{4, 4, 8, 8}, 4, false)
		addPoints(tg, []float64{math.NaN(), 4, 2, 5, 6, 2}) // NaN: outside
		tg.Add([4]float32{5, 5, 9, 9}, 5, false)
		addPoints(tg, []float64{3, -0.001, 2, 5, 6, 2})
		return tg
	}
	tg := mk()
	if _, _, err := MoveTargets(tg, 20, 10, []fn.Step{{Fn: fn.SanitizeKeypoints}}); err != nil {
		t.Fatal(err)
	}
	wantPts := [][2]float32{{0, 0}, {19.5, 9.75}, {3, 4}, {5, 6}}
	if len(tg.Boxes) != 2 || tg.Labels[0] != 1 || tg.Labels[1] != 3 || tg.Crowd[1] != 1 || tg.Boxes[1] != [4]float32{3, 3, 7, 7} ||
		len(tg.Points) != 4 || string(tg.Vis) != "\x00\x02\x01\x02" {
		t.Fatalf("kept %v %v %v %v %v", tg.Boxes, tg.Labels, tg.Crowd, tg.Points, tg.Vis)
	}
	for k := range wantPts {
		if tg.Points[k] != wantPts[k] {
			t.Errorf("point %d: %v, want %v", k, tg.Points[k], wantPts[k])
		}
	}
	// Clamped first, every instance stays (the NaN too: clamp keeps it,
	// and the sanitize then drops it).
	tg = mk()
	if _, _, err := MoveTargets(tg, 20, 10, []fn.Step{{Fn: fn.ClampKeypoints}}); err != nil {
		t.Fatal(err)
	}
	if tg.Points[3] != [2]float32{19, 5} || tg.Points[8] != [2]float32{3, 0} || tg.Points[1] != [2]float32{19, 9} {
		t.Errorf("clamped: %v", tg.Points)
	}
	if _, _, err := MoveTargets(tg, 20, 10, []fn.Step{{Fn: fn.SanitizeKeypoints}}); err != nil || len(tg.Labels) != 4 {
		t.Errorf("sanitized after the clamp: %v %v", tg.Labels, err)
	}
	// A dataset without keypoints: the clamp leaves it, the sanitize fails.
	var none targets.Targets
	none.Add([4]float32{1, 1, 5, 5}, 1, false)
	if _, _, err := MoveTargets(&none, 20, 10, []fn.Step{{Fn: fn.ClampKeypoints}}); err != nil || len(none.Boxes) != 1 {
		t.Errorf("clamp without keypoints: %v", err)
	}
	if _, _, err := MoveTargets(&none, 20, 10, []fn.Step{{Fn: fn.SanitizeKeypoints}}); err == nil || !strings.Contains(err.Error(), "no keypoints") {
		t.Errorf("sanitize without keypoints: %v", err)
	}
}

// TestClampOpsCompile: the three ops need targets, may follow a
// ConvertBoundingBoxFormat, draw their one step (ClampBoundingBoxes(None)
// none) and are refused where a job has no targets.
func TestClampOpsCompile(t *testing.T) {
	resize := optab.Op{Kind: OpResize, Size: [2]int{32, 32}}
	conv := optab.Op{Kind: optab.OpConvertBoundingBoxFormat, Args: &optab.BoxFormatArgs{Format: targets.BoxCXCYWH}}
	for _, tc := range []struct {
		op   optab.Op
		want []fn.Fn
	}{
		{optab.Op{Kind: optab.OpClampBoundingBoxes}, []fn.Fn{fn.ConvertBoxFormat, fn.ClampBoxes}},
		{optab.Op{Kind: optab.OpClampBoundingBoxes, Args: &optab.ClampArgs{None: true}}, []fn.Fn{fn.ConvertBoxFormat}},
		{optab.Op{Kind: optab.OpClampKeyPoints}, []fn.Fn{fn.ConvertBoxFormat, fn.ClampKeypoints}},
		{optab.Op{Kind: optab.OpSanitizeKeyPoints}, []fn.Fn{fn.ConvertBoxFormat, fn.SanitizeKeypoints}},
	} {
		tr := mustTransform(t, CHW, resize, conv, tc.op, optab.Op{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.2}})
		if s := NeedsTargets(mustTransform(t, CHW, resize, tc.op)); !strings.Contains(s, string(tc.op.Kind)) {
			t.Errorf("%s: NeedsTargets %q", tc.op.Kind, s)
		}
		if err := CheckTargets(tr); err != nil {
			t.Errorf("%s: %v", tc.op.Kind, err)
		}
		var got []fn.Fn
		for _, st := range tr.drawStepsFor(det.Key{Seed: 1}, nil) {
			if st.Fn != fn.AdjustBrightness {
				got = append(got, st.Fn)
			}
		}
		if len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
			t.Errorf("%s: drew %v, want %v", tc.op.Kind, got, tc.want)
		}
	}
}
