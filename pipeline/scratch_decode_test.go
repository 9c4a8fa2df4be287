package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// countBudget is a ScratchBudget without a limit that keeps what is
// reserved, for the tests.
type countBudget struct{ held int64 }

func (b *countBudget) Acquire(_ context.Context, n int64, _ time.Duration, _ string) error {
	b.held += n
	return nil
}
func (b *countBudget) Try(n int64) bool { b.held += n; return true }
func (b *countBudget) Release(n int64)  { b.held -= n }

// TestDecodeScratchInBound: the decode's own pixels (a sample made apart
// before its output: Normalize, an HWC output with steps, a crop past the
// image, a RandomZoomOut's canvas, and that canvas made whole on the
// reference path, a RandomRotation with expand=True first: its room the
// image's rotation; AnyRes's canvas after a ColorJitter, a crop before a
// processor's resize larger than the image) are counted in the sample's reservation from its
// header: after each of 12 photos the Decoder keeps at most the bound of
// that image's sample or what it kept before, part by part, and the
// budget holds what it keeps;
// a transform that decodes straight into the output keeps none and
// reserves none. Each transform's staged decode keeps some (counted).
func TestDecodeScratchInBound(t *testing.T) {
	files := photos(t, 12)
	norm := ops.Op{Kind: ops.OpNormalize, Args: &ops.NormalizeArgs{Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}}}
	zoom := ops.Op{Kind: transform.OpRandomZoomOut, P: 1, Args: &transform.ZoomOutArgs{SideRange: [2]float64{1.5, 3}, Filling: ops.Filling{Fill: [3]float64{10, 200, 30}}}}
	// The canvas path of a vision-language processor's resize: AnyRes's
	// canvas resized apart, then padded (Decoder.padded); a crop before the
	// resize larger than the photos (the crop, not the image, decoded).
	jitter := ops.ColorJitterOp(0.4, 0.4, 0.4, 0.1)
	anyRes := ops.Op{Kind: transform.OpAnyResResize, Args: &transform.AnyResResizeArgs{GridPinpoints: []int{64, 64, 64, 128, 128, 64}, Resampling: ops.Resampling{Interp: transform.InterpBicubic}}}
	bigCrop := ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{900, 700}, Args: &transform.RRCArgs{Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.75, 1.33}}}
	for _, c := range []struct {
		name      string
		layout    transform.Layout
		ops       []ops.Op
		reference bool
		direct    bool
	}{
		{"rrc-direct", transform.CHW, []ops.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{64, 64}}}, false, true},
		{"resize-normalize", transform.CHW, []ops.Op{{Kind: transform.OpResize, Size: [2]int{48, 64}}, norm}, false, false},
		{"hwc-flip", transform.HWC, []ops.Op{{Kind: transform.OpCenterCrop, Size: [2]int{96, 96}}, {Kind: ops.OpRandomVerticalFlip, P: 1}}, false, false},
		{"hwc-normalize", transform.HWC, []ops.Op{{Kind: transform.OpResize, Size: [2]int{40, 56}}, norm}, false, false},
		{"center-past", transform.CHW, []ops.Op{{Kind: transform.OpCenterCrop, Size: [2]int{600, 640}}}, false, false},
		{"zoom-out", transform.CHW, []ops.Op{zoom, {Kind: transform.OpResize, Size: [2]int{64, 80}}}, false, false},
		{"zoom-out-reference", transform.CHW, []ops.Op{zoom, {Kind: transform.OpResize, Size: [2]int{64, 80}}}, true, false},
		{"rotate-expand-first", transform.CHW, []ops.Op{{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-45, 45}, Expand: true}}, {Kind: transform.OpResize, Size: [2]int{64, 80}}}, false, false},
		{"jitter-anyres", transform.CHW, []ops.Op{jitter, anyRes}, false, false},
		{"crop-before-anyres", transform.HWC, []ops.Op{bigCrop, jitter, anyRes}, false, false},
		{"crop-before-smart", transform.CHW, []ops.Op{bigCrop, {Kind: transform.OpSmartResize, Args: &transform.SmartResizeArgs{MinPixels: 1024, MaxPixels: 65536, Factor: 28}}}, false, false},
		{"crop-before-square-reference", transform.CHW, []ops.Op{bigCrop, {Kind: transform.OpPadToSquare, Args: &transform.PadToSquareArgs{Filling: ops.Filling{Fill: [3]float64{1, 2, 3}}}}, {Kind: transform.OpResize, Size: [2]int{64, 64}}}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := mustTransform(t, c.layout, c.ops...)
			b := &countBudget{}
			d := NewDecoder(WithScratchBudget(b, time.Second), WithReference(c.reference))
			defer d.Close()
			out := make([]byte, tr.SampleBytes())
			var most scratchParts
			for i, f := range files {
				k := det.Key{Seed: 3, Index: uint64(i)}
				if err := d.reserveScratch(context.Background(), f, tr, k, nil, nil); err != nil {
					t.Fatal(err)
				}
				hd, err := parseHeader(f)
				if err != nil {
					t.Fatal(err)
				}
				at := tr.AtEpoch(0)
				bound := scratchBound(at, false, false, !haveFast || c.reference, hd.w, hd.h, 0, nil)
				if err := d.settleScratch(d.Decode(f, tr, k, out)); err != nil {
					t.Fatalf("photo %d: %v", i, err)
				}
				kept := d.scratchBytes() // each buffer grows to what a sample asks of it, and stays
				if kept.pix > max(bound.pix, most.pix) || kept.zoom > max(bound.zoom, most.zoom) || kept.pad > max(bound.pad, most.pad) {
					t.Fatalf("photo %d (%dx%d): the decode keeps %d bytes of pixels, %d of canvas and %d of AnyRes's canvas, its bound %d, %d and %d (kept before: %d, %d and %d)",
						i, hd.w, hd.h, kept.pix, kept.zoom, kept.pad, bound.pix, bound.zoom, bound.pad, most.pix, most.zoom, most.pad)
				}
				if b.held != kept.sum() {
					t.Fatalf("photo %d: %d bytes reserved, %d kept", i, b.held, kept.sum())
				}
				most.pix, most.zoom, most.pad = max(most.pix, kept.pix), max(most.zoom, kept.zoom), max(most.pad, kept.pad)
				if c.direct && (bound.pix != 0 || bound.zoom != 0) {
					t.Fatalf("photo %d: a decode straight into the output bound to %d bytes of pixels, %d of canvas", i, bound.pix, bound.zoom)
				}
			}
			if !c.direct && most.pix == 0 {
				t.Errorf("the staged decode kept no pixels: nothing counted")
			}
			if c.reference && most.zoom == 0 {
				t.Errorf("the reference path's canvas kept nothing: nothing counted")
			}
			if strings.HasSuffix(c.name, "anyres") && most.pad == 0 {
				t.Errorf("AnyRes's canvas before its padding kept nothing: nothing counted")
			}
			t.Logf("kept at most %d bytes of pixels, %d of canvas", most.pix, most.zoom)
		})
	}
}
