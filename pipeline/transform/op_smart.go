package transform

// SmartResize: the image side of the Qwen2-VL family's processors
// (transformers' Qwen2VLImageProcessor, which Qwen2.5-VL and Qwen3-VL use
// too): the whole image resized to sides that are multiples of factor
// (patch_size * merge_size), its area within [min_pixels, max_pixels],
// its aspect kept as closely as the rounding allows (smart_resize), with
// torchvision's uint8 resize (bicubic, antialiased, by default). Each
// sample has its own size: it travels as RandomShortestSize's do
// (lsj.go), padded in its slot to the bound, its size beside it.

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// OpSmartResize is transformers' Qwen2-VL smart_resize then resize
// (Qwen2VLImageProcessor's do_resize): MinPixels and MaxPixels its pixel
// budget (size's shortest_edge and longest_edge), Multiple its factor
// (patch_size * merge_size), Interp its resample. The geometry, alone.
const OpSmartResize optab.OpKind = "SmartResize"

// SmartResizeArgs are SmartResize's arguments (optab.Op.Args), with
// transformers' names: min_pixels, max_pixels and factor, and its
// interpolation.
type SmartResizeArgs struct {
	MinPixels, MaxPixels, Factor int
	optab.Resampling
}

// maxSmartRatio is smart_resize's limit on the image's aspect ratio
// (longer over shorter side): past it, transformers raises.
const maxSmartRatio = 200

func init() {
	optab.Define(optab.Def{Kind: OpSmartResize,
		Doc:   "transformers' Qwen2-VL smart_resize: the whole image resized to sides that are multiples of factor (patch_size * merge_size), its area within [min_pixels, max_pixels], each sample its own size",
		Named: true, Geometry: true, Targets: optab.TargetsMove, Stays: true,
		Params: []optab.Param{
			{Name: "min_pixels", Typ: optab.PInt, Def: "3136", At: func(o *optab.Op) any { return &optab.ArgsAt[SmartResizeArgs](o).MinPixels }, Lo: 1, Hi: optab.MaxSide * optab.MaxSide},
			{Name: "max_pixels", Typ: optab.PInt, Def: "1003520", At: func(o *optab.Op) any { return &optab.ArgsAt[SmartResizeArgs](o).MaxPixels }, Lo: 1, Hi: optab.MaxSide * optab.MaxSide},
			{Name: "factor", Typ: optab.PInt, Def: "28", At: func(o *optab.Op) any { return &optab.ArgsAt[SmartResizeArgs](o).Factor }, Lo: 1, Hi: 1024},
			{Name: "interpolation", Typ: optab.PInterp, Def: "'bicubic'", At: func(o *optab.Op) any { return &optab.ArgsAt[SmartResizeArgs](o).Interp }},
		},
		Misplaced: "SmartResize after other ops is not supported: it is the geometry, first and alone, fused into the decode",
		Format: func(b *strings.Builder, op *optab.Op) {
			sa := optab.ArgsOf[SmartResizeArgs](op)
			fmt.Fprintf(b, "(min_pixels=%d, max_pixels=%d, factor=%d", sa.MinPixels, sa.MaxPixels, sa.Factor)
			formatInterp(b, op)
		}})
	defineSelfSized(OpSmartResize, selfSizer{check: checkSmart, size: SmartSize, afterCrop: (*Transform).smartAfterCrop, tokens: patchTokens(func(op *optab.Op) int { return optab.ArgsOf[SmartResizeArgs](op).Factor }),
		bound: func(op *optab.Op) (int, int, string) {
			sa := optab.ArgsOf[SmartResizeArgs](op)
			s := smartBound(op)
			return s, s, fmt.Sprintf("SmartResize's own bound, a square of twice max_pixels=%d", sa.MaxPixels)
		}})
}

// selfSizer is a self-sized resize's rule: a vision-language processor's
// resize of the whole image, each sample its own size (SmartResize,
// NaFlexResize, TileResize, AnyResResize: each registers its own, in its
// file, with defineSelfSized). check checks the op where it stands (the
// geometry's op n: first and alone); size is its size for a w x h image
// (the resized image's, before a canvas); canvas, where it pads the image
// onto one (centred), the canvas's (nil: size's); bound is its own bound
// on the
// samples (height, width and what it is), where the job gives none;
// afterCrop, where it may follow a trainer's RandomResizedCrop (op 1),
// places it there.
type selfSizer struct {
	check     func(op *optab.Op, n int) error
	size      func(op *optab.Op, w, h int) (rw, rh int, err error)
	canvas    func(op *optab.Op, w, h int) (cw, ch int)
	bound     func(op *optab.Op) (h, w int, from string)
	afterCrop func(t *Transform, op *optab.Op) error
	// tokens is the vision tokens a w x h image becomes under op, the
	// resize of a transform of views views (0: none; VisionTokens).
	tokens func(op *optab.Op, w, h, views int) (int64, error)
}

// selfSizers are the self-sized resizes, by kind.
var selfSizers = map[optab.OpKind]selfSizer{}

// defineSelfSized registers kind's rule (at init)
// and its place in the geometry.
func defineSelfSized(kind optab.OpKind, s selfSizer) {
	selfSizers[kind] = s
	definePlacer(kind, placeAt(func(t *Transform, op *optab.Op, n int) error { return t.placeSelfSized(s, op, n) }))
}

// placeSelfSized places op, a self-sized resize (s its rule), at the
// geometry's op n.
func (t *Transform) placeSelfSized(s selfSizer, op *optab.Op, n int) error {
	if s.afterCrop != nil && n == 1 && t.rrc != nil { // a trainer's RandomResizedCrop before the processor
		return s.afterCrop(t, op)
	}
	if err := s.check(op, n); err != nil {
		return err
	}
	t.resize = op
	return nil
}

// checkSmart checks a SmartResize, the geometry's op n.
func checkSmart(op *optab.Op, n int) error {
	sa := optab.ArgsOf[SmartResizeArgs](op)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: transform: SmartResize %s", errs.Unsupported, fmt.Sprintf(format, a...))
	}
	switch {
	case n > 0:
		return bad("must come first: it resizes the whole image")
	case sa.Factor < 1 || sa.Factor > 1024:
		return bad("factor %d: want 1..1024", sa.Factor)
	case sa.MinPixels < 1 || sa.MaxPixels < sa.MinPixels || sa.MaxPixels > optab.MaxSide*optab.MaxSide:
		return bad("min_pixels %d, max_pixels %d: want 1 <= min_pixels <= max_pixels <= %d", sa.MinPixels, sa.MaxPixels, optab.MaxSide*optab.MaxSide)
	}
	return nil
}

// SmartSize is transformers' smart_resize for a w x h image (its
// qwen2_vl image processor, 5.x), in float64 as Python's: the sides
// rounded to multiples of factor (round half to even, Python's round);
// past max_pixels both scaled by 1/beta, beta = sqrt(h*w / max_pixels),
// and floored (at least factor); under min_pixels scaled by beta =
// sqrt(min_pixels / (h*w)) and ceiled. An aspect past 200 is refused as
// transformers refuses it.
func SmartSize(op *optab.Op, w, h int) (rw, rh int, err error) {
	sa := optab.ArgsOf[SmartResizeArgs](op)
	if w < 1 || h < 1 {
		return 0, 0, fmt.Errorf("%w: SmartResize of a %dx%d image", errs.Unsupported, w, h)
	}
	if r := float64(max(w, h)) / float64(min(w, h)); r > maxSmartRatio {
		return 0, 0, fmt.Errorf("%w: SmartResize: the %dx%d image's aspect ratio is %g: want at most %d (transformers' smart_resize refuses it too)",
			errs.Unsupported, w, h, r, maxSmartRatio)
	}
	f := float64(sa.Factor)
	hb := int(math.RoundToEven(float64(h)/f)) * sa.Factor
	wb := int(math.RoundToEven(float64(w)/f)) * sa.Factor
	switch {
	case hb*wb > sa.MaxPixels:
		beta := math.Sqrt(float64(h*w) / float64(sa.MaxPixels))
		hb = max(sa.Factor, int(math.Floor(float64(h)/beta/f))*sa.Factor)
		wb = max(sa.Factor, int(math.Floor(float64(w)/beta/f))*sa.Factor)
	case hb*wb < sa.MinPixels:
		beta := math.Sqrt(float64(sa.MinPixels) / float64(h*w))
		hb = int(math.Ceil(float64(float64(h)*beta)/f)) * sa.Factor
		wb = int(math.Ceil(float64(float64(w)*beta)/f)) * sa.Factor
	}
	if hb < 1 || wb < 1 {
		return 0, 0, fmt.Errorf("%w: SmartResize makes the %dx%d image %dx%d: a side of 0 pixels (torchvision's resize fails too)",
			errs.Unsupported, w, h, wb, hb)
	}
	if wb > optab.MaxSide || hb > optab.MaxSide {
		return 0, 0, fmt.Errorf("%w: SmartResize makes the %dx%d image %dx%d: past the largest side, %d",
			errs.TooLarge, w, h, wb, hb, optab.MaxSide)
	}
	return wb, hb, nil
}

// smartBound is the bound on a SmartResize's samples without the job's
// max_size: a square whose area is twice max_pixels, its side rounded up
// to a multiple of factor (at most MaxSide), so that every sample of an
// aspect ratio up to about 2:1 fits; a longer one fails alone, naming
// the bound (give the job a max_size=(h, w) for such data).
func smartBound(op *optab.Op) int {
	sa := optab.ArgsOf[SmartResizeArgs](op)
	s := int(math.Ceil(math.Sqrt(2*float64(sa.MaxPixels))/float64(sa.Factor))) * sa.Factor
	return max(min(s, optab.MaxSide), sa.Factor)
}

// smartSize sets the output of a SmartResize geometry: each sample its own
// size, at most the job's bound (max_size) or smartBound.
func (t *Transform) smartSize() {
	t.geom, t.vary, t.varyGeom = ResizeCrop, true, true
	if c := t.preCrop; c != nil { // every image the crop's size: the size the resize makes of it
		w, h := c.Size[1], c.Size[0]
		if s := selfSizers[t.resize.Kind]; s.canvas != nil { // the canvas: its resolution
			w, h = s.canvas(t.resize, w, h)
		} else if rw, rh, err := selfSize(t.resize, w, h); err == nil {
			w, h = rw, rh
		}
		t.outH, t.outW = h, w
		t.boundFrom = fmt.Sprintf("the size %s makes of RandomResizedCrop's %dx%d", t.resize.Kind, c.Size[1], c.Size[0])
		return
	}
	t.outH, t.outW = t.bound[0], t.bound[1]
	if t.bound == [2]int{} || t.boundFrom != "" { // none given, or a dataset's sizes (not a bound on the op's)
		t.outH, t.outW, t.boundFrom = selfSizers[t.resize.Kind].bound(t.resize)
	}
}

// selfSized reports whether op is a vision-language processor's resize,
// each sample's size its own rule's (selfSizers).
func selfSized(op *optab.Op) bool {
	_, ok := selfSizers[op.Kind]
	return ok
}

// onCanvas reports whether op is a self-sized resize onto a canvas (an
// AnyResResize's resolution).
func onCanvas(op *optab.Op) bool {
	return op != nil && selfSizers[op.Kind].canvas != nil
}

// selfSize is a selfSized op's size for a w x h image.
func selfSize(op *optab.Op, w, h int) (rw, rh int, err error) {
	return selfSizers[op.Kind].size(op, w, h)
}

// KnownSizesBound is the largest sample, (height, width), t's
// vision-language geometry (SmartResize, NaFlexResize, TileResize,
// AnyResResize: each view's) makes of n images whose sizes size gives: the
// bound (max_size) a job over data of known sizes may give its samples
// rather than the geometry's own (AnyRes's largest pinpoint, twice
// max_pixels), so that a slot is its data's largest. ok is false where t
// has no such geometry or an image's size is unknown. An image the
// geometry refuses (past smart_resize's aspect limit) is passed over: it
// fails alone when made.
func (t *Transform) KnownSizesBound(n int, size func(i int) (w, h int, ok bool)) (bound [2]int, ok bool) {
	var ops []*optab.Op
	var seen []*Transform // each op's view
	for v := range t.Views() {
		if vt := t.View(v); vt.resize != nil && selfSized(vt.resize) {
			ops, seen = append(ops, vt.resize), append(seen, vt)
		}
	}
	if len(ops) == 0 || n < 1 {
		return bound, false
	}
	for i := range n {
		w0, h0, known := size(i)
		if !known {
			return [2]int{}, false
		}
		for v, op := range ops {
			w, h := seen[v].seenSize(w0, h0)
			var ow, oh int
			if s := selfSizers[op.Kind]; s.canvas != nil { // the canvas: its resolution
				ow, oh = s.canvas(op, w, h)
			} else if rw, rh, err := selfSize(op, w, h); err == nil {
				ow, oh = rw, rh
			}
			bound = [2]int{max(bound[0], oh), max(bound[1], ow)}
		}
	}
	return bound, bound[0] > 0 && bound[1] > 0
}

// smartAfterCrop takes a SmartResize after a RandomResizedCrop (a
// trainer's torchvision RandomResizedCrop before the Qwen2-VL processor):
// every image is then the crop's size, which smart_resize keeps where it
// is whole patches within the pixel budget, and torchvision's resize to
// the same size returns the image as it is; so the crop alone makes the
// processor's pixels, and the SmartResize stays for its vision tokens.
// (cropBefore takes a size smart_resize changes: two resizes.)
func (t *Transform) smartAfterCrop(op *optab.Op) error {
	if err := checkSmart(op, 0); err != nil {
		return err
	}
	t.smartAfter = op
	return nil
}

// cropBefore counts the ops before the geometry of a trainer's
// RandomResizedCrop before a processor's resize: ops[0] the crop, then
// ColorJitters or RandomPhotometricDistorts, then a resize of the whole
// image (wholeResize: a vision-language resize, Resize((h, w)),
// PadToSquare then Resize); 0 for none. The crop is then the image the
// rest of the geometry sees: decoded, cropped and resized to its size
// (two resizes, as torchvision's crop then the processor's resize make
// them), the ops before the resize run on it, then the canvas path
// resizes it. A crop then a SmartResize that keeps its size is
// smartAfterCrop's (the crop is the processor's pixels): 0.
func cropBefore(ops []optab.Op) int {
	if len(ops) < 2 || ops[0].Kind != OpRandomResizedCrop {
		return 0
	}
	m := 1
	for m < len(ops) && (ops[m].Kind == optab.OpColorJitter || ops[m].Kind == optab.OpRandomPhotometricDistort) {
		m++
	}
	if m == len(ops) || !wholeResize(&ops[m]) {
		return 0
	}
	if op := &ops[1]; m == 1 && op.Kind == OpSmartResize && checkSmart(op, 0) == nil {
		if w, h, err := SmartSize(op, ops[0].Size[1], ops[0].Size[0]); err == nil && w == ops[0].Size[1] && h == ops[0].Size[0] {
			return 0
		}
	}
	return m
}

// setPreCrop takes op, a RandomResizedCrop before a resize of the whole
// image (cropBefore), as t's crop before the geometry.
func (t *Transform) setPreCrop(op *optab.Op) error {
	if err := checkRRC(op); err != nil {
		return err
	}
	if optab.ArgsOf[RRCArgs](op).RandomInterp {
		return fmt.Errorf("%w: transform: RandomResizedCrop with a random interpolation before a resize of the whole image is not supported: give it one", errs.Unsupported)
	}
	if err := checkInterp(op, true); err != nil {
		return err
	}
	t.preCrop = op
	return nil
}

// planCrop draws t's crop before the geometry (preCrop) of p's source,
// from the stream a RandomResizedCrop's box is drawn from.
func (t *Transform) planCrop(p *SamplePlan, k det.Key) error {
	c := t.preCrop
	r := k.Stream(StreamCrop)
	p.PreCrop = true
	a := optab.ArgsOf[RRCArgs](c)
	p.PreCX, p.PreCY, p.PreCW, p.PreCH = RRCParams(&r, p.SrcW, p.SrcH, a.Scale, a.Ratio)
	p.PreW, p.PreH = c.Size[1], c.Size[0]
	p.PreInterp, p.PreAntialias = a.Interp, a.Antialiased()
	if p.PreCW < 1 || p.PreCH < 1 {
		return fmt.Errorf("%w: the transform's crop of the %dx%d image is empty (%dx%d)", errs.Unsupported, p.SrcW, p.SrcH, p.PreCW, p.PreCH)
	}
	return nil
}

// seenSize is the size t's geometry sees of a w x h image: its crop's
// before the resize (cropBefore; of several views, view 0's), else w x h.
func (t *Transform) seenSize(w, h int) (int, int) {
	v := t
	if t.views != nil {
		v = t.views[0]
	}
	if c := v.preCrop; c != nil {
		return c.Size[1], c.Size[0]
	}
	return w, h
}
