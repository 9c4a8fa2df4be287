package transform

import (
	"errors"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestMosaicRefused: Mosaic's arguments and place are checked.
func TestMosaicRefused(t *testing.T) {
	for _, ops := range [][]optab.Op{
		{{Kind: OpMosaic, ImgSz: 64, Tiles: 5, P: 1}},
		{{Kind: OpMosaic, ImgSz: 64, Tiles: 4, P: 0.5}},
		{{Kind: OpResize, Size: [2]int{64, 64}}, {Kind: OpMosaic, ImgSz: 64, Tiles: 4, P: 1}},
	} {
		if _, err := NewTransform(CHW, ops...); err == nil || !errors.Is(err, errs.Unsupported) {
			t.Errorf("%v: %v", ops, err)
		}
	}
	tr, err := NewTransform(CHW, optab.Op{Kind: OpMosaic, ImgSz: 64, Tiles: 4, P: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Trace(100, 80, det.Key{}); err == nil || !strings.Contains(err.Error(), "partners") {
		t.Errorf("a Mosaic traced without its partners: %v", err)
	}
	mo := []optab.Op{{Kind: OpMosaic, ImgSz: 64, Tiles: 4, P: 1}}
	if _, err := NewViews(CHW, ViewGroup{Count: 2, Ops: mo}, ViewGroup{Count: 1, Ops: mo}); err == nil || !strings.Contains(err.Error(), "several views") {
		t.Errorf("a Mosaic in views: %v", err)
	}
	op, err := optab.NamedOp("YOLOMosaic", map[string]any{"imgsz": 320.0})
	if err != nil || op.ImgSz != 320 || op.Tiles != 4 || op.P != 1 {
		t.Fatalf("NamedOp: %+v, %v", op, err)
	}
}
