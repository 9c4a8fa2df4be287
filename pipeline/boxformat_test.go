package pipeline

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// TestConvertBoxFormat: ConvertBoundingBoxFormat delivers the boxes as
// torchvision's convert_bounding_box_format computes them from XYXY (in
// float32), the format in the targets' header; it must come after every op
// that moves or drops boxes, and not inside a container.
func TestConvertBoxFormat(t *testing.T) {
	for _, tc := range []struct {
		f    BoxFormat
		want [4]float32
	}{
		{BoxXYXY, [4]float32{1.5, 2.25, 10.75, 7}},
		{BoxXYWH, [4]float32{1.5, 2.25, 9.25, 4.75}},
		// w = 9.25, cx = (3 + 9.25) / 2; h = 4.75, cy = (4.5 + 4.75) / 2
		{BoxCXCYWH, [4]float32{6.125, 4.625, 9.25, 4.75}},
	} {
		tg := Targets{Instances: Instances{Boxes: [][4]float32{{1.5, 2.25, 10.75, 7}}, Labels: []int64{3}, Crowd: []uint8{0}}}
		w, h, err := MoveTargets(&tg, 20, 10, []Step{{Fn: FnConvertBoxFormat, I: [6]int{int(tc.f)}}, {Fn: FnAdjustBrightness, F: [6]float64{1.2}}})
		if err != nil || w != 20 || h != 10 || tg.Format != tc.f || tg.Boxes[0] != tc.want {
			t.Errorf("%s: %v %v (%dx%d, %v), want %v", tc.f, tg.Boxes, tg.Format, w, h, err, tc.want)
		}
		b := AppendTargets(nil, &tg)
		if got := binary.LittleEndian.Uint32(b[20:]); got != uint32(tc.f) {
			t.Errorf("%s: header's format %d", tc.f, got)
		}
		if _, _, err := MoveTargets(&tg, 20, 10, []Step{{Fn: FnHorizontalFlip}}); tc.f != BoxXYXY && !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: a flip after the conversion: %v", tc.f, err)
		}
	}
	if f, err := ParseBoxFormat("cxcywh"); err != nil || f != BoxCXCYWH {
		t.Errorf("cxcywh: %v %v", f, err)
	}
	if _, err := ParseBoxFormat("XYWHR"); err == nil || !strings.Contains(err.Error(), "rotated formats are not supported") {
		t.Errorf("XYWHR: %v", err)
	}
	resize := Op{Kind: OpResize, Size: [2]int{32, 32}}
	conv := Op{Kind: OpConvertBoundingBoxFormat, BoxFormat: BoxCXCYWH}
	if _, err := NewTransform(CHW, resize, conv, Op{Kind: OpColorJitter, Brightness: 0.2}, photometricOp(), Op{Kind: OpNormalize, Mean: fn.ImagenetMean, Std: fn.ImagenetStd}); err != nil {
		t.Errorf("pixel ops and Normalize after it: %v", err)
	}
	for _, tc := range []struct {
		ops  []Op
		want string
	}{
		{[]Op{resize, conv, {Kind: OpRandomHorizontalFlip, P: 0.5}}, "op 2 (RandomHorizontalFlip) after ConvertBoundingBoxFormat (op 1)"},
		{[]Op{resize, conv, {Kind: OpSanitizeBoundingBoxes, MinSize: 1, MinArea: 1}}, "(SanitizeBoundingBoxes) after ConvertBoundingBoxFormat"},
		{[]Op{resize, conv, conv}, "(ConvertBoundingBoxFormat) after ConvertBoundingBoxFormat"},
		{[]Op{resize, {Kind: OpRandomApply, P: 0.5, Ops: []Op{conv}}}, "inside a container"},
		{[]Op{resize, {Kind: OpConvertBoundingBoxFormat, BoxFormat: 7}}, "format 7"},
	} {
		_, err := NewTransform(CHW, tc.ops...)
		if err == nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", opsString(tc.ops), err, tc.want)
		}
	}
	if NeedsTargets(mustTransform(t, CHW, resize, conv)) == "" {
		t.Error("ConvertBoundingBoxFormat does not need targets")
	}
}
