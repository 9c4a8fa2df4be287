package transform

// AnyResResize: the high-resolution side of LLaVA-OneVision's AnyRes
// (transformers' LlavaOnevisionImageProcessor): the resolution of
// grid_pinpoints that best fits the image (select_best_resolution: the
// most of the image's pixels kept, then the least wasted), the image
// resized into it, its aspect kept (get_patch_output_size, a side
// ceiled), with torchvision's uint8 resize (bicubic, antialiased, by
// default), and padded with zeros to it, centred (the left and top
// padding floored). Each sample has its own size, the resolution chosen;
// cutting it into patches is a view of it on the trainer's device
// (Batch.vision_inputs). The processor's base image (the whole image
// resized to one patch) is another view of the same decode: the preset
// "llava-onevision" is a MultiView of the two.

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// OpAnyResResize is AnyRes's canvas: Sizes its grid_pinpoints, flat
// (height, width) pairs, Interp its resample.
const OpAnyResResize optab.OpKind = "AnyResResize"

// maxPinpoints bounds grid_pinpoints: LLaVA-OneVision's are 36.
const maxPinpoints = 256

func init() {
	optab.Define(optab.Def{Kind: OpAnyResResize,
		Doc:   "LLaVA-OneVision's AnyRes (transformers' LlavaOnevisionImageProcessor): the image resized, aspect kept, into the best-fitting resolution of grid_pinpoints (flat (height, width) pairs; select_best_resolution) and padded to it with zeros, centred; each sample its own size (the trainer cuts the patches)",
		Named: true, Geometry: true, Targets: optab.TargetsMove, Stays: true,
		Params: []optab.Param{
			{Name: "grid_pinpoints", Typ: optab.PInts, Field: "Sizes", Lo: 1, Hi: optab.MaxSide},
			{Name: "interpolation", Typ: optab.PInterp, Def: "'bicubic'", Field: "Interp"},
		},
		Misplaced: "AnyResResize after other ops is not supported: it is the geometry, first and alone, fused into the decode",
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(grid_pinpoints=%v", op.Sizes)
			formatInterp(b, op)
		}})
}

// checkAnyRes checks an AnyResResize, the geometry's op n.
func checkAnyRes(op *optab.Op, n int) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: AnyResResize %s", errs.Unsupported, fmt.Sprintf(format, a...))
	}
	switch {
	case n > 0:
		return bad("must come first: it resizes the whole image")
	case len(op.Sizes) == 0 || len(op.Sizes)%2 != 0 || len(op.Sizes) > 2*maxPinpoints:
		return bad("grid_pinpoints of %d values: want 1 to %d (height, width) pairs, flat", len(op.Sizes), maxPinpoints)
	}
	for _, s := range op.Sizes {
		if s < 1 || s > optab.MaxSide {
			return bad("grid_pinpoints %v: sides must be in 1..%d", op.Sizes, optab.MaxSide)
		}
	}
	return nil
}

// AnyResFit is transformers' select_best_resolution for a w x h image
// over op's pinpoints, in float64 as Python's: per resolution, scale =
// min(width / w, height / h), the image's pixels at that scale (each side
// truncated), at most its own; the most of them, then the least of the
// resolution wasted, the first on a tie. Then get_patch_output_size: the
// side of the smaller scale set to the resolution's, the other ceiled (at
// most the resolution's). It returns the resolution (bw, bh) and the
// resized image's size (rw, rh) in it.
func AnyResFit(op *optab.Op, w, h int) (bw, bh, rw, rh int) {
	fw, fh := float64(w), float64(h)
	best, effBest, wasteBest := -1, 0, math.MaxInt
	for i := 0; i+1 < len(op.Sizes); i += 2 {
		ph, pw := op.Sizes[i], op.Sizes[i+1]
		scale := min(float64(pw)/fw, float64(ph)/fh)
		dw, dh := int(float64(fw*scale)), int(float64(fh*scale))
		eff := min(dw*dh, w*h)
		waste := pw*ph - eff
		if eff > effBest || (eff == effBest && waste < wasteBest) {
			best, effBest, wasteBest = i, eff, waste
		}
	}
	if best < 0 { // every resolution keeps no pixel (a 1-pixel pinpoint for a huge image): Python's None; take the first
		best = 0
	}
	bh, bw = op.Sizes[best], op.Sizes[best+1]
	sw, sh := float64(bw)/fw, float64(bh)/fh
	if sw < sh {
		rw, rh = bw, min(int(math.Ceil(float64(fh*sw))), bh)
	} else {
		rh, rw = bh, min(int(math.Ceil(float64(fw*sh))), bw)
	}
	return bw, bh, max(rw, 1), max(rh, 1)
}

// anyResBound is an AnyResResize's own bound: its largest pinpoint's
// height and width (every resolution fits).
func anyResBound(op *optab.Op) (h, w int) {
	for i := 0; i+1 < len(op.Sizes); i += 2 {
		h, w = max(h, op.Sizes[i]), max(w, op.Sizes[i+1])
	}
	return h, w
}

// anyResPlan sets p's geometry for an AnyResResize of a srcW x srcH
// image: resized to (RW, RH), then padded to the resolution (OutW, OutH),
// centred, as a CenterCrop larger than the image pads it (p.Padded).
func anyResPlan(op *optab.Op, p *SamplePlan, srcW, srcH int) {
	bw, bh, rw, rh := AnyResFit(op, srcW, srcH)
	p.RW, p.RH = rw, rh
	p.OutW, p.OutH, p.CW, p.CH = bw, bh, bw, bh
	p.CX, p.CY = -((bw - rw) / 2), -((bh - rh) / 2)
}
