package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// TestKernelScratchInBound: the steps' kernels' buffers (a rotation's
// and an affine's copy of the image and RGBX source, the blur's planes
// and sums (on the output, on a rotation's grown image, on a
// RandomShortestSize's own size), AugMix's state, the rows a Resize after a
// RandomRotation(expand=True) resamples across and a CenterCrop's copy
// there; kernels.Scratch) are counted in the sample's
// reservation: after each of 6 photos the Decoder keeps at most the
// bound of its sample (or what it kept before) of them, some, and the
// budget holds what it keeps; a transform without steps, or whose steps
// keep nothing (ColorJitter), keeps none and reserves none for them.
// With a budget that holds the sample's scratch but the kernels', the
// sample's reservation fails with the budget's error; with the kernels'
// too, it is taken.
func TestKernelScratchInBound(t *testing.T) {
	files := photos(t, 6)
	for _, c := range []struct {
		name string
		ops  []ops.Op
		none bool
	}{
		{"blur", []ops.Op{{Kind: transform.OpResize, Size: [2]int{64, 80}}, {Kind: ops.OpGaussianBlur, Args: &ops.BlurArgs{KernelSize: [2]int{9, 9}, Sigma: [2]float64{1, 3}}}}, false},
		{"rotate", []ops.Op{{Kind: transform.OpCenterCrop, Size: [2]int{96, 96}}, {Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-45, 45}}}}, false},
		{"affine", []ops.Op{{Kind: transform.OpResize, Size: [2]int{64, 64}}, {Kind: transform.OpRandomAffine, Args: &transform.AffineArgs{Degrees: [2]float64{-10, 10}, Scale: [2]float64{0.5, 2}}}}, false},
		{"augmix", []ops.Op{{Kind: transform.OpResize, Size: [2]int{48, 64}}, {Kind: ops.OpAugMix, Args: &ops.AugMixArgs{Severity: 3, MixtureWidth: 3, ChainDepth: -1, Alpha: 1}}}, false},
		{"rotate-expand-resize", []ops.Op{{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-45, 45}, Expand: true}}, {Kind: transform.OpResize, Size: [2]int{64, 80}}}, false},
		{"rotate-expand-crop", []ops.Op{{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-45, 45}, Expand: true}}, {Kind: transform.OpCenterCrop, Size: [2]int{100, 120}}}, false},
		{"rotate-expand-blur", []ops.Op{{Kind: transform.OpResize, Size: [2]int{64, 80}}, {Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{30, 60}, Expand: true}}, {Kind: ops.OpGaussianBlur, Args: &ops.BlurArgs{KernelSize: [2]int{9, 9}, Sigma: [2]float64{1, 3}}}}, false},
		{"shortest-blur", []ops.Op{{Kind: transform.OpRandomShortestSize, Args: &transform.ShortestSizeArgs{MinSize: []int{48, 96}, MaxSize: 128}}, {Kind: ops.OpGaussianBlur, Args: &ops.BlurArgs{KernelSize: [2]int{9, 9}, Sigma: [2]float64{1, 3}}}}, false},
		{"trivialaugment", []ops.Op{{Kind: transform.OpResize, Size: [2]int{64, 64}}, {Kind: ops.OpTrivialAugmentWide, Args: &ops.TrivialAugmentWideArgs{Bins: 31}}}, false},
		{"sharpness", []ops.Op{{Kind: transform.OpResize, Size: [2]int{64, 64}}, {Kind: ops.OpRandomAdjustSharpness, P: 1, Args: &ops.SharpnessArgs{Factor: 2}}}, false},
		{"colorjitter", []ops.Op{{Kind: transform.OpResize, Size: [2]int{64, 80}}, {Kind: ops.OpColorJitter, Args: &ops.ColorJitterArgs{Brightness: 0.4, Contrast: 0.4}}}, true},
		{"no-steps", []ops.Op{{Kind: transform.OpResize, Size: [2]int{64, 80}}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := mustTransform(t, transform.CHW, c.ops...)
			b := &countBudget{}
			d := NewDecoder(WithScratchBudget(b, time.Second))
			defer d.Close()
			out := make([]byte, tr.SampleBytes())
			var most, bmost int64
			for i, f := range files {
				k := det.Key{Seed: 5, Index: uint64(i)}
				if err := d.reserveScratch(context.Background(), f, tr, k, nil, nil); err != nil {
					t.Fatal(err)
				}
				hd, err := parseHeader(f)
				if err != nil {
					t.Fatal(err)
				}
				bound := scratchBound(tr.AtEpoch(0), false, false, !haveFast, hd.w, hd.h, 0, nil)
				if err := d.settleScratch(d.Decode(f, tr, k, out)); err != nil {
					t.Fatalf("photo %d: %v", i, err)
				}
				kept := d.scratchBytes()
				if kept.kern > max(bound.kern, most) {
					t.Fatalf("photo %d (%dx%d): the kernels keep %d bytes, their bound %d (kept before: %d)", i, hd.w, hd.h, kept.kern, bound.kern, most)
				}
				if b.held != kept.sum() {
					t.Fatalf("photo %d: %d bytes reserved, %d kept", i, b.held, kept.sum())
				}
				most, bmost = max(most, kept.kern), max(bmost, bound.kern)
				if c.none && (bound.kern != 0 || kept.kern != 0) {
					t.Fatalf("a transform without steps: kernels' bound %d, kept %d", bound.kern, kept.kern)
				}
			}
			if !c.none && most == 0 {
				t.Fatal("the kernels kept nothing: the test does not reach them")
			}
			t.Logf("the kernels kept %d bytes at most, bound %d", most, bmost)
		})
	}
	// A budget with room for the sample's scratch but the kernels'.
	tr := mustTransform(t, transform.CHW, ops.Op{Kind: transform.OpResize, Size: [2]int{64, 80}}, ops.Op{Kind: ops.OpGaussianBlur, Args: &ops.BlurArgs{KernelSize: [2]int{9, 9}, Sigma: [2]float64{1, 3}}})
	hd, err := parseHeader(files[0])
	if err != nil {
		t.Fatal(err)
	}
	bound := scratchBound(tr.AtEpoch(0), false, false, !haveFast, hd.w, hd.h, 0, nil)
	bound.files, bound.lib = int64(cap(files[0])), hd.libBytes()
	bound.res = resBound(tr.AtEpoch(0), false, !haveFast, hd.w, hd.h, 0, 0)
	for _, room := range []int64{bound.sum() - bound.kern, bound.sum()} {
		lb := &limitBudget{limit: room}
		d := NewDecoder(WithScratchBudget(lb, 10*time.Millisecond))
		err = d.reserveScratch(context.Background(), files[0], tr, det.Key{}, nil, nil)
		d.Close()
		if room < bound.sum() && (err == nil || !strings.Contains(err.Error(), "limitBudget: no room")) {
			t.Fatalf("a budget of %d bytes, the sample's bound without the kernels' %d: %v, want the budget's error", room, bound.kern, err)
		}
		if room == bound.sum() && err != nil {
			t.Fatalf("a budget of the sample's bound %d: %v", room, err)
		}
	}
}

// limitBudget is a ScratchBudget of limit bytes that never waits.
type limitBudget struct{ held, limit int64 }

func (b *limitBudget) Acquire(_ context.Context, n int64, _ time.Duration, what string) error {
	if !b.Try(n) {
		return fmt.Errorf("limitBudget: no room for %s: %d bytes, %d of %d held", what, n, b.held, b.limit)
	}
	return nil
}

func (b *limitBudget) Try(n int64) bool {
	if b.held+n > b.limit {
		return false
	}
	b.held += n
	return true
}
func (b *limitBudget) Release(n int64) { b.held -= n }

// TestResamplerScratchInBound: the C resampler's filters and rows (kept
// in the decoder's C scratch, codec.Scratch.ResamplerBytes) are counted
// in the sample's reservation: after each of 8 photos the Decoder keeps
// at most the bound of its sample (resBound) or what it kept before, some
// once it has decoded in C, and the budget holds what it keeps; the
// reference path (no C decode) keeps none. A 2x20000 image resized to
// 224x224 keeps every row resampled across (13 MB), in its bound.
func TestResamplerScratchInBound(t *testing.T) {
	files := photos(t, 8)
	zoom := ops.Op{Kind: transform.OpRandomZoomOut, P: 1, Args: &transform.ZoomOutArgs{SideRange: [2]float64{1.5, 3}, Filling: ops.Filling{Fill: [3]float64{10, 200, 30}}}}
	// A crop before a processor's resize, larger than the photos: decoded at its size, then resized.
	bigCrop := ops.Op{Kind: transform.OpRandomResizedCrop, Size: [2]int{900, 700}, Args: &transform.RRCArgs{Scale: [2]float64{0.3, 1}, Ratio: [2]float64{0.75, 1.33}}}
	for _, c := range []struct {
		name      string
		ops       []ops.Op
		reference bool
	}{
		{"rrc", []ops.Op{{Kind: transform.OpRandomResizedCrop, Size: [2]int{64, 64}}}, false},
		{"resize-small", []ops.Op{{Kind: transform.OpResize, Size: [2]int{8, 12}}}, false},
		{"resize-up", []ops.Op{{Kind: transform.OpResize, Size: [2]int{600, 700}}}, false},
		{"center-past", []ops.Op{{Kind: transform.OpCenterCrop, Size: [2]int{600, 640}}}, false},
		{"zoom-out", []ops.Op{zoom, {Kind: transform.OpResize, Size: [2]int{64, 80}}}, false},
		{"rotate-expand-first", []ops.Op{{Kind: transform.OpRandomRotation, Args: &transform.RotationArgs{Degrees: [2]float64{-45, 45}, Expand: true}}, {Kind: transform.OpResize, Size: [2]int{64, 80}}}, false},
		{"yolo", []ops.Op{{Kind: transform.OpYOLOLoadImage, Args: &transform.YOLOLoadImageArgs{ImgSz: 64}}, {Kind: transform.OpYOLOLetterBox, Args: &transform.YOLOLetterBoxArgs{NewShape: [2]int{64, 64}, Stride: 32, ScaleUp: true, Center: true}}}, false},
		{"tall", []ops.Op{{Kind: transform.OpResize, Size: [2]int{224, 224}}}, false},
		{"crop-before-smart", []ops.Op{bigCrop, {Kind: transform.OpSmartResize, Args: &transform.SmartResizeArgs{MinPixels: 1024, MaxPixels: 65536, Factor: 28}}}, false},
		{"crop-before-anyres", []ops.Op{bigCrop, {Kind: transform.OpAnyResResize, Args: &transform.AnyResResizeArgs{GridPinpoints: []int{64, 64, 64, 128, 128, 64}}}}, false},
		{"reference", []ops.Op{{Kind: transform.OpResize, Size: [2]int{48, 64}}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := files
			if c.name == "tall" { // a thin tall image resized wide: every row resampled across
				files = [][]byte{encodePNG(testPicture(2, 20000))}
			}
			tr := mustTransform(t, transform.CHW, c.ops...)
			b := &countBudget{}
			d := NewDecoder(WithScratchBudget(b, time.Second), WithReference(c.reference))
			defer d.Close()
			out := make([]byte, tr.SampleBytes())
			var most, bmost int64
			for i, f := range files {
				k := det.Key{Seed: 7, Index: uint64(i)}
				if err := d.reserveScratch(context.Background(), f, tr, k, nil, nil); err != nil {
					t.Fatal(err)
				}
				hd, err := parseHeader(f)
				if err != nil {
					t.Fatal(err)
				}
				bound := resBound(tr.AtEpoch(0), false, !haveFast || c.reference, hd.w, hd.h, 0, 0)
				if err := d.settleScratch(d.Decode(f, tr, k, out)); err != nil {
					t.Fatalf("photo %d: %v", i, err)
				}
				kept := d.scratchBytes()
				if kept.res > max(bound, most) {
					t.Fatalf("photo %d (%dx%d): the resampler keeps %d bytes, its bound %d (kept before: %d)", i, hd.w, hd.h, kept.res, bound, most)
				}
				if b.held != kept.sum() {
					t.Fatalf("photo %d: %d bytes reserved, %d kept", i, b.held, kept.sum())
				}
				most, bmost = max(most, kept.res), max(bmost, bound)
			}
			if c.reference != (most == 0) && haveFast {
				t.Fatalf("reference %v: the resampler kept %d bytes", c.reference, most)
			}
			if c.name == "tall" && haveFast && most < 3*224*20000 {
				t.Fatalf("the 2x20000 image resized to 224x224 kept %d bytes of the resampler's: its rows are 3x224x20000", most)
			}
			t.Logf("the resampler kept %d bytes at most, bound %d", most, bmost)
		})
	}
}
