package ops

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// TestTargetOpsDraws: the ops on a job's targets alone draw their one
// step every time, with their arguments (SanitizeBoundingBoxes' bounds,
// ConvertBoundingBoxFormat's format); ClampBoundingBoxes with
// clamping_mode None draws nothing. Each needs targets, and String shows
// its arguments.
func TestTargetOpsDraws(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want []fn.Step
		str  string
	}{
		{Op{Kind: OpSanitizeBoundingBoxes, Args: &SanitizeArgs{MinSize: 2, MinArea: 5}}, []fn.Step{{Fn: fn.SanitizeBoxes, F: [6]float64{2, 5}}}, "SanitizeBoundingBoxes(min_size=2, min_area=5)"},
		{Op{Kind: OpConvertBoundingBoxFormat, Args: &BoxFormatArgs{Format: targets.BoxXYWH}}, []fn.Step{{Fn: fn.ConvertBoxFormat, I: [6]int{int(targets.BoxXYWH)}}}, "ConvertBoundingBoxFormat(XYWH)"},
		{Op{Kind: OpConvertBoundingBoxFormat, Args: &BoxFormatArgs{Format: targets.BoxCXCYWH}}, []fn.Step{{Fn: fn.ConvertBoxFormat, I: [6]int{int(targets.BoxCXCYWH)}}}, "ConvertBoundingBoxFormat(CXCYWH)"},
		{Op{Kind: OpClampBoundingBoxes}, []fn.Step{{Fn: fn.ClampBoxes}}, "ClampBoundingBoxes"},
		{Op{Kind: OpClampBoundingBoxes, Args: &ClampArgs{None: true}}, nil, "ClampBoundingBoxes(None)"},
		{Op{Kind: OpClampKeyPoints}, []fn.Step{{Fn: fn.ClampKeypoints}}, "ClampKeyPoints"},
		{Op{Kind: OpSanitizeKeyPoints}, []fn.Step{{Fn: fn.SanitizeKeypoints}}, "SanitizeKeyPoints"},
	} {
		n := compileOp(t, tc.op)
		for i := range uint64(20) {
			if s := draw(&n, 1, i); len(s) != len(tc.want) || len(s) == 1 && s[0] != tc.want[0] {
				t.Fatalf("%s sample %d drew %+v, want %+v", tc.op.Kind, i, s, tc.want)
			}
		}
		if d := Lookup(tc.op.Kind); !d.NeedsTargets || d.Targets != TargetsInstances {
			t.Errorf("%s: NeedsTargets %v, role %v", tc.op.Kind, d.NeedsTargets, d.Targets)
		}
		if s := OpsString([]Op{tc.op}); s != tc.str {
			t.Errorf("String %q, want %q", s, tc.str)
		}
	}
}

// TestTargetOpsRefused: SanitizeBoundingBoxes' bounds (torchvision's
// at least 1, stoker's at most 1e9), a format stoker does not write, and
// ConvertBoundingBoxFormat inside a container (it comes last, after
// every op that moves boxes).
func TestTargetOpsRefused(t *testing.T) {
	conv := Op{Kind: OpConvertBoundingBoxFormat, Args: &BoxFormatArgs{Format: targets.BoxCXCYWH}}
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: OpSanitizeBoundingBoxes, Args: &SanitizeArgs{MinSize: 0.5, MinArea: 1}}, "op 1 (SanitizeBoundingBoxes): min_size 0.5"},
		{Op{Kind: OpSanitizeBoundingBoxes, Args: &SanitizeArgs{MinSize: 1, MinArea: 2e9}}, "min_area 2e+09"},
		{Op{Kind: OpSanitizeBoundingBoxes, Args: &SanitizeArgs{MinSize: math.NaN(), MinArea: 1}}, "min_size NaN"},
		{Op{Kind: OpConvertBoundingBoxFormat, Args: &BoxFormatArgs{Format: 7}}, "format 7"},
		{Op{Kind: OpRandomApply, P: 0.5, Ops: []Op{conv}}, "inside a container"},
	} {
		refused(t, tc.op, testW, testH, tc.want)
	}
}

// TestNormalizeChecked: Normalize is never compiled as a drawn op (the
// Transform takes it, last, and packs by it); CheckNormalize refuses a
// mean or std whose outputs are not all finite float32s.
func TestNormalizeChecked(t *testing.T) {
	refused(t, Op{Kind: OpNormalize, Args: &NormalizeArgs{Mean: fn.ImagenetMean, Std: fn.ImagenetStd}}, testW, testH, "op 1 (Normalize): Normalize must come once, last")
	if err := CheckNormalize(&Op{Kind: OpNormalize, Args: &NormalizeArgs{Mean: fn.ImagenetMean, Std: fn.ImagenetStd}}); err != nil {
		t.Errorf("ImageNet's: %v", err)
	}
	if err := CheckNormalize(&Op{Kind: OpNormalize, Args: &NormalizeArgs{Mean: [3]float64{-1e3, 0, 1e3}, Std: [3]float64{1e-30, 1, 1}}}); err != nil {
		t.Errorf("outputs of 1e33: %v", err)
	}
	for _, tc := range []struct {
		name      string
		mean, std [3]float64
	}{
		{"std Inf", [3]float64{}, [3]float64{0.2, math.Inf(1), 0.2}},
		{"std tiny", [3]float64{}, [3]float64{0.2, 1e-300, 0.2}},
		{"mean huge", [3]float64{1e300}, [3]float64{1, 1, 1}},
		{"std 0", [3]float64{}, [3]float64{0.2, 0, 0.2}},
		{"std negative", [3]float64{}, [3]float64{0.2, -0.2, 0.2}},
		{"std NaN", [3]float64{}, [3]float64{0.2, math.NaN(), 0.2}},
		{"mean Inf", [3]float64{math.Inf(1)}, [3]float64{1, 1, 1}},
		{"mean NaN", [3]float64{0, 0, math.NaN()}, [3]float64{1, 1, 1}},
	} {
		err := CheckNormalize(&Op{Kind: OpNormalize, Args: &NormalizeArgs{Mean: tc.mean, Std: tc.std}})
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), "want finite mean and finite std > 0") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
