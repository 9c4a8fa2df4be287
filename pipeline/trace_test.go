package pipeline

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/testops"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestTracerHook: pipeline/internal/testops' TraceBoxes, the Tracer
// pipeline/transform's tests draw through (their binary does not link
// this package, whose Decoder is the Tracer everywhere else), is the
// Decoder's trace byte for byte, errors alike: over every preset, the
// recipes the tests share, a stop_epoch's epochs before and after, a
// fast decode mode, and several views.
func TestTracerHook(t *testing.T) {
	trs := map[string]*transform.Transform{}
	for _, name := range transform.PresetNames() {
		tr, err := transform.ParseTransform(name, transform.CHW)
		if err != nil {
			t.Fatal(err)
		}
		trs[name] = tr
	}
	trs["recipe"] = mustTransform(t, transform.HWC, recipeOps()...)
	trs["lsj"] = mustTransform(t, transform.CHW, lsjOps(96, 64, [3]float64{1, 2, 3})...)
	trs["seg"] = mustTransform(t, transform.CHW, segOps(40, 160, 64, [3]float64{1, 2, 3})...)
	trs["letterbox"] = mustTransform(t, transform.CHW, letterboxRecipe(t)...)
	for name, op := range tvPolicies() {
		trs[name] = mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{224, 224}}, ops.Op{Kind: ops.OpRandomHorizontalFlip, P: 0.5}, op)
	}
	stop, err := trs["detr"].WithStopEpoch(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	trs["detr stopped at 1"] = stop
	trs["detr fast"] = trs["detr"].WithDecode(transform.DecodeFast)
	trs["empty crop"] = mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{8, 8}, Ratio: [2]float64{3, 4}})
	boxes := [][4]float32{{40, 60, 200, 300}, {300, 100, 620, 460}, {10, 10, 30, 40}}
	for name, tr := range trs {
		compared, mosaics, refused := 0, 0, 0
		for i := range uint64(24) {
			for _, size := range [][2]int{{640, 480}, {1, 10}} {
				k := det.Key{Seed: 5, Epoch: i % 3, Index: i}
				want, err := tr.TraceBoxes(size[0], size[1], k, boxes)
				if err != nil && strings.Contains(err.Error(), "needs its partners' images") {
					mosaics++
					continue // a Mosaic's draw: refused before the Tracer
				}
				got, err2 := testops.TraceBoxes(tr, size[0], size[1], k, boxes)
				if !bytes.Equal(got, want) || (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
					t.Fatalf("%s, %dx%d, key %+v: testops' trace %s (%v), the Decoder's %s (%v)", name, size[0], size[1], k, got, err2, want, err)
				}
				compared++
				if err != nil {
					refused++
				}
			}
		}
		bad := compared == 0 && mosaics == 0 || compared > 0 && refused == compared
		if name == "empty crop" {
			bad = refused == 0 // its 1x10 images' crops are empty
		}
		if bad {
			t.Errorf("%s: %d traces compared, %d of them refused (%d Mosaic draws)", name, compared, refused, mosaics)
		}
	}
}

// TestFillTraces: a batch asked for traces carries each sample's: the
// geometry first (its crop and size), then the steps, then normalize; a
// padded sample carries the trace of the sample it copies.
func TestFillTraces(t *testing.T) {
	files := goldenJPEGs()
	files = append(files, []byte("not an image"))
	ds := memDataset{files: files}
	tr := mustTransform(t, transform.CHW, recipeOps()...)
	e := NewExecutor(2)
	defer e.Close()
	idx := make([]int64, len(files))
	for i := range idx {
		idx[i] = int64(i)
	}
	b := &Batch{Trace: true}
	if err := e.Fill(context.Background(), ds, tr, 5, 0, idx, PadFromBatch, b); err != nil {
		t.Fatal(err)
	}
	if len(b.Traces) != b.N || b.N != len(files) || len(b.Errors) != 1 {
		t.Fatalf("%d traces, %d samples, %d errors", len(b.Traces), b.N, len(b.Errors))
	}
	for i, js := range b.Traces {
		steps, err := transform.ParseTrace(js)
		if err != nil {
			t.Fatalf("sample %d: %v\n%s", i, err, js)
		}
		if steps[0].Fn != fn.ResizedCrop || steps[0].I[4] != 32 || steps[0].I[5] != 24 || steps[0].Interp != transform.InterpBicubic {
			t.Errorf("sample %d: the trace starts with %+v, want resized_crop to 32x24 bicubic", i, steps[0])
		}
		if steps[len(steps)-1].Fn != fn.Normalize {
			t.Errorf("sample %d: the trace ends with %s, want normalize", i, steps[len(steps)-1].Fn)
		}
	}
	bad := len(files) - 1
	for i := range bad {
		if b.Indices[i] == b.Indices[bad] && string(b.Traces[i]) != string(b.Traces[bad]) {
			t.Errorf("the padded slot's trace differs from the sample it copies")
		}
	}
	// Without Trace, no traces.
	b2 := &Batch{}
	if err := e.Fill(context.Background(), ds, tr, 5, 0, idx[:3], PadFromBatch, b2); err != nil || len(b2.Traces) != 0 {
		t.Errorf("untraced batch: %v, %d traces", err, len(b2.Traces))
	}
}
