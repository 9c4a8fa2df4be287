package pipeline

import (
	"context"
	"testing"
)

// TestFillTraces: a batch asked for traces carries each sample's: the
// geometry first (its crop and size), then the steps, then normalize; a
// padded sample carries the trace of the sample it copies.
func TestFillTraces(t *testing.T) {
	files := goldenJPEGs()
	files = append(files, []byte("not an image"))
	ds := memDataset{files: files}
	tr := mustTransform(t, CHW, recipeOps()...)
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
		steps, err := ParseTrace(js)
		if err != nil {
			t.Fatalf("sample %d: %v\n%s", i, err, js)
		}
		if steps[0].Fn != FnResizedCrop || steps[0].I[4] != 32 || steps[0].I[5] != 24 || steps[0].Interp != InterpBicubic {
			t.Errorf("sample %d: the trace starts with %+v, want resized_crop to 32x24 bicubic", i, steps[0])
		}
		if steps[len(steps)-1].Fn != FnNormalize {
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
