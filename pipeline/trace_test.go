package pipeline

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// recipeOps is a transform with one op of every kind that draws, in
// containers and policies too.
func recipeOps() []Op {
	return []Op{
		{Kind: OpRandomResizedCrop, Size: [2]int{32, 24}, Interp: InterpBicubic},
		{Kind: OpRandomHorizontalFlip, P: 0.5},
		{Kind: OpRandomApply, P: 0.8, Ops: []Op{ColorJitterOp(0.4, 0.4, 0.2, 0.1)}},
		{Kind: OpRandomGrayscale, P: 0.2},
		{Kind: OpRandomChoice, Ops: []Op{
			{Kind: OpGaussianBlur, KernelSize: [2]int{5, 5}, Sigma: [2]float64{0.1, 2}},
			{Kind: OpRandomSolarize, P: 1, Threshold: 128},
			{Kind: OpGrayscale},
		}},
		{Kind: OpRandomOrder, Ops: []Op{{Kind: OpRandomInvert, P: 0.5}, {Kind: OpRandomVerticalFlip, P: 0.5}}},
		{Kind: OpRandomRotation, Degrees: [2]float64{-10, 10}, Interp: InterpBilinear, Fill: [3]float64{1, 2, 3}},
		{Kind: OpRandomAffine, Degrees: [2]float64{-5, 5}, HasTranslate: true, Translate: [2]float64{0.1, 0.1},
			Scale: [2]float64{0.9, 1.1}, HasShear: true, ShearY: true, Shear: [4]float64{-5, 5, -3, 3}, HasCenter: true, Center: [2]float64{3, 4}},
		{Kind: OpTrivialAugmentWide, Bins: 31},
		{Kind: OpRandAugment, NumOps: 2, Magnitude: 9, Bins: 31},
		{Kind: OpAutoAugment, Policy: "imagenet"},
		{Kind: OpAugMix, Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1},
		{Kind: OpTimmRandAugment, Policy: "rand-m9-mstd0.5-inc1", RandomInterp: true, Fill: [3]float64{124, 116, 104}},
		{Kind: OpRandomErasing, P: 0.5, Scale: [2]float64{0.02, 0.33}, Ratio: [2]float64{0.3, 3.3}, RandomValue: true},
		{Kind: OpTimmAutoAugment, Policy: "v0r-mstd0.5", Interp: InterpBilinear, Fill: [3]float64{124, 116, 104}},
		{Kind: OpTimmAugMix, Policy: "augmix-m5-w2-d1", RandomInterp: true, Fill: [3]float64{124, 116, 104}},
		{Kind: OpTimmAugMix, Policy: "augmix-m3-w2-d1-b1", Interp: InterpBilinear, Fill: [3]float64{124, 116, 104}},
		{Kind: OpRandomErasing, P: 0.5, Scale: [2]float64{0.02, 0.33}, Ratio: [2]float64{0.3, 3.3}, RandomValue: true, RandomColor: true,
			MinCount: 1, MaxCount: 3},
		{Kind: OpRandomPosterize, P: 0.5, Bits: 3},
		{Kind: OpRandomEqualize, P: 0.5}, {Kind: OpRandomAutocontrast, P: 0.5},
		{Kind: OpRandomAdjustSharpness, P: 0.5, Factor: 2},
		{Kind: OpRandomPerspective, P: 0.5, Distortion: 0.5, Interp: InterpBilinear, Fill: [3]float64{1, 2, 3}},
		{Kind: OpYOLORandomHSV, HGain: 0.5, SGain: 0.5, VGain: 0.5},
		{Kind: OpYOLORandomFlip, P: 0.5, Direction: "horizontal", FlipIdx: []int{1, 0, 2}},
		{Kind: OpYOLORandomFlip, P: 0.5, Direction: "vertical"},
		{Kind: OpSanitizeBoundingBoxes, MinSize: 1.5, MinArea: 2},
		{Kind: OpConvertBoundingBoxFormat, BoxFormat: BoxCXCYWH},
		{Kind: OpClampBoundingBoxes}, {Kind: OpClampKeyPoints}, {Kind: OpSanitizeKeyPoints},
		{Kind: OpRandomPhotometricDistort, P: 0.5, JitterRanges: true, Jitter: [4][2]float64{{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}}},
		{Kind: OpNormalize, Mean: fn.ImagenetMean, Std: fn.ImagenetStd},
	}
}

// TestTraceRoundTrip: a trace parses back into the steps it was made of,
// for every step the recipe draws.
func TestTraceRoundTrip(t *testing.T) {
	tr := mustTransform(t, CHW, recipeOps()...)
	seen := map[Fn]bool{}
	for i := range uint64(300) {
		steps := tr.Sampler().DrawSteps(Key{Seed: 1, Index: i}, nil)
		js := AppendTrace(nil, steps)
		if !json.Valid(js) {
			t.Fatalf("key %d: invalid JSON %s", i, js)
		}
		back, err := ParseTrace(js)
		if err != nil {
			t.Fatalf("key %d: %v\n%s", i, err, js)
		}
		for j := range steps {
			seen[steps[j].Fn] = true
			// A random erase's noise seed and normalization are not in the
			// trace ("v": "random").
			if steps[j].Fn == FnErase && steps[j].Random {
				steps[j].Seed, steps[j].F = 0, [6]float64{}
			}
			// Nor is the masks' fill (the trace's fill is the pixels').
			steps[j].MaskFill = 0
		}
		if !slices.Equal(back, steps) {
			t.Fatalf("key %d: parsed %+v\nwant %+v\nfrom %s", i, back, steps, js)
		}
	}
	for f := Fn(1); int(f) < fn.Count(); f++ {
		// RandomCrop's pad and crop are geometry, traced from the plan
		// (TestRandomCrop parses and replays them).
		if f == FnNormalize || f == FnHorizontalFlip || f.Geometry() {
			continue
		}
		if !seen[f] {
			t.Errorf("300 samples of the recipe drew no %s", f)
		}
	}
}

// TestDrawNoAlloc: drawing a sample's steps allocates nothing once the
// buffer is big enough, with a reused drawer (the executor's hot path:
// a Decoder's).
func TestDrawNoAlloc(t *testing.T) {
	allocTest(t)
	tr := mustTransform(t, CHW, recipeOps()...)
	buf := make([]Step, 0, tr.Sampler().MaxSteps())
	i := uint64(0)
	var d drawer // a Decoder's, reused
	allocs := testing.AllocsPerRun(200, func() {
		buf = tr.Sampler().DrawInto(&d, Key{Seed: 3, Index: i}, tr.Sampler().OutW(), tr.Sampler().OutH(), buf[:0])
		i++
	})
	if allocs != 0 {
		t.Errorf("drawSteps allocates %.1f times a sample", allocs)
	}
	if len(buf) > tr.Sampler().MaxSteps() {
		t.Errorf("drew %d steps, over the bound of %d", len(buf), tr.Sampler().MaxSteps())
	}
}

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
