package transform

import (
	"errors"
	"fmt"
	"reflect"
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
		{{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 64, N: 5}}},
		{{Kind: OpMosaic, P: 0.5, Args: &MosaicArgs{ImgSz: 64, N: 4}}},
		{{Kind: OpResize, Size: [2]int{64, 64}}, {Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 64, N: 4}}},
	} {
		if _, err := NewTransform(CHW, ops...); err == nil || !errors.Is(err, errs.Unsupported) {
			t.Errorf("%v: %v", ops, err)
		}
	}
	// A geometry op after the mosaic's was once placed and then ignored
	// (the batch the mosaic's size, no crop made).
	mosaic := optab.Op{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 32, N: 4}}
	persp := optab.Op{Kind: OpYOLORandomPerspective, Args: &YOLOPerspectiveArgs{Size: [2]int{64, 64}}}
	for _, ops := range [][]optab.Op{
		{mosaic, {Kind: OpCenterCrop, Size: [2]int{32, 32}}},
		{mosaic, persp, {Kind: OpCenterCrop, Size: [2]int{32, 32}}},
		{mosaic, {Kind: OpYOLOLetterBox, Args: &YOLOLetterBoxArgs{NewShape: [2]int{64, 64}, Stride: 32}}},
	} {
		want := fmt.Sprintf("op %d (%s) after a YOLOMosaic", len(ops)-1, ops[len(ops)-1].Kind)
		if _, err := NewTransform(CHW, ops...); err == nil || !errors.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", optab.OpsString(ops), err, want)
		}
	}
	tr, err := NewTransform(CHW, optab.Op{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 64, N: 4}})
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
	mo := []optab.Op{{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 64, N: 4}}}
	if _, err := NewViews(CHW, ViewGroup{Count: 2, Ops: mo}, ViewGroup{Count: 1, Ops: mo}); err == nil || !strings.Contains(err.Error(), "several views") {
		t.Errorf("a Mosaic in views: %v", err)
	}
	op, err := optab.NamedOp("YOLOMosaic", map[string]any{"imgsz": 320.0})
	if a := optab.ArgsOf[MosaicArgs](&op); err != nil || a != (MosaicArgs{ImgSz: 320, N: 4}) || op.P != 1 {
		t.Fatalf("NamedOp: %+v (args %+v), %v", op, a, err)
	}
	// Each of the family's ops gets its own arguments' type from the
	// wire, at their defaults where not given.
	for kind, want := range map[string]any{"YOLOCopyPaste": &CopyPasteArgs{Mode: "mixup"}, "YOLOCutMix": &CutMixArgs{Beta: 1, Areas: 5}} {
		args := map[string]any{"mode": "mixup"}
		if kind == "YOLOCutMix" {
			args = map[string]any{"num_areas": 5.0}
		}
		op, err := optab.NamedOp(kind, args)
		if err != nil || !reflect.DeepEqual(op.Args, want) {
			t.Errorf("NamedOp(%s, %v): args %#v, %v; want %#v", kind, args, op.Args, err, want)
		}
	}
	if op, err := optab.NamedOp("YOLOMixUp", nil); err != nil || op.Args != nil {
		t.Errorf("NamedOp(YOLOMixUp): args %#v, %v; want none (p alone, a field every random op has)", op.Args, err)
	}
}

// TestMultiRoom: the room the root's scratch bound counts for a
// multi-image op, from the op's arguments and the partner ops after it:
// the images load_image'd at imgsz, the canvas (2 or 3 tiles a side), a
// MixUp's and a CutMix's partner at the output's size, a CopyPaste's
// image, mask and points; none for a transform without one, or at the
// epoch a stop_epoch switches the Mosaic off.
func TestMultiRoom(t *testing.T) {
	persp := optab.Op{Kind: OpYOLORandomPerspective, Args: &YOLOPerspectiveArgs{Scale: 0.5, Translate: 0.1, Size: [2]int{60, 50}}}
	const out = 60 * 50
	for _, c := range []struct {
		ops  []optab.Op
		want MultiRoom
	}{
		{[]optab.Op{{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 48, N: 4}}, persp},
			MultiRoom{Images: 3 * 4 * 48 * 48, Canvas: 3 * 96 * 96, Side: 48}},
		{[]optab.Op{{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 48, N: 9}}, persp, {Kind: OpMixUp, P: 0.5}},
			MultiRoom{Images: 3 * 9 * 48 * 48, Canvas: 3 * 144 * 144, Side: 48, MixUp: true, Partners: 3 * out}},
		{[]optab.Op{{Kind: OpMosaic, P: 1, Args: &MosaicArgs{ImgSz: 40, N: 4}}, persp, {Kind: OpCopyPaste, P: 1, Args: &CopyPasteArgs{Mode: "mixup"}}, {Kind: OpCutMix, P: 1, Args: &CutMixArgs{Beta: 1, Areas: 8}}},
			MultiRoom{Images: 3 * 4 * 40 * 40, Canvas: 3 * 80 * 80, Side: 40, CopyPaste: true, CutMix: true, Partners: 3*out + 12*out}},
	} {
		tr, err := NewTransform(CHW, c.ops...)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := tr.MultiRoom(); !ok || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", tr, got, ok, c.want)
		}
		st, err := tr.WithStopEpoch(2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := st.AtEpoch(1).MultiRoom(); !ok || got != c.want {
			t.Errorf("%s before its stop_epoch: %+v, %v", tr, got, ok)
		}
		if got, ok := st.AtEpoch(2).MultiRoom(); ok {
			t.Errorf("%s at its stop_epoch: %+v, want none", tr, got)
		}
	}
	tr, err := NewTransform(CHW, optab.Op{Kind: OpResize, Size: [2]int{64, 64}})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tr.MultiRoom(); ok {
		t.Errorf("%s: %+v, want none", tr, got)
	}
}
