package transform

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

func TestPresets(t *testing.T) {
	for _, name := range PresetNames() {
		for _, layout := range []Layout{CHW, HWC} {
			tr, err := ParseTransform(name, layout)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			side := map[string]int{"tv-resnet50-v2": 176, "dino-local": 96, "detr": 640, "ssdlite": 320, "lsj": 1024, "frcnn": 1333, "yolo": 640, "yolo-letterbox": 640, "segref": 480}[name]
			if side == 0 {
				side = 224
			}
			if h, w := tr.Size(); h != side || w != side || tr.Varies() != (name == "frcnn") {
				t.Errorf("%s: size %dx%d, varies %v; want %dx%d", name, h, w, tr.Varies(), side, side)
			}
			bytes := 3 * side * side
			if tr.Varies() {
				bytes += SizeTrailer // each sample's size and its image's after its pixels
			}
			if _, views := ViewPreset(name); views {
				bytes = 0 // TestViewPresets checks their views
				for v := range tr.Views() {
					bytes += tr.View(v).SampleBytes()
				}
			}
			if tr.Float() || tr.Layout() != layout || tr.SampleBytes() != bytes {
				t.Errorf("%s: float %v layout %v bytes %d", name, tr.Float(), tr.Layout(), tr.SampleBytes())
			}
		}
	}
	if _, err := ParseTransform("imagenet-test", CHW); !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "imagenet-train") {
		t.Errorf("unknown preset: %v, want ErrUnsupported listing the known presets", err)
	}
	// Preset returns a copy: changing it must not change the preset.
	ops, _ := Preset("imagenet-train")
	ops[0].Size = [2]int{1, 1}
	if again, _ := Preset("imagenet-train"); again[0].Size != [2]int{224, 224} {
		t.Errorf("Preset shares its op list with callers")
	}
}

func TestTransformDefaults(t *testing.T) {
	tr := mustTransform(t, CHW, optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{160, 0}})
	a := optab.ArgsOf[RRCArgs](&tr.Ops()[0])
	if a.Scale != [2]float64{0.08, 1} || a.Ratio != [2]float64{3.0 / 4, 4.0 / 3} {
		t.Errorf("RandomResizedCrop defaults: scale %v ratio %v", a.Scale, a.Ratio)
	}
	if h, w := tr.Size(); h != 160 || w != 160 {
		t.Errorf("RandomResizedCrop(160): size %dx%d, want a square", h, w)
	}
	if s := tr.String(); s != "RandomResizedCrop(160x160)" {
		t.Errorf("String() = %q", s)
	}
}

// TestTransformRejects: every bad op list is an error that wraps
// ErrUnsupported and says what is wrong. The ops' own arguments are
// pipeline/ops' to refuse (its tests: TestColorJitterRefused,
// TestBlurRefused, TestContainerRefused, TestNormalizeChecked, ...):
// here one of each ("jitter negative", "Normalize std 0") shows their
// errors come through NewTransform with the op's place in the list.
func TestTransformRejects(t *testing.T) {
	rrc := optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{224, 224}}
	cc := optab.Op{Kind: OpCenterCrop, Size: [2]int{224, 224}}
	resize := optab.Op{Kind: OpResize, Size: [2]int{256, 0}}
	flip := optab.Op{Kind: optab.OpRandomHorizontalFlip, P: 0.5}
	norm := optab.Op{Kind: optab.OpNormalize, Args: &optab.NormalizeArgs{Mean: [3]float64{0.5, 0.5, 0.5}, Std: [3]float64{0.2, 0.2, 0.2}}}
	jit := optab.Op{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.4}}
	for _, tc := range []struct {
		name   string
		layout Layout
		ops    []optab.Op
		msg    string // the error must contain this
	}{
		{"no ops", CHW, nil, "no geometry op"},
		{"flip only", CHW, []optab.Op{flip}, "the first op must be the geometry"},
		{"resize shorter side alone", CHW, []optab.Op{resize}, "add CenterCrop"},
		{"two RandomResizedCrop", CHW, []optab.Op{rrc, rrc}, "only geometry op"},
		{"RandomResizedCrop and CenterCrop", CHW, []optab.Op{rrc, cc}, "CenterCrop must follow"},
		{"CenterCrop and RandomResizedCrop", CHW, []optab.Op{cc, rrc}, "only geometry op"},
		{"CenterCrop before Resize", CHW, []optab.Op{cc, resize}, "Resize must come first"},
		{"two Resize", CHW, []optab.Op{resize, resize, cc}, "Resize must come first"},
		{"two CenterCrop", CHW, []optab.Op{cc, cc}, "CenterCrop must follow"},
		{"geometry after flip", CHW, []optab.Op{flip, rrc}, "op 0 is RandomHorizontalFlip: the first op must be the geometry"},
		{"flip after Normalize", CHW, []optab.Op{rrc, norm, flip}, "op 1 (Normalize): Normalize must come once, last"},
		{"jitter after Normalize", CHW, []optab.Op{rrc, norm, jit}, "Normalize must come once, last"},
		{"two Normalize", CHW, []optab.Op{rrc, norm, norm}, "Normalize must come once"},
		{"flip p=2", CHW, []optab.Op{rrc, {Kind: optab.OpRandomHorizontalFlip, P: 2}}, "p=2"},
		{"flip p<0", CHW, []optab.Op{rrc, {Kind: optab.OpRandomHorizontalFlip, P: -0.1}}, "p=-0.1"},
		{"flip p NaN", CHW, []optab.Op{rrc, {Kind: optab.OpRandomHorizontalFlip, P: math.NaN()}}, "p=NaN"},
		{"size 0", CHW, []optab.Op{{Kind: OpRandomResizedCrop}}, "sides must be in 1..4096"},
		{"size over 4096", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{4097, 224}}}, "sides must be in 1..4096"},
		{"width over 4096", CHW, []optab.Op{{Kind: OpCenterCrop, Size: [2]int{224, 5000}}}, "sides must be in 1..4096"},
		{"negative width", CHW, []optab.Op{{Kind: OpResize, Size: [2]int{224, -1}}}, "sides must be in 1..4096"},
		{"resize 0", CHW, []optab.Op{{Kind: OpResize}, cc}, "sides must be in 1..4096"},
		{"scale above 1", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Scale: [2]float64{0.5, 1.5}}}}, "scale"},
		{"scale reversed", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Scale: [2]float64{0.9, 0.1}}}}, "scale"},
		{"scale NaN", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Scale: [2]float64{math.NaN(), 1}}}}, "scale"},
		{"ratio zero", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Ratio: [2]float64{0, 1}}}}, "ratio"},
		{"ratio infinite", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Ratio: [2]float64{1, math.Inf(1)}}}}, "ratio"},
		{"ratio degenerate", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Ratio: [2]float64{1e-300, 1e-299}}}}, "every crop would be empty"},
		{"ratio degenerate high", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Ratio: [2]float64{1e6, 1e7}}}}, "every crop would be empty"},
		{"ratio reversed", CHW, []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{8, 8}, Args: &RRCArgs{Ratio: [2]float64{2, 1}}}}, "ratio"},
		{"Normalize std 0", CHW, []optab.Op{rrc, {Kind: optab.OpNormalize, Args: &optab.NormalizeArgs{Std: [3]float64{0.2, 0, 0.2}}}}, "want finite mean and finite std > 0"},
		{"jitter negative", CHW, []optab.Op{rrc, {Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Contrast: -1}}}, "op 1 (ColorJitter): contrast -1"},
		{"two Normalize", CHW, []optab.Op{rrc, norm, jit, norm}, "op 1 (Normalize): Normalize must come once, last"},
		{"geometry in a container", CHW, []optab.Op{rrc, {Kind: optab.OpRandomChoice, Ops: []optab.Op{rrc}}}, "a geometry op inside a container"},
		{"geometry second", CHW, []optab.Op{rrc, flip, rrc}, "op 2 (RandomResizedCrop): a geometry op after other ops"},
		{"rotation bicubic", CHW, []optab.Op{rrc, {Kind: OpRandomRotation, Args: &RotationArgs{Degrees: [2]float64{-10, 10}, Resampling: optab.Resampling{Interp: InterpBicubic}}}}, "interpolation bicubic"},
		{"bad layout", Layout(7), []optab.Op{rrc}, "layout 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := NewTransform(tc.layout, tc.ops...)
			if err == nil {
				t.Fatalf("accepted: %v", tr)
			}
			if !errors.Is(err, errs.Unsupported) {
				t.Errorf("error %q does not wrap ErrUnsupported", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

func TestTransformAccepts(t *testing.T) {
	norm := optab.Op{Kind: optab.OpNormalize, Args: &optab.NormalizeArgs{Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}}}
	for _, tc := range []struct {
		name string
		ops  []optab.Op
		h, w int
	}{
		{"resize both sides", []optab.Op{{Kind: OpResize, Size: [2]int{100, 200}}}, 100, 200},
		{"resize and crop", []optab.Op{{Kind: OpResize, Size: [2]int{256, 0}}, {Kind: OpCenterCrop, Size: [2]int{224, 0}}}, 224, 224},
		{"center crop alone", []optab.Op{{Kind: OpCenterCrop, Size: [2]int{30, 40}}}, 30, 40},
		{"max side", []optab.Op{{Kind: OpRandomResizedCrop, Size: [2]int{4096, 1}}}, 4096, 1},
		{"full chain", []optab.Op{
			{Kind: OpRandomResizedCrop, Size: [2]int{64, 48}},
			{Kind: optab.OpRandomHorizontalFlip, P: 1},
			{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.4, Contrast: 0.4, Saturation: 0.4}},
			norm,
		}, 64, 48},
		{"flip p=0", []optab.Op{{Kind: OpCenterCrop, Size: [2]int{8, 8}}, {Kind: optab.OpRandomHorizontalFlip}}, 8, 8},
		{"any order", []optab.Op{{Kind: OpCenterCrop, Size: [2]int{8, 8}}, optab.ColorJitterOp(0.4, 0, 0, 0.1), {Kind: optab.OpRandomHorizontalFlip, P: 0.5},
			{Kind: optab.OpRandomHorizontalFlip, P: 0.5}, {Kind: OpRandomRotation, Args: &RotationArgs{Degrees: [2]float64{-5, 5}}}, norm}, 8, 8},
		{"nested", []optab.Op{{Kind: OpCenterCrop, Size: [2]int{8, 8}}, nest(4)}, 8, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustTransform(t, CHW, tc.ops...)
			if h, w := tr.Size(); h != tc.h || w != tc.w {
				t.Errorf("size %dx%d, want %dx%d", h, w, tc.h, tc.w)
			}
		})
	}
}

func TestSampleShape(t *testing.T) {
	rrc := optab.Op{Kind: OpRandomResizedCrop, Size: [2]int{20, 30}}
	norm := optab.Op{Kind: optab.OpNormalize, Args: &optab.NormalizeArgs{Std: [3]float64{1, 1, 1}}}
	for _, tc := range []struct {
		layout Layout
		ops    []optab.Op
		shape  [3]int
		bytes  int
		float  bool
	}{
		{CHW, []optab.Op{rrc}, [3]int{3, 20, 30}, 3 * 20 * 30, false},
		{HWC, []optab.Op{rrc}, [3]int{20, 30, 3}, 3 * 20 * 30, false},
		{CHW, []optab.Op{rrc, norm}, [3]int{3, 20, 30}, 4 * 3 * 20 * 30, true},
		{HWC, []optab.Op{rrc, norm}, [3]int{20, 30, 3}, 4 * 3 * 20 * 30, true},
	} {
		tr := mustTransform(t, tc.layout, tc.ops...)
		if tr.Shape() != tc.shape || tr.SampleBytes() != tc.bytes || tr.Float() != tc.float {
			t.Errorf("%v %v: shape %v bytes %d float %v, want %v %d %v", tc.layout, tr, tr.Shape(), tr.SampleBytes(), tr.Float(), tc.shape, tc.bytes, tc.float)
		}
	}
	if CHW.String() != "CHW" || HWC.String() != "HWC" {
		t.Errorf("layout names %s %s", CHW, HWC)
	}
}

// nest is depth RandomApply containers, one inside the other, around a
// RandomInvert.
func nest(depth int) optab.Op {
	op := optab.Op{Kind: optab.OpRandomInvert, P: 0.5}
	for range depth {
		op = optab.Op{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{op}}
	}
	return op
}

// TestPlacersAreGeometry: every op the geometry's loop places (placers)
// is a registered geometry op, so a placer cannot pull an op of the
// steps after the geometry into it; and every geometry op has a placer
// but PadIfSmaller, which RandomResize's takes with it (op_seg.go): no
// family parses its ops outside the loop.
func TestPlacersAreGeometry(t *testing.T) {
	if len(placers) == 0 {
		t.Fatal("no placers registered")
	}
	for k := range placers {
		if d := optab.Lookup(k); d == nil || !d.Geometry {
			t.Errorf("%s has a placer but is not a registered geometry op", k)
		}
	}
	for _, k := range optab.Kinds() {
		if _, ok := placers[k]; !ok && optab.Lookup(k).Geometry && k != OpPadIfSmaller {
			t.Errorf("%s is a geometry op without a placer", k)
		}
	}
}

// TestPresetCopiesArgs: Preset's ops are a deep copy, each op's typed
// arguments (optab.Op.Args) too: a caller that changes them changes no
// other caller's preset.
func TestPresetCopiesArgs(t *testing.T) {
	a, err := Preset("yolo")
	if err != nil {
		t.Fatal(err)
	}
	optab.ArgsAt[MosaicArgs](&a[0]).ImgSz = 320
	optab.ArgsAt[YOLOFlipArgs](&a[3]).Direction = "vertical"
	b, err := Preset("yolo")
	if err != nil {
		t.Fatal(err)
	}
	if m, f := optab.ArgsOf[MosaicArgs](&b[0]), optab.ArgsOf[YOLOFlipArgs](&b[3]); m.ImgSz != 640 || f.Direction != "horizontal" {
		t.Errorf("a change to one Preset(\"yolo\")'s arguments reached the next: %+v, %+v", m, f)
	}
}
