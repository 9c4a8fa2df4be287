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

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// OpAnyResResize is AnyRes's canvas: Sizes its grid_pinpoints, flat
// (height, width) pairs, Interp its resample.
const OpAnyResResize optab.OpKind = "AnyResResize"

// AnyResResizeArgs are AnyResResize's arguments (optab.Op.Args):
// grid_pinpoints (flat (height, width) pairs), and the model's token
// count's patch, tokens_grid, base_tokens and max_patches (0: none), and
// its interpolation.
type AnyResResizeArgs struct {
	GridPinpoints                             []int
	Patch, TokensGrid, BaseTokens, MaxPatches int
	optab.Resampling
}

// maxPinpoints bounds grid_pinpoints: LLaVA-OneVision's are 36.
const maxPinpoints = 256

// OpPadToSquare is LLaVA-OneVision's image of a record of several
// (LlavaOnevisionImageProcessor.pad_to_square): the image padded with Fill
// to a square of its longer side, centred (the left and top padding
// floored); first, then Resize((h, w)), fused into the decode as a
// RandomZoomOut's canvas is.
const OpPadToSquare optab.OpKind = "PadToSquare"

// PadToSquareArgs are PadToSquare's fill.
type PadToSquareArgs struct{ optab.Filling }

func init() {
	optab.Define(optab.Def{Kind: OpAnyResResize,
		Doc:   "LLaVA-OneVision's AnyRes (transformers' LlavaOnevisionImageProcessor): the image resized, aspect kept, into the best-fitting resolution of grid_pinpoints (flat (height, width) pairs; select_best_resolution) and padded to it with zeros, centred; each sample its own size (the trainer cuts the patches)",
		Named: true, Geometry: true, Targets: optab.TargetsMove, Stays: true,
		Params: []optab.Param{
			{Name: "grid_pinpoints", Typ: optab.PInts, At: func(o *optab.Op) any { return &optab.ArgsAt[AnyResResizeArgs](o).GridPinpoints }, Lo: 1, Hi: optab.MaxSide},
			{Name: "interpolation", Typ: optab.PInterp, Def: "'bicubic'", At: func(o *optab.Op) any { return &optab.ArgsAt[AnyResResizeArgs](o).Interp }},
			// The model's vision tokens (batch_tokens): the processor's
			// patch side, the model's tokens a patch side, the base
			// image's tokens, OneVision's anyres_max_N (0: no pooling);
			// 0: no count.
			{Name: "patch", Typ: optab.PInt, Def: "0", At: func(o *optab.Op) any { return &optab.ArgsAt[AnyResResizeArgs](o).Patch }, Lo: 0, Hi: optab.MaxSide},
			{Name: "tokens_grid", Typ: optab.PInt, Def: "0", At: func(o *optab.Op) any { return &optab.ArgsAt[AnyResResizeArgs](o).TokensGrid }, Lo: 0, Hi: 1024},
			{Name: "base_tokens", Typ: optab.PInt, Def: "0", At: func(o *optab.Op) any { return &optab.ArgsAt[AnyResResizeArgs](o).BaseTokens }, Lo: 0, Hi: 1 << 20},
			{Name: "max_patches", Typ: optab.PInt, Def: "0", At: func(o *optab.Op) any { return &optab.ArgsAt[AnyResResizeArgs](o).MaxPatches }, Lo: 0, Hi: 1024},
		},
		Misplaced: "AnyResResize after other ops is not supported: it is the geometry, first and alone, fused into the decode",
		Format: func(b *strings.Builder, op *optab.Op) {
			ra := optab.ArgsOf[AnyResResizeArgs](op)
			fmt.Fprintf(b, "(grid_pinpoints=%v", ra.GridPinpoints)
			if ra.TokensGrid > 0 {
				fmt.Fprintf(b, ", patch=%d, tokens_grid=%d, base_tokens=%d, max_patches=%d", ra.Patch, ra.TokensGrid, ra.BaseTokens, ra.MaxPatches)
			}
			formatInterp(b, op)
		}})
	defineSelfSized(OpAnyResResize, selfSizer{check: checkAnyRes,
		tokens: func(op *optab.Op, w, h, _ int) (int64, error) { return anyResTokens(op, w, h) },
		size: func(op *optab.Op, w, h int) (int, int, error) { // the resized image's: the plan pads it to its resolution, centred (planBoxes), as a CenterCrop larger than the image pads it
			_, _, rw, rh := AnyResFit(op, w, h)
			return rw, rh, nil
		},
		canvas: func(op *optab.Op, w, h int) (int, int) {
			cw, ch, _, _ := AnyResFit(op, w, h)
			return cw, ch
		},
		bound: func(op *optab.Op) (int, int, string) {
			h, w := anyResBound(op)
			return h, w, "AnyResResize's own bound, its largest grid_pinpoints' height and width"
		}})
	definePlacer(OpPadToSquare, placeAt(placePadToSquare).followedBy(afterPadToSquare).needing(padToSquareNeeds)) // a canvas, as RandomZoomOut
	defineCanvas(OpPadToSquare, canvas{draw: squarePad,
		bound: func(_ *optab.Op, w, h int) (int64, int64) { // the square of the longer side
			m := int64(max(w, h))
			return m, m
		},
		cost: func(_ *optab.Op, at func(r float64) float64) (pz, mean, hi float64) { // a 4:3 photo's canvas, a 4:1 panorama's at worst
			return 1, at(math.Sqrt(4.0 / 3)), 2
		}})
	optab.Define(optab.Def{Kind: OpPadToSquare,
		Doc:   "LLaVA-OneVision's pad_to_square (its images of a record of several): the image padded with fill (one value a channel) to a square of its longer side, centred; first, then Resize((h, w))",
		Named: true, Geometry: true, Targets: optab.TargetsMove, Stays: true,
		Params: []optab.Param{
			{Name: "fill", Typ: optab.PFloats, Def: "(0, 0, 0)", At: func(o *optab.Op) any { return &optab.ArgsAt[PadToSquareArgs](o).Fill }, Lo: 0, Hi: 255},
		},
		Misplaced: "PadToSquare after other ops is not supported: it is first, then Resize((h, w)), fused into the decode",
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(fill=%s)", fillText(optab.FillOf(op).Fill))
		}})
}

// placePadToSquare places a PadToSquare: first, its fill a uint8 image's
// values.
func placePadToSquare(t *Transform, op *optab.Op, n int) error {
	if n > 0 {
		return transformErr("PadToSquare must be the first op (then Resize((h, w)))")
	}
	fill := optab.FillOf(op).Fill
	for _, f := range fill {
		if f != math.Trunc(f) {
			return transformErr("PadToSquare fill %v: want integers 0..255 (a uint8 image's values)", fill)
		}
	}
	t.zoom = op
	return nil
}

// afterPadToSquare is PadToSquare's rule for the geometry's ops after it:
// one Resize((h, w)).
func afterPadToSquare(t *Transform, op *optab.Op, _ int) error {
	if op.Kind == OpResize && op.Size[1] > 0 && t.resize == nil {
		return nil
	}
	return transformErr("PadToSquare then %s is not supported: follow PadToSquare with one Resize((h, w))", op.Kind)
}

// padToSquareNeeds refuses a PadToSquare with no Resize((h, w)) after it.
func padToSquareNeeds(t *Transform) error {
	if t.resize == nil {
		return transformErr("PadToSquare alone gives a size that varies per image: follow it with Resize((h, w))")
	}
	return nil
}

// squarePad is a PadToSquare's canvas for p's image: a square of its
// longer side, the image centred, as pad_to_square pads it (none when the
// image is square): drawn from nothing.
func squarePad(_ *optab.Op, w, h int, _ det.Key) (cw, ch int, pad [4]int, zoomed bool) {
	m := max(w, h)
	if w == h {
		return 0, 0, pad, false
	}
	left, top := (m-w)/2, (m-h)/2
	return m, m, [4]int{left, top, m - w - left, m - h - top}, true
}

// checkAnyRes checks an AnyResResize, the geometry's op n.
func checkAnyRes(op *optab.Op, n int) error {
	ra := optab.ArgsOf[AnyResResizeArgs](op)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: AnyResResize %s", errs.Unsupported, fmt.Sprintf(format, a...))
	}
	switch {
	case n > 0:
		return bad("must come first: it resizes the whole image")
	case len(ra.GridPinpoints) == 0 || len(ra.GridPinpoints)%2 != 0 || len(ra.GridPinpoints) > 2*maxPinpoints:
		return bad("grid_pinpoints of %d values: want 1 to %d (height, width) pairs, flat", len(ra.GridPinpoints), maxPinpoints)
	}
	for _, s := range ra.GridPinpoints {
		if s < 1 || s > optab.MaxSide {
			return bad("grid_pinpoints %v: sides must be in 1..%d", ra.GridPinpoints, optab.MaxSide)
		}
	}
	if (ra.TokensGrid > 0) != (ra.Patch > 0) {
		return bad("patch %d and tokens_grid %d: give both (the model's token count) or neither", ra.Patch, ra.TokensGrid)
	}
	return nil
}

// anyResTokens is the vision tokens a w x h image becomes under an
// AnyResResize with the model's count (patch, tokens_grid, base_tokens,
// max_patches): transformers' LlavaOnevisionProcessor's (and
// LlavaNextProcessor's) _get_number_of_features, the base image's tokens
// given whole. The canvas's grid of patches, tokens_grid tokens a patch
// side, less the rows or columns that are the padding's (the image's
// aspect, rounded as Python's int(round(x, 7))); a newline token a row;
// pooled to anyres_max_N patches' worth where the ratio passes 1.1.
func anyResTokens(op *optab.Op, w, h int) (int64, error) {
	ra := optab.ArgsOf[AnyResResizeArgs](op)
	if ra.TokensGrid < 1 || ra.Patch < 1 {
		return 0, fmt.Errorf("%w: transform: batch_tokens with AnyResResize wants the model's count: patch and tokens_grid (from_hf of the model's processor sets them)", errs.Unsupported)
	}
	bw, bh, _, _ := AnyResFit(op, w, h)
	g := ra.TokensGrid
	ch, cw := g*(bh/ra.Patch), g*(bw/ra.Patch)
	if ch < 1 || cw < 1 {
		return 0, fmt.Errorf("%w: transform: AnyResResize: resolution %dx%d is less than a patch of %d", errs.Unsupported, bw, bh, ra.Patch)
	}
	if float64(w)/float64(h) > float64(cw)/float64(ch) {
		nh := pyIntRound7(float64(h) * (float64(cw) / float64(w)))
		ch -= floorDiv(ch-nh, 2) * 2
	} else {
		nw := pyIntRound7(float64(w) * (float64(ch) / float64(h)))
		cw -= floorDiv(cw-nw, 2) * 2
	}
	unpadded, newlines := int64(ch)*int64(cw), int64(ch)
	if ra.MaxPatches > 0 {
		ratio := math.Sqrt(float64(int64(ch)*int64(cw)) / float64(int64(ra.MaxPatches)*int64(g)*int64(g)))
		if ratio > 1.1 {
			a, b := int64(pyFloorDivFloat(float64(ch), ratio)), int64(pyFloorDivFloat(float64(cw), ratio))
			unpadded, newlines = a*b, a
		}
	}
	return unpadded + newlines + int64(ra.BaseTokens), nil
}

// pyIntRound7 is Python's int(round(x, 7)) for x >= 0: x truncated, but
// taken up when it is within half of 1e-7 of the next integer.
func pyIntRound7(x float64) int {
	n := math.Floor(x)
	if x >= n+1-0.5e-7 {
		n++
	}
	return int(n)
}

// floorDiv is Python's // of ints.
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// pyFloorDivFloat is Python's a // b of floats (CPython's float_floor_div:
// through fmod, not a rounded quotient).
func pyFloorDivFloat(a, b float64) float64 {
	mod := math.Mod(a, b)
	div := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		div--
	}
	if div == 0 {
		return math.Copysign(0, a/b)
	}
	f := math.Floor(div)
	if div-f > 0.5 {
		f++
	}
	return f
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
	ra := optab.ArgsOf[AnyResResizeArgs](op)
	fw, fh := float64(w), float64(h)
	best, effBest, wasteBest := -1, 0, math.MaxInt
	for i := 0; i+1 < len(ra.GridPinpoints); i += 2 {
		ph, pw := ra.GridPinpoints[i], ra.GridPinpoints[i+1]
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
	bh, bw = ra.GridPinpoints[best], ra.GridPinpoints[best+1]
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
	ra := optab.ArgsOf[AnyResResizeArgs](op)
	for i := 0; i+1 < len(ra.GridPinpoints); i += 2 {
		h, w = max(h, ra.GridPinpoints[i]), max(w, ra.GridPinpoints[i+1])
	}
	return h, w
}

// VisionTokensIn is VisionTokens of an image of a record of images: with
// AnyRes's canvas and a PadToSquare view beside it (LLaVA-OneVision's
// image of a record of several: from_hf's third view), an image of a
// record of several is that square alone, the base image's tokens and a
// newline (LlavaOnevisionProcessor's num_image_tokens + 1).
func (t *Transform) VisionTokensIn(w, h, images int) (int64, error) {
	if images > 1 && len(t.views) > 2 {
		if v0 := t.views[0]; v0.resize != nil && v0.resize.Kind == OpAnyResResize {
			for _, v := range t.views[1:] {
				if v.zoom != nil && v.zoom.Kind == OpPadToSquare {
					ra := optab.ArgsOf[AnyResResizeArgs](v0.resize)
					if ra.TokensGrid < 1 {
						return anyResTokens(v0.resize, w, h) // refused: no count
					}
					return int64(ra.BaseTokens) + 1, nil
				}
			}
		}
	}
	return t.VisionTokens(w, h)
}
