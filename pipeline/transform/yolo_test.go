package transform_test

import (
	"slices"
	"strings"
	"testing"

	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestYOLOGeometryRefused: the YOLO geometry's grammar, and its ops'
// arguments, refused with what to do.
func TestYOLOGeometryRefused(t *testing.T) {
	load := optab.Op{Kind: transform.OpYOLOLoadImage, ImgSz: 640}
	lb := optab.Op{Kind: transform.OpYOLOLetterBox, Size: [2]int{640, 640}, Stride: 32}
	persp := optab.Op{Kind: transform.OpYOLORandomPerspective, YScale: 0.5}
	for _, c := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{lb}, "starts with YOLOLoadImage"},
		{[]optab.Op{load}, "size of its own"},
		{[]optab.Op{load, persp}, "size of its own"},
		{[]optab.Op{load, persp, lb}, "in that order"},
		{[]optab.Op{load, {Kind: transform.OpYOLOLetterBox, Size: [2]int{640, 640}, Stride: 32, Auto: true}}, "auto=True"},
		{[]optab.Op{load, lb, {Kind: transform.OpYOLORandomPerspective, YScale: 1.5}}, "scale 0..0.99"},
		{[]optab.Op{load, lb, {Kind: transform.OpYOLORandomFlip, P: 0.5, Direction: "sideways"}}, "direction"},
		{[]optab.Op{load, lb, {Kind: transform.OpYOLORandomFlip, P: 0.5, Direction: "horizontal", FlipIdx: []int{0, 2}}}, "flip_idx"},
		{[]optab.Op{load, lb, {Kind: optab.OpColorJitter, Brightness: 0.1}, load}, "YOLOLoadImage after other ops"},
		{[]optab.Op{{Kind: transform.OpResize, Size: [2]int{64, 64}}, lb}, "YOLOLetterBox after other ops"},
	} {
		_, err := transform.NewTransform(transform.CHW, c.ops...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(c.ops), err, c.want)
		}
	}
	if _, err := transform.NewTransform(transform.CHW, load, optab.Op{Kind: transform.OpYOLORandomPerspective, YScale: 0.5, YSize: [2]int{320, 256}}); err != nil {
		t.Errorf("YOLORandomPerspective(size=(320, 256)) as the geometry: %v", err)
	}
}

// TestYOLONamedArgs: the named ops' arguments as the wire gives them (a
// size of one number or two, a flip_idx list, None), and masks refused.
func TestYOLONamedArgs(t *testing.T) {
	ops := yoloOps(t, "YOLOLoadImage", map[string]any{"imgsz": 320.0}, "YOLOLetterBox", map[string]any{"new_shape": []float64{256, 384}},
		"YOLORandomPerspective", map[string]any{"size": []float64{300}, "perspective": 0.001},
		"YOLORandomFlip", map[string]any{"flip_idx": []float64{1, 0, 2}, "direction": "vertical"})
	if ops[0].ImgSz != 320 || ops[1].Size != [2]int{256, 384} || !ops[1].ScaleUp || !ops[1].LetterCenter || ops[1].Stride != 32 ||
		ops[2].YSize != [2]int{300, 300} || ops[2].YScale != 0.5 || ops[3].P != 0.5 || !slices.Equal(ops[3].FlipIdx, []int{1, 0, 2}) {
		t.Fatalf("%s", optab.OpsString(ops))
	}
	def := yoloOps(t, "YOLORandomPerspective", map[string]any{}, "YOLORandomFlip", map[string]any{})
	if def[0].YSize != [2]int{} || def[1].FlipIdx != nil || def[1].Direction != "horizontal" {
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
