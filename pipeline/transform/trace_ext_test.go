package transform_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestTraceRoundTrip: a trace parses back into the steps it was made of,
// for every step the recipe draws.
func TestTraceRoundTrip(t *testing.T) {
	tr := mustTransform(t, transform.CHW, recipeOps()...)
	seen := map[fn.Fn]bool{}
	var pl transform.Plan
	for i := range uint64(300) {
		if err := tr.Plan(&pl, 320, 240, det.Key{Seed: 1, Index: i}, transform.BoxSource{}); err != nil {
			t.Fatal(err)
		}
		steps := pl.Views[0].Steps
		js := transform.AppendTrace(nil, steps)
		if !json.Valid(js) {
			t.Fatalf("key %d: invalid JSON %s", i, js)
		}
		back, err := transform.ParseTrace(js)
		if err != nil {
			t.Fatalf("key %d: %v\n%s", i, err, js)
		}
		for j := range steps {
			seen[steps[j].Fn] = true
			// A random erase's noise seed and normalization are not in the
			// trace ("v": "random").
			if steps[j].Fn == fn.Erase && steps[j].Random {
				steps[j].Seed, steps[j].F = 0, [6]float64{}
			}
			// Nor is the masks' fill (the trace's fill is the pixels').
			steps[j].MaskFill = 0
		}
		if !slices.Equal(back, steps) {
			t.Fatalf("key %d: parsed %+v\nwant %+v\nfrom %s", i, back, steps, js)
		}
	}
	for f := fn.Fn(1); int(f) < fn.Count(); f++ {
		// RandomCrop's pad and crop are geometry, traced from the plan
		// (TestExactRandomCrop parses and replays them).
		if f == fn.Normalize || f == fn.HorizontalFlip || f.Geometry() {
			continue
		}
		if !seen[f] {
			t.Errorf("300 samples of the recipe drew no %s", f)
		}
	}
}

// TestPlanNoAlloc: drawing a sample's plan allocates nothing once its
// buffers grew (the executor's hot path: a Decoder reuses its Plan).
func TestPlanNoAlloc(t *testing.T) {
	allocTest(t)
	tr := mustTransform(t, transform.CHW, recipeOps()...)
	var p transform.Plan
	i := uint64(0)
	draw := func() {
		if err := tr.Plan(&p, 500, 375, det.Key{Seed: 3, Index: i}, transform.BoxSource{}); err != nil {
			t.Fatal(err)
		}
		i++
	}
	draw()
	if allocs := testing.AllocsPerRun(200, draw); allocs != 0 {
		t.Errorf("Plan allocates %.1f times a sample", allocs)
	}
	if n := len(p.Views[0].Steps); n > tr.Needs().MaxSteps {
		t.Errorf("drew %d steps, over the bound of %d", n, tr.Needs().MaxSteps)
	}
}
