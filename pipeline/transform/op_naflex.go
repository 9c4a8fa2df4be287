package transform

// NaFlexResize: the image side of SigLIP2's NaFlex processor
// (transformers' Siglip2ImageProcessor): the whole image resized, its
// aspect kept, to the largest size whose patches of patch_size fit
// max_num_patches (get_image_size_for_max_num_patches: a binary search on
// the scale, each side rounded up to a multiple of the patch), with
// torchvision's uint8 resize (bilinear, antialiased, by default). Each
// sample has its own size, as SmartResize's (op_smart.go); the patchify,
// the padding to max_num_patches, the attention mask and the spatial
// shapes are the trainer's device's (Batch.vision_inputs).

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// OpNaFlexResize is Siglip2ImageProcessor's resize: Multiple its
// patch_size, MaxPixels its max_num_patches, Interp its resample.
const OpNaFlexResize optab.OpKind = "NaFlexResize"

// NaFlexResizeArgs are NaFlexResize's arguments (optab.Op.Args):
// patch_size, max_num_patches and interpolation.
type NaFlexResizeArgs struct {
	PatchSize, MaxPatches int
	optab.Resampling
}

func init() {
	optab.Define(optab.Def{Kind: OpNaFlexResize,
		Doc:   "transformers' SigLIP2 NaFlex resize: the whole image resized to the largest size, aspect kept, whose patch_size patches fit max_num_patches (sides multiples of patch_size), each sample its own size",
		Named: true, Geometry: true, Targets: optab.TargetsMove, Stays: true,
		Params: []optab.Param{
			{Name: "patch_size", Typ: optab.PInt, Def: "16", At: func(o *optab.Op) any { return &optab.ArgsAt[NaFlexResizeArgs](o).PatchSize }, Lo: 1, Hi: 1024},
			{Name: "max_num_patches", Typ: optab.PInt, Def: "256", At: func(o *optab.Op) any { return &optab.ArgsAt[NaFlexResizeArgs](o).MaxPatches }, Lo: 1, Hi: 1 << 20},
			{Name: "interpolation", Typ: optab.PInterp, Def: "'bilinear'", At: func(o *optab.Op) any { return &optab.ArgsAt[NaFlexResizeArgs](o).Interp }},
		},
		Misplaced: "NaFlexResize after other ops is not supported: it is the geometry, first and alone, fused into the decode",
		Format: func(b *strings.Builder, op *optab.Op) {
			na := optab.ArgsOf[NaFlexResizeArgs](op)
			fmt.Fprintf(b, "(patch_size=%d, max_num_patches=%d", na.PatchSize, na.MaxPatches)
			formatInterp(b, op)
		}})
	defineSelfSized(OpNaFlexResize, selfSizer{check: checkNaFlex, size: NaFlexSize, tokens: patchTokens(func(op *optab.Op) int { return optab.ArgsOf[NaFlexResizeArgs](op).PatchSize }),
		bound: func(op *optab.Op) (int, int, string) {
			na := optab.ArgsOf[NaFlexResizeArgs](op)
			s := naflexBound(op)
			return s, s, fmt.Sprintf("NaFlexResize's own bound, a square of twice max_num_patches=%d patches", na.MaxPatches)
		}})
}

// checkNaFlex checks a NaFlexResize, the geometry's op n.
func checkNaFlex(op *optab.Op, n int) error {
	na := optab.ArgsOf[NaFlexResizeArgs](op)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: NaFlexResize %s", errs.Unsupported, fmt.Sprintf(format, a...))
	}
	switch {
	case n > 0:
		return bad("must come first: it resizes the whole image")
	case na.PatchSize < 1 || na.PatchSize > 1024:
		return bad("patch_size %d: want 1..1024", na.PatchSize)
	case na.MaxPatches < 1 || na.MaxPatches > 1<<20:
		return bad("max_num_patches %d: want 1..%d", na.MaxPatches, 1<<20)
	}
	return nil
}

// NaFlexSize is transformers' get_image_size_for_max_num_patches for a w x
// h image (siglip2's image processor, 5.x), in float64 as Python's: the
// scale binary-searched in [1e-6, 100] to within 1e-5, the largest whose
// sides, each ceil(side * scale / patch) * patch and at least one patch,
// make at most max_num_patches patches.
func NaFlexSize(op *optab.Op, w, h int) (rw, rh int, err error) {
	na := optab.ArgsOf[NaFlexResizeArgs](op)
	if w < 1 || h < 1 {
		return 0, 0, fmt.Errorf("%w: NaFlexResize of a %dx%d image", errs.Unsupported, w, h)
	}
	p := na.PatchSize
	scaled := func(scale float64, size int) int {
		s := int(math.Ceil(float64(size)*scale/float64(p))) * p
		return max(p, s)
	}
	const eps = 1e-5
	lo, hi := eps/10, 100.0
	for hi-lo >= eps {
		scale := (lo + hi) / 2
		th, tw := scaled(scale, h), scaled(scale, w)
		if float64(th)/float64(p)*(float64(tw)/float64(p)) <= float64(na.MaxPatches) {
			lo = scale
		} else {
			hi = scale
		}
	}
	rh, rw = scaled(lo, h), scaled(lo, w)
	if rw > optab.MaxSide || rh > optab.MaxSide {
		return 0, 0, fmt.Errorf("%w: NaFlexResize makes the %dx%d image %dx%d: past the largest side, %d",
			errs.TooLarge, w, h, rw, rh, optab.MaxSide)
	}
	return rw, rh, nil
}

// naflexBound is the bound on a NaFlexResize's samples without the job's
// max_size: a square of twice max_num_patches patches (at most MaxSide),
// so that every sample of an aspect up to about 2:1 fits; a longer one
// fails alone, naming the bound.
func naflexBound(op *optab.Op) int {
	na := optab.ArgsOf[NaFlexResizeArgs](op)
	s := int(math.Ceil(math.Sqrt(2*float64(na.MaxPatches)))) * na.PatchSize
	return max(min(s, optab.MaxSide), na.PatchSize)
}

// VisionTokens is the vision tokens a w x h image becomes under t's
// vision-language geometry, its resize's rule (selfSizer.tokens):
// SmartResize's (h' / factor) * (w' / factor) (the patches merged, as the
// model's image placeholder counts them), NaFlexResize's patches,
// TileResize's tiles (and thumbnail) times tokens_per_tile,
// AnyResResize's the model's count (its patch grid less the padding,
// newlines, pooling, the base image; anyResTokens). A transform of
// another geometry has none.
func (t *Transform) VisionTokens(w, h int) (int64, error) {
	w, h = t.seenSize(w, h) // a crop's before the processor: its size, every image's
	op, views := t.resize, 0
	if t.views != nil { // InternVL's canvas and thumbnail (op_tiles.go), AnyRes's canvas and base (op_anyres.go)
		op, views = t.views[0].resize, len(t.views)
	} else if sa := t.smartAfter; sa != nil { // a RandomResizedCrop's size, which smart_resize keeps
		f := int64(optab.ArgsOf[SmartResizeArgs](sa).Factor)
		return (int64(t.outH) / f) * (int64(t.outW) / f), nil
	}
	if op != nil {
		if s := selfSizers[op.Kind]; s.tokens != nil {
			return s.tokens(op, w, h, views)
		}
	}
	return 0, errNoVisionTokens
}

// errNoVisionTokens is VisionTokens' error for a geometry without them.
var errNoVisionTokens = fmt.Errorf("%w: transform: batch_tokens wants a SmartResize, NaFlexResize, TileResize or AnyResResize geometry: its images have no vision tokens", errs.Unsupported)

// patchTokens is SmartResize's and NaFlexResize's vision tokens, each
// with its side of a token (side: factor, the patches merged; patch_size):
// the resized image's tokens, in a transform of no views.
func patchTokens(side func(op *optab.Op) int) func(op *optab.Op, w, h, views int) (int64, error) {
	return func(op *optab.Op, w, h, views int) (int64, error) {
		if views > 0 {
			return 0, errNoVisionTokens
		}
		rw, rh, err := selfSize(op, w, h)
		if err != nil {
			return 0, err
		}
		f := int64(side(op))
		return (int64(rh) / f) * (int64(rw) / f), nil
	}
}
