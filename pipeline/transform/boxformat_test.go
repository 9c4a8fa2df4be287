package transform

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// TestConvertBoxFormat: ConvertBoundingBoxFormat delivers the boxes as
// torchvision's convert_bounding_box_format computes them from XYXY (in
// float32), the format in the targets' header; it must come after every op
// that moves or drops boxes (its own arguments, and its place inside a
// container, are pipeline/ops' TestTargetOpsRefused).
func TestConvertBoxFormat(t *testing.T) {
	for _, tc := range []struct {
		f    targets.BoxFormat
		want [4]float32
	}{
		{targets.BoxXYXY, [4]float32{1.5, 2.25, 10.75, 7}},
		{targets.BoxXYWH, [4]float32{1.5, 2.25, 9.25, 4.75}},
		// w = 9.25, cx = (3 + 9.25) / 2; h = 4.75, cy = (4.5 + 4.75) / 2
		{targets.BoxCXCYWH, [4]float32{6.125, 4.625, 9.25, 4.75}},
	} {
		tg := targets.Targets{Instances: Instances{Boxes: [][4]float32{{1.5, 2.25, 10.75, 7}}, Labels: []int64{3}, Crowd: []uint8{0}}}
		w, h, err := MoveTargets(&tg, 20, 10, []fn.Step{{Fn: fn.ConvertBoxFormat, I: [6]int{int(tc.f)}}, {Fn: fn.AdjustBrightness, F: [6]float64{1.2}}})
		if err != nil || w != 20 || h != 10 || tg.Format != tc.f || tg.Boxes[0] != tc.want {
			t.Errorf("%s: %v %v (%dx%d, %v), want %v", tc.f, tg.Boxes, tg.Format, w, h, err, tc.want)
		}
		b := targets.AppendTargets(nil, &tg)
		if got := binary.LittleEndian.Uint32(b[20:]); got != uint32(tc.f) {
			t.Errorf("%s: header's format %d", tc.f, got)
		}
		if _, _, err := MoveTargets(&tg, 20, 10, []fn.Step{{Fn: fn.HorizontalFlip}}); tc.f != targets.BoxXYXY && !errors.Is(err, errs.Unsupported) {
			t.Errorf("%s: a flip after the conversion: %v", tc.f, err)
		}
	}
	if f, err := targets.ParseBoxFormat("cxcywh"); err != nil || f != targets.BoxCXCYWH {
		t.Errorf("cxcywh: %v %v", f, err)
	}
	if _, err := targets.ParseBoxFormat("XYWHR"); err == nil || !strings.Contains(err.Error(), "rotated formats are not supported") {
		t.Errorf("XYWHR: %v", err)
	}
	resize := optab.Op{Kind: OpResize, Size: [2]int{32, 32}}
	conv := optab.Op{Kind: optab.OpConvertBoundingBoxFormat, Args: &optab.BoxFormatArgs{Format: targets.BoxCXCYWH}}
	if _, err := NewTransform(CHW, resize, conv, optab.Op{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.2}}, photometricOp(), optab.Op{Kind: optab.OpNormalize, Args: &optab.NormalizeArgs{Mean: fn.ImagenetMean, Std: fn.ImagenetStd}}); err != nil {
		t.Errorf("pixel ops and Normalize after it: %v", err)
	}
	// A container of pixel ops after it, as torchvision takes it (it was
	// refused as a container, whatever it held).
	jitter := optab.Op{Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.2}}, {Kind: optab.OpRandomGrayscale, P: 0.1}}}
	if _, err := NewTransform(CHW, resize, conv, jitter, optab.Op{Kind: optab.OpRandomChoice, Ops: []optab.Op{jitter, photometricOp()}}); err != nil {
		t.Errorf("containers of pixel ops after it: %v", err)
	}
	for _, tc := range []struct {
		ops  []optab.Op
		want string
	}{
		{[]optab.Op{resize, conv, {Kind: optab.OpRandomHorizontalFlip, P: 0.5}}, "op 2 (RandomHorizontalFlip) after ConvertBoundingBoxFormat (op 1)"},
		{[]optab.Op{resize, conv, {Kind: optab.OpSanitizeBoundingBoxes, Args: &optab.SanitizeArgs{MinSize: 1, MinArea: 1}}}, "(SanitizeBoundingBoxes) after ConvertBoundingBoxFormat"},
		{[]optab.Op{resize, conv, conv}, "(ConvertBoundingBoxFormat) after ConvertBoundingBoxFormat"},
		{[]optab.Op{resize, conv, {Kind: optab.OpRandomApply, P: 0.5, Ops: []optab.Op{{Kind: optab.OpColorJitter, Args: &optab.ColorJitterArgs{Brightness: 0.2}}, {Kind: optab.OpRandomHorizontalFlip, P: 0.5}}}}, "op 2 (RandomApply) after ConvertBoundingBoxFormat (op 1)"},
	} {
		_, err := NewTransform(CHW, tc.ops...)
		if err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(tc.ops), err, tc.want)
		}
	}
	if NeedsTargets(mustTransform(t, CHW, resize, conv)) == "" {
		t.Error("ConvertBoundingBoxFormat does not need targets")
	}
}
