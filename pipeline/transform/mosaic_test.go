package transform

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// TestMosaicRefused: Mosaic's arguments and place are checked; it is
// traced without a decode, its partners drawn from the set.
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
	// Traced without a decode, in a set of one: its partners are the
	// image itself, at its load_image size.
	w, h := cv.LoadSize(100, 80, 64)
	want := fmt.Sprintf(`[["yolo_mosaic",{"n":4,"imgsz":64,"indexes":[0,0,0,0],"sizes":[[%d,%d],[%d,%d],[%d,%d],[%d,%d]],`, w, h, w, h, w, h, w, h)
	if js, err := tr.Trace(100, 80, det.Key{}); err != nil || !strings.HasPrefix(string(js), want) {
		t.Errorf("a Mosaic traced in a set of one: %s, %v; want it to start %s", js, err, want)
	}
	if _, err := tr.TraceSet(100, 80, det.Key{}, nil, 0); err == nil {
		t.Error("a Mosaic traced in a set of none")
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
