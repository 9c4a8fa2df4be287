package transform_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/testops"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestYOLOGeometryRefused: the YOLO geometry's places (its placers), and
// its ops' arguments, refused with what to do.
func TestYOLOGeometryRefused(t *testing.T) {
	load := optab.Op{Kind: transform.OpYOLOLoadImage, Args: &transform.YOLOLoadImageArgs{ImgSz: 640}}
	lb := optab.Op{Kind: transform.OpYOLOLetterBox, Args: &transform.YOLOLetterBoxArgs{NewShape: [2]int{640, 640}, Stride: 32}}
	persp := optab.Op{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Scale: 0.5}}
	for _, c := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{lb}, "starts with YOLOLoadImage"},
		{[]optab.Op{load}, "size of its own"},
		{[]optab.Op{load, persp}, "size of its own"},
		{[]optab.Op{load, persp, lb}, "in that order"},
		{[]optab.Op{load, {Kind: transform.OpYOLOLetterBox, Args: &transform.YOLOLetterBoxArgs{NewShape: [2]int{640, 640}, Stride: 32, Auto: true}}}, "auto=True"},
		{[]optab.Op{load, lb, {Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Scale: 1.5}}}, "scale 0..0.99"},
		{[]optab.Op{load, lb, {Kind: transform.OpYOLORandomFlip, P: 0.5, Args: &transform.YOLOFlipArgs{Direction: "sideways"}}}, "direction"},
		{[]optab.Op{load, lb, {Kind: transform.OpYOLORandomFlip, P: 0.5, Args: &transform.YOLOFlipArgs{Direction: "horizontal", FlipIdx: []int{0, 2}}}}, "flip_idx"},
		{[]optab.Op{load, lb, {Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.1}}, load}, "op 3 (YOLOLoadImage): YOLOLoadImage after other ops"},
		{[]optab.Op{{Kind: transform.OpResize, Size: [2]int{64, 64}}, lb}, "op 1 (YOLOLetterBox): YOLOLetterBox after other ops"},
		{[]optab.Op{{Kind: transform.OpResize, Size: [2]int{64, 64}}, persp}, "YOLORandomPerspective after other ops"},
		{[]optab.Op{load, lb, lb}, "in that order"},
		{[]optab.Op{load, persp, persp}, "in that order"},
		// A geometry op after the YOLO geometry's was once placed and
		// then ignored (the batch the letterbox's size, no crop made).
		{[]optab.Op{load, lb, {Kind: transform.OpCenterCrop, Size: [2]int{32, 32}}}, "op 2 (CenterCrop) after the YOLO geometry"},
		{[]optab.Op{load, {Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Size: [2]int{64, 64}}}, {Kind: transform.OpCenterCrop, Size: [2]int{32, 32}}}, "op 2 (CenterCrop) after the YOLO geometry"},
		{[]optab.Op{load, lb, {Kind: transform.OpRandomCrop, Size: [2]int{32, 32}}}, "op 2 (RandomCrop) after the YOLO geometry"},
		{[]optab.Op{load, lb, {Kind: transform.OpMosaic, P: 1, Args: &transform.MosaicArgs{ImgSz: 64, N: 4}}}, "op 2 (YOLOMosaic) after the YOLO geometry"},
	} {
		_, err := transform.NewTransform(transform.CHW, c.ops...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(c.ops), err, c.want)
		}
	}
	if _, err := transform.NewTransform(transform.CHW, load, optab.Op{Kind: transform.OpYOLORandomPerspective, Args: &transform.YOLOPerspectiveArgs{Scale: 0.5, Size: [2]int{320, 256}}}); err != nil {
		t.Errorf("YOLORandomPerspective(size=(320, 256)) as the geometry: %v", err)
	}
}

// TestYOLONamedArgs: the named ops' arguments as the wire gives them (a
// size of one number or two, a flip_idx list, None), and masks refused.
func TestYOLONamedArgs(t *testing.T) {
	ops := yoloOps(t, "YOLOLoadImage", map[string]any{"imgsz": 320.0}, "YOLOLetterBox", map[string]any{"new_shape": []float64{256, 384}},
		"YOLORandomPerspective", map[string]any{"size": []float64{300}, "perspective": 0.001},
		"YOLORandomFlip", map[string]any{"flip_idx": []float64{1, 0, 2}, "direction": "vertical"})
	load, lb := optab.ArgsOf[transform.YOLOLoadImageArgs](&ops[0]), optab.ArgsOf[transform.YOLOLetterBoxArgs](&ops[1])
	persp, flip := optab.ArgsOf[transform.YOLOPerspectiveArgs](&ops[2]), optab.ArgsOf[transform.YOLOFlipArgs](&ops[3])
	if load.ImgSz != 320 || lb != (transform.YOLOLetterBoxArgs{NewShape: [2]int{256, 384}, ScaleUp: true, Center: true, Stride: 32}) ||
		persp.Size != [2]int{300, 300} || persp.Scale != 0.5 || ops[3].P != 0.5 || !slices.Equal(flip.FlipIdx, []int{1, 0, 2}) {
		t.Fatalf("%s", optab.OpsString(ops))
	}
	def := yoloOps(t, "YOLORandomPerspective", map[string]any{}, "YOLORandomFlip", map[string]any{})
	dp, df := optab.ArgsOf[transform.YOLOPerspectiveArgs](&def[0]), optab.ArgsOf[transform.YOLOFlipArgs](&def[1])
	if dp.Size != [2]int{} || df.FlipIdx != nil || df.Direction != "horizontal" {
		t.Fatalf("defaults: %s", optab.OpsString(def))
	}
	if _, err := optab.NamedOp("YOLORandomFlip", map[string]any{"flip_idx": []float64{0.5}}); err == nil {
		t.Error("flip_idx [0.5] accepted")
	}
	tf, err := transform.NewTransform(transform.CHW, ops...)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := tf.Size(); h != 300 || w != 300 {
		t.Fatalf("size %dx%d, want the perspective's 300x300", w, h)
	}
	if err := transform.CheckMasks(tf); err == nil || !strings.Contains(err.Error(), "masks do not follow") {
		t.Errorf("masks with the YOLO ops: %v", err)
	}
	if err := transform.CheckTargets(tf); err != nil {
		t.Errorf("targets with the YOLO ops: %v", err)
	}
}

// TestYOLOTargets: the targets through the recipe's trace are the cv
// kernels' moves of the source boxes (load's scale, LetterBoxInstances,
// PerspectiveInstances, the flip), labels and keypoints with them.
func TestYOLOTargets(t *testing.T) {
	ops := testops.Letterbox(t)
	optab.ArgsAt[transform.YOLOFlipArgs](&ops[4]).FlipIdx = []int{1, 0} // ops made here, by name: their arguments are theirs alone
	tf, err := transform.NewTransform(transform.CHW, ops...)
	if err != nil {
		t.Fatal(err)
	}
	const W, H = 800, 533
	for i := range 40 {
		k := det.Key{Seed: 3, Index: uint64(i)}
		var tg targets.Targets
		tg.P = 2
		for j := range 5 {
			x, y := float32(37*j+5*i), float32(29*j+3)
			tg.Add([4]float32{x, y, x + 150, y + 90}, int64(j), j == 2)
			tg.Points = append(tg.Points, [2]float32{x + 10, y + 20}, [2]float32{x + 140, y + 1})
			tg.Vis = append(tg.Vis, 2, 1)
		}
		trace, err := tf.Trace(W, H, k)
		if err != nil {
			t.Fatal(err)
		}
		steps, err := transform.ParseTrace(trace)
		if err != nil {
			t.Fatal(err)
		}
		in := fn.CVInstances(&tg)
		lw, lh := cv.LoadSize(W, H, 640)
		in.Scale(float32(float64(lw)/W), float32(float64(lh)/H), false)
		g := cv.LetterBoxParams(cv.LetterBoxArgs{H: 640, W: 640, Center: true, Stride: 32}, lw, lh)
		cv.LetterBoxInstances(&in, g)
		pp := fn.PerspectiveOf(&steps[2])
		out := cv.PerspectiveInstances(in, cv.PerspectiveMatrix(pp, 640, 640, 640, 640), pp.Scale, false, 640, 640)
		flipped := steps[len(steps)-1].Fn == fn.YOLOFlipLR
		if flipped {
			cv.FlipInstances(&out, 640)
			for _, kp := range out.Keypoints {
				kp[0], kp[1] = kp[1], kp[0]
			}
		}
		w, h, err := transform.MoveTargets(&tg, W, H, steps)
		if err != nil {
			t.Fatal(err)
		}
		if w != 640 || h != 640 || len(tg.Boxes) != len(out.Boxes) {
			t.Fatalf("sample %d: %dx%d with %d boxes, want 640x640 with %d", i, w, h, len(tg.Boxes), len(out.Boxes))
		}
		for n, idx := range out.Cls {
			if tg.Boxes[n] != out.Boxes[n] || tg.Labels[n] != idx || (tg.Crowd[n] == 1) != (idx == 2) {
				t.Fatalf("sample %d: instance %d: %v label %d, want %v label %d", i, n, tg.Boxes[n], tg.Labels[n], out.Boxes[n], idx)
			}
			for j, p := range out.Keypoints[n] {
				if tg.Points[2*n+j] != [2]float32{p[0], p[1]} || tg.Vis[2*n+j] != uint8(p[2]) {
					t.Fatalf("sample %d: instance %d point %d: %v %d, want %v", i, n, j, tg.Points[2*n+j], tg.Vis[2*n+j], p)
				}
			}
		}
	}
}
