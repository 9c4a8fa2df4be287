package transform

// The geometry: the ops fused into the decode (torchvision.transforms.v2's
// RandomResizedCrop, Resize, CenterCrop, RandomCrop, Pad, and detection's
// RandomZoomOut, RandomIoUCrop, ScaleJitter, FixedSizeCrop,
// RandomShortestSize, RandomResize), and their functional ops with how they
// move a job's targets (the box, keypoint and mask kernels of crop, resize,
// center_crop, pad). Here too, for torchvision's crops, pads and resizes:
// where each may stand (its placer, the ordering rules said once), the
// size they give the batch (cropSize) and a sample's draw of them
// (cropPlan), which newTransform's loop and planBoxes call (transform.go,
// plan.go). ScaleJitter's and FixedSizeCrop's placers and draws are
// lsj.go's, the detection ops' draws detgeom.go's.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

const (
	OpRandomResizedCrop optab.OpKind = "RandomResizedCrop"
	OpResize            optab.OpKind = "Resize"
	OpCenterCrop        optab.OpKind = "CenterCrop"
	OpRandomCrop        optab.OpKind = "RandomCrop"
	OpPad               optab.OpKind = "Pad"
	// OpRandomZoomOut pads the image onto a random larger canvas (SSD's
	// zoom out); first, before Resize(h, w), RandomCrop or CenterCrop.
	OpRandomZoomOut optab.OpKind = "RandomZoomOut"
	// OpRandomIoUCrop is SSD's IoU crop, drawn against the sample's boxes
	// (a job with targets only); first or after a RandomZoomOut, then
	// Resize(h, w).
	OpRandomIoUCrop optab.OpKind = "RandomIoUCrop"
)

// The geometry's own arguments (optab.Op.Args) where an op has some of
// its own, their fill and interpolation included (optab.Filling,
// optab.Resampling); what the geometry ops share (size, p) stays
// optab.Op's.
type (
	// ZoomOutArgs are RandomZoomOut's side_range (min, max) and fill; its
	// p is optab.Op.P.
	ZoomOutArgs struct {
		SideRange [2]float64
		optab.Filling
	}
	// IoUCropArgs are RandomIoUCrop's (min_scale, max_scale) as Scale,
	// (min_aspect_ratio, max_aspect_ratio) as Ratio, sampler_options (the
	// minimal IoUs; one >= 1 leaves the image) and trials; its p is
	// optab.Op.P.
	IoUCropArgs struct {
		Scale, Ratio [2]float64
		Options      []float64
		Trials       int
	}
	// ShortestSizeArgs are RandomShortestSize's min_size and max_size (0:
	// None).
	ShortestSizeArgs struct {
		MinSize []int
		MaxSize int
		optab.Resampling
	}
	// RandomResizeArgs are RandomResize's min_size and max_size, and its
	// interpolation and antialias.
	RandomResizeArgs struct {
		MinSize, MaxSize int
		optab.Resampling
	}
	// ResizeArgs are Resize's interpolation and antialias; its size is
	// optab.Op.Size.
	ResizeArgs struct{ optab.Resampling }
	// RRCArgs are RandomResizedCrop's scale (the area's range) and ratio
	// (the aspect's; zero: torchvision's defaults, (0.08, 1) and (3/4,
	// 4/3)), and RandomInterp, that it draws bilinear or bicubic per
	// sample, after its crop (timm's
	// RandomResizedCropAndInterpolation(interpolation="random")), its
	// Interp then bilinear. Its size is optab.Op.Size.
	RRCArgs struct {
		Scale, Ratio [2]float64
		RandomInterp bool
		optab.Resampling
	}
	// ScaleJitterArgs are ScaleJitter's scale_range, interpolation and
	// antialias; its target_size is optab.Op.Size (height, width).
	ScaleJitterArgs struct {
		Scale [2]float64
		optab.Resampling
	}
	// PadArgs are Pad's padding (left, top, right, bottom) and fill.
	PadArgs struct {
		Padding [4]int
		optab.Filling
	}
	// RandomCropArgs are RandomCrop's padding (as Pad's), pad_if_needed
	// and fill; its size is optab.Op.Size.
	RandomCropArgs struct {
		Padding     [4]int
		PadIfNeeded bool
		optab.Filling
	}
	// FixedSizeCropArgs are FixedSizeCrop's fill; its size is
	// optab.Op.Size.
	FixedSizeCropArgs struct{ optab.Filling }
)

const (
	// OpScaleJitter is torchvision.transforms.v2's ScaleJitter: the image
	// resized by min(Size[0]/h, Size[1]/w) (Size the target_size as
	// (height, width)) times a scale uniform in Scale (scale_range), each
	// side truncated; Interp and NoAntialias its resampling. A geometry
	// op, first, then FixedSizeCrop.
	OpScaleJitter optab.OpKind = "ScaleJitter"
	// OpFixedSizeCrop is torchvision's FixedSizeCrop (its detection
	// references' and prototype transforms'): a crop of at most Size
	// (height, width) at one uniform r (top int((h - height) * r), left
	// int((w - width) * r) where the image is larger), padded on the right
	// and bottom with Fill to Size; the target boxes it leaves empty are
	// dropped with their labels. A geometry op: first, or after a
	// ScaleJitter.
	OpFixedSizeCrop optab.OpKind = "FixedSizeCrop"
	// OpRandomShortestSize is torchvision.transforms.v2's
	// RandomShortestSize: the shorter side resized to one of its min_size
	// (ShortestSizeArgs), drawn uniformly, the longer at most MaxSize (max_size;
	// 0: None), each side truncated; Interp and NoAntialias its
	// resampling. A geometry op, first; without a CenterCrop after it each
	// sample has its own size (sizes.go), MaxSize its bound.
	OpRandomShortestSize optab.OpKind = "RandomShortestSize"
	// OpRandomResize is torchvision.transforms.v2's RandomResize: the
	// shorter side resized to a size uniform in [min_size, max_size)
	// (RandomResizeArgs), the longer scaled and truncated (Resize(int)).
	// A geometry op, first, then a CenterCrop: the longer side has no
	// bound of its own.
	OpRandomResize optab.OpKind = "RandomResize"
)

func init() {
	size := optab.Param{Name: "size", Typ: optab.PSize}
	interp := optab.Param{Name: "interpolation", Typ: optab.PInterp, Def: "'bilinear'"}
	antialias := optab.Param{Name: "antialias", Typ: optab.PBool, Def: "True"}
	// A fill per type on the ops whose masks follow (optab.Filling's FillTyped).
	fill := optab.Param{Name: "fill", Typ: optab.PFillBy, Def: "0"}
	mode := optab.Param{Name: "padding_mode", Typ: optab.PString, Def: "'constant'"}
	geometry := func(d optab.Def) {
		d.Geometry, d.Targets = true, optab.TargetsMove
		if d.Misplaced == "" {
			d.Misplaced = "a geometry op after other ops: the geometry must be the first op (one RandomResizedCrop, RandomCrop, or Resize then CenterCrop), fused into the decode"
		}
		optab.Define(d)
	}
	lsj := func(d optab.Def) {
		d.Misplaced, d.Stays = fmt.Sprintf("%s after other ops is not supported: it is the geometry, first, fused into the decode", d.Kind), true
		geometry(d)
	}
	geometry(optab.Def{Kind: OpRandomResizedCrop, Doc: "a random crop of area scale and aspect ratio, resized to size",
		Params: []optab.Param{size, {Name: "scale", Typ: optab.PRange, Def: "(0.08, 1.0)"}, {Name: "ratio", Typ: optab.PRange, Def: "(0.75, 1.3333333333333333)"},
			interp, antialias},
		Stays: true, Format: formatSize, FromArgs: rrcArgs})
	geometry(optab.Def{Kind: OpResize, Doc: "resized to (h, w), or its shorter side to size (then a CenterCrop)",
		Params: []optab.Param{size, interp, {Name: "max_size", Typ: optab.PInt, Def: "None"}, antialias},
		Stays:  true, AfterGrow: fixSize, FromArgs: resizeArgs, Format: func(b *strings.Builder, op *optab.Op) {
			if op.Size[1] == 0 {
				fmt.Fprintf(b, "(%d", op.Size[0])
			} else {
				fmt.Fprintf(b, "(%dx%d", op.Size[0], op.Size[1])
			}
			formatInterp(b, op)
		}})
	geometry(optab.Def{Kind: OpCenterCrop, Doc: "the central crop of size (padded where the image is smaller)",
		Params: []optab.Param{size}, Stays: true, AfterGrow: fixSize, Format: formatSize,
		FromArgs: func(a *optab.Args) optab.Op { return optab.Op{Size: a.Size("size")} }})
	geometry(optab.Def{Kind: OpRandomCrop, Doc: "a crop of size at a random place, after padding (constant fill)",
		Params: []optab.Param{size, {Name: "padding", Typ: optab.PInts, Def: "None"}, {Name: "pad_if_needed", Typ: optab.PBool, Def: "False"}, fill, mode},
		Stays:  true, Masks: fillMasks,
		FromArgs: func(a *optab.Args) optab.Op {
			ca := &RandomCropArgs{PadIfNeeded: a.Bool("pad_if_needed"), Filling: fillArgs(a)}
			if !a.IsNone("padding") {
				ca.Padding = padArgs(a)
			}
			return optab.Op{Size: a.Size("size"), Args: ca}
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			ca := optab.ArgsOf[RandomCropArgs](op)
			fmt.Fprintf(b, "(%dx%d, padding=%v, pad_if_needed=%v, fill=%v)", op.Size[0], op.Size[1], ca.Padding, ca.PadIfNeeded, ca.Fill)
		}})
	geometry(optab.Def{Kind: OpPad, Doc: "padding with a constant fill, right before or after a RandomCrop or CenterCrop",
		Params: []optab.Param{{Name: "padding", Typ: optab.PInts}, fill, mode},
		Stays:  true, Masks: fillMasks,
		FromArgs: func(a *optab.Args) optab.Op {
			return optab.Op{Args: &PadArgs{Padding: padArgs(a), Filling: fillArgs(a)}}
		},
		Misplaced: "Pad after other ops is not supported: Pad comes right before or right after a RandomCrop or CenterCrop (or give RandomCrop its padding)",
		Format: func(b *strings.Builder, op *optab.Op) {
			pa := optab.ArgsOf[PadArgs](op)
			fmt.Fprintf(b, "(padding=%v, fill=%v)", pa.Padding, pa.Fill)
		}})
	geometry(optab.Def{Kind: OpRandomZoomOut, Doc: "with probability p, the image padded with fill onto a canvas side_range times its size",
		Params: []optab.Param{fill, {Name: "side_range", Typ: optab.PRange, Def: "(1.0, 4.0)"}, optab.PParam(0.5)}, Masks: fillMasks,
		FromArgs: func(a *optab.Args) optab.Op {
			return optab.Op{P: a.Float("p"), Args: &ZoomOutArgs{SideRange: a.Pair("side_range"), Filling: a.TypedFill("fill", false)}}
		},
		Misplaced: "RandomZoomOut after other ops is not supported: it is the first op (then Resize(h, w), RandomCrop or CenterCrop), fused into the decode",
		Format: func(b *strings.Builder, op *optab.Op) {
			za := optab.ArgsOf[ZoomOutArgs](op)
			fmt.Fprintf(b, "(fill=%v, side_range=%v, p=%g)", za.Fill, za.SideRange, op.P)
		}})
	geometry(optab.Def{Kind: OpRandomIoUCrop, Doc: "SSD's crop of a minimal IoU with the sample's boxes (then Resize(h, w))",
		Params: []optab.Param{{Name: "min_scale", Typ: optab.PFloat, Def: "0.3"}, {Name: "max_scale", Typ: optab.PFloat, Def: "1.0"},
			{Name: "min_aspect_ratio", Typ: optab.PFloat, Def: "0.5"}, {Name: "max_aspect_ratio", Typ: optab.PFloat, Def: "2.0"},
			{Name: "sampler_options", Typ: optab.PFloats, Def: "None"}, {Name: "trials", Typ: optab.PInt, Def: "40"},
			optab.KeywordOnly(optab.Param{Name: "p", Typ: optab.PFloat, Def: "1.0", At: func(o *optab.Op) any { return &o.P }, Lo: 0, Hi: 1})},
		NeedsTargets: true, FromArgs: iouCropArgs,
		Misplaced: "RandomIoUCrop after other ops is not supported: it is the first op, or right after a RandomZoomOut (then Resize(h, w)), fused into the decode",
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[IoUCropArgs](op)
			fmt.Fprintf(b, "(scale=%v, aspect_ratio=%v, sampler_options=%v, trials=%d", a.Scale, a.Ratio, a.Options, a.Trials)
			if p := iouP(op); p < 1 {
				fmt.Fprintf(b, ", p=%g", p)
			}
			b.WriteString(")")
		}})
	lsj(optab.Def{Kind: OpScaleJitter, Doc: "resized by target_size times a scale drawn in scale_range (large-scale jitter)",
		Params: []optab.Param{{Name: "target_size", Typ: optab.PSize}, {Name: "scale_range", Typ: optab.PRange, Def: "(0.1, 2.0)"}, interp, antialias},
		FromArgs: func(a *optab.Args) optab.Op {
			// torchvision's target_size pairs its second value with the
			// height (ScaleJitter.make_params).
			ts := a.Size("target_size")
			return optab.Op{Size: [2]int{ts[1], ts[0]}, Args: &ScaleJitterArgs{Scale: a.Pair("scale_range"), Resampling: a.Resampling("interpolation")}}
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(%dx%d, scale_range=%v", op.Size[0], op.Size[1], optab.ArgsOf[ScaleJitterArgs](op).Scale)
			formatInterp(b, op)
		}})
	lsj(optab.Def{Kind: OpFixedSizeCrop, Doc: "a random crop of at most size, padded on the right and bottom with fill to size",
		Params: []optab.Param{size, {Name: "fill", Typ: optab.PFill, Def: "0"}, mode},
		FromArgs: func(a *optab.Args) optab.Op {
			return optab.Op{Size: a.Size("size"), Args: &FixedSizeCropArgs{fillArgs(a)}}
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			fmt.Fprintf(b, "(%dx%d, fill=%v)", op.Size[0], op.Size[1], optab.FillOf(op).Fill)
		}})
	lsj(optab.Def{Kind: OpRandomShortestSize, Doc: "the shorter side resized to one of min_size, the longer at most max_size",
		Params: []optab.Param{{Name: "min_size", Typ: optab.PInts}, {Name: "max_size", Typ: optab.PInt, Def: "None"}, interp, antialias},
		FromArgs: func(a *optab.Args) optab.Op {
			sa := &ShortestSizeArgs{MinSize: a.Ints("min_size"), Resampling: a.Resampling("interpolation")}
			if !a.IsNone("max_size") {
				sa.MaxSize = min(a.Int("max_size"), 1<<20)
			}
			return optab.Op{Args: sa}
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			sa := optab.ArgsOf[ShortestSizeArgs](op)
			fmt.Fprintf(b, "(min_size=%v, max_size=%d", sa.MinSize, sa.MaxSize)
			formatInterp(b, op)
		}})
	lsj(optab.Def{Kind: OpRandomResize, Doc: "the shorter side resized to a size drawn in [min_size, max_size)",
		Params: []optab.Param{{Name: "min_size", Typ: optab.PInt}, {Name: "max_size", Typ: optab.PInt}, interp, antialias},
		FromArgs: func(a *optab.Args) optab.Op {
			return optab.Op{Args: &RandomResizeArgs{MinSize: min(a.Int("min_size"), 1<<20), MaxSize: min(a.Int("max_size"), 1<<20),
				Resampling: a.Resampling("interpolation")}}
		},
		Format: func(b *strings.Builder, op *optab.Op) {
			a := optab.ArgsOf[RandomResizeArgs](op)
			fmt.Fprintf(b, "(min_size=%d, max_size=%d", a.MinSize, a.MaxSize)
			formatInterp(b, op)
		}})
}

// The places of torchvision's crops, pads and resizes in the geometry
// (placer: each op's ordering rule, here only; RandomZoomOut's also on
// the ops after it).
func init() {
	definePlacer(OpRandomZoomOut, placeAt(placeZoomOut).followedBy(afterZoomOut).needing(zoomOutNeeds))
	defineCanvas(OpRandomZoomOut, canvas{draw: drawZoomOut, bound: zoomOutBound, cost: zoomOutCost})
	definePlacer(OpRandomIoUCrop, placer{place: (*Transform).iouCrop}) // the Resize after it is next (transform.go's checks)
	definePlacer(OpPad, placeAt(placePad).needing(padNeeds))
	definePlacer(OpRandomCrop, placeAt(placeRandomCrop))
	definePlacer(OpRandomResizedCrop, placeAt(placeRRC))
	definePlacer(OpResize, placeAt(placeResize))
	definePlacer(OpRandomShortestSize, placeAt(placeResize)) // RandomResize's is op_seg.go's
	definePlacer(OpCenterCrop, placeAt(placeCenterCrop))
}

// cropSize sets t's output size from its crops, pads and resizes (or a
// self-sized resize's rule, or the image's own size where it has none),
// once they are placed: the size the batch's samples take.
func (t *Transform) cropSize() error {
	switch {
	case t.rcrop != nil:
		t.geom, t.outH, t.outW = CropResize, t.rcrop.Size[0], t.rcrop.Size[1]
	case t.rrc != nil:
		t.geom, t.outH, t.outW = CropResize, t.rrc.Size[0], t.rrc.Size[1]
	case t.resize != nil && selfSized(t.resize):
		if t.center != nil || t.zoom != nil {
			return transformErr("%s is the geometry alone (the vision-language processors resize the whole image): no geometry op before it (ColorJitter may come before it), no crop after it", t.resize.Kind)
		}
		t.smartSize()
	case t.center != nil:
		t.geom, t.outH, t.outW = ResizeCrop, t.center.Size[0], t.center.Size[1]
		if t.resize == nil {
			t.geom = CropResize
		}
	case t.resize != nil && t.resize.Size[1] > 0:
		t.geom, t.outH, t.outW = ResizeCrop, t.resize.Size[0], t.resize.Size[1]
	case t.resize != nil:
		if err := t.varySize(); err != nil {
			return err
		}
	case t.iou != nil: // a RandomIoUCrop without a Resize: the crop's own size (lsj.go)
		if err := t.boundSize("RandomIoUCrop"); err != nil {
			return err
		}
	case len(t.ops) > 0 && optab.Grows(&t.ops[0]):
		// The image whole at its own size, each sample's, then the ops:
		// growRotate wants a Resize((h, w)) or CenterCrop after them.
		t.geom, t.whole, t.vary, t.varyGeom, t.outW, t.outH = CropResize, true, true, true, 1, 1
	case t.bound != [2]int{} && !slices.ContainsFunc(t.ops, func(op optab.Op) bool { return optab.Lookup(op.Kind) != nil && optab.Lookup(op.Kind).Geometry }):
		// no geometry: the image whole at its own size (lsj.go, the bound)
		t.own = true
		if err := t.boundSize(""); err != nil {
			return err
		}
	case len(t.ops) > 0:
		return transformErr("op 0 is %s: the first op must be the geometry (RandomResizedCrop, Resize(h, w) or Resize then CenterCrop, or CenterCrop), which fixes the batch's size; "+
			"or give the job a bound on the sizes, max_size=(h, w), to take each image at its own size", t.ops[0].Kind)
	default:
		return transformErr("no geometry op: a batch needs a fixed size (RandomResizedCrop, Resize(h, w) or CenterCrop)")
	}
	return nil
}

// cropPlan draws the plan p of torchvision's crops, pads and resizes (a
// self-sized resize's too) for a srcW x srcH image (a crop before the
// geometry's, if any) of key k: the crop, the resize and the canvas, as
// cropSize sized them. bicubic is a RandomResizedCrop's random
// interpolation, drawn after its crop.
func (t *Transform) cropPlan(p *SamplePlan, k det.Key, src *targets.Targets, scratch *[][4]float32, srcW, srcH int) (bicubic bool, err error) {
	switch {
	case t.iou != nil:
		if err := t.iouPlan(p, k, src, scratch); err != nil {
			return false, err
		}
		if t.resize == nil { // the crop at its own size, under the job's bound
			p.OutW, p.OutH = p.CW, p.CH
		}
	case t.rcrop != nil:
		if err := t.randomCrop(p, k); err != nil {
			return false, err
		}
	case t.rrc != nil:
		r := k.Stream(StreamCrop)
		a := optab.ArgsOf[RRCArgs](t.rrc)
		p.CX, p.CY, p.CW, p.CH = RRCParams(&r, srcW, srcH, a.Scale, a.Ratio)
		if a.RandomInterp {
			// timm's random.choice((BILINEAR, BICUBIC)), after the crop.
			bicubic = r.Float64() >= 0.5
		}
	case t.pad != nil || (t.zoom != nil && t.resize == nil): // Pad or RandomZoomOut, then CenterCrop
		if err := t.padCenterCrop(p); err != nil {
			return false, err
		}
	case t.resize != nil:
		p.RW, p.RH = ResizedSize(srcW, srcH, t.resize.Size)
		if selfSized(t.resize) { // op_smart.go, op_naflex.go
			if p.RW, p.RH, err = selfSize(t.resize, srcW, srcH); err != nil {
				return false, err
			}
		} else if t.resize.Kind != OpResize { // RandomShortestSize, RandomResize: drawn
			p.RW, p.RH = ResizeSize(t.resize, k, srcW, srcH)
		}
		if t.varyGeom { // the sample's own size (lsj.go)
			p.OutW, p.OutH = p.RW, p.RH
		}
		p.CW, p.CH = p.RW, p.RH
		if p.Zoomed { // RandomZoomOut then Resize(h, w): the canvas resized
			p.Canvas, p.RCFill = true, optab.FillOf(t.zoom).Fill
		} else if len(t.pre) > 0 || t.preCrop != nil { // ops (or a crop) before: the image's own canvas
			p.Canvas, p.ZoomW, p.ZoomH = true, srcW, srcH
		}
		p.KW, p.KH = p.ZoomW, p.ZoomH
		if s := selfSizers[t.resize.Kind]; s.canvas != nil { // resized, then padded to its canvas, centred (op_anyres.go)
			bw, bh := s.canvas(t.resize, srcW, srcH)
			p.OutW, p.OutH, p.CW, p.CH = bw, bh, bw, bh
			p.CX, p.CY = -((bw - p.RW) / 2), -((bh - p.RH) / 2)
		}
		if t.center != nil {
			p.CW, p.CH = t.center.Size[1], t.center.Size[0]
			p.CX, p.CY = CenterOffset(p.RW, p.CW), CenterOffset(p.RH, p.CH)
		}
	default: // CenterCrop alone
		p.CW, p.CH = t.center.Size[1], t.center.Size[0]
		p.CX, p.CY = CenterOffset(srcW, p.CW), CenterOffset(srcH, p.CH)
	}
	return bicubic, nil
}

// maxZoom bounds RandomZoomOut's side_range: a canvas at most 16 times the
// image a side (torchvision's default is 4).
const maxZoom = 16

// placeZoomOut places a RandomZoomOut: first, with its p, side_range and
// fill checked.
func placeZoomOut(t *Transform, op *optab.Op, n int) error {
	if n > 0 {
		return transformErr("RandomZoomOut must be the first op (then Resize(h, w), RandomCrop or CenterCrop)")
	}
	if !(op.P >= 0 && op.P <= 1) {
		return transformErr("RandomZoomOut p=%v: want 0 <= p <= 1", op.P)
	}
	if sr := optab.ArgsOf[ZoomOutArgs](op).SideRange; !(sr[0] >= 1 && sr[0] <= sr[1] && sr[1] <= maxZoom) {
		return transformErr("RandomZoomOut side_range %v: want 1 <= min <= max <= %d (torchvision's: min >= 1, min <= max)", sr, maxZoom)
	}
	if err := checkPadding(op, [4]int{}); err != nil {
		return err
	}
	t.zoom = op
	return nil
}

// afterZoomOut is RandomZoomOut's rule for the geometry's ops after it:
// one Resize(h, w), RandomCrop (its padding of the same fill) or
// CenterCrop.
func afterZoomOut(t *Transform, op *optab.Op, _ int) error {
	switch {
	case op.Kind == OpPad || op.Kind == OpRandomResizedCrop:
		return transformErr("%s after RandomZoomOut is not supported: follow RandomZoomOut with Resize(h, w), RandomCrop or CenterCrop", op.Kind)
	case op.Kind == OpResize && op.Size[1] == 0:
		return transformErr("Resize(%d) of the shorter side after RandomZoomOut is not supported: give Resize both sides, (h, w)", op.Size[0])
	case op.Kind == OpCenterCrop && t.resize != nil:
		return transformErr("RandomZoomOut, Resize then CenterCrop is not supported: after RandomZoomOut, Resize(h, w), RandomCrop or CenterCrop alone")
	case op.Kind == OpRandomCrop && optab.ArgsOf[RandomCropArgs](op).pads() && optab.FillOf(op).Fill != optab.FillOf(t.zoom).Fill:
		return transformErr("RandomZoomOut fill %v then RandomCrop padding with fill %v: padding of two fills in one crop is not supported (give both the same fill)",
			optab.FillOf(t.zoom).Fill, optab.FillOf(op).Fill)
	}
	return nil
}

// zoomOutNeeds refuses a RandomZoomOut that no op after it brings to a
// fixed size.
func zoomOutNeeds(t *Transform) error {
	if t.rcrop == nil && t.center == nil && t.resize == nil && (t.iou == nil || t.bound == [2]int{}) {
		return transformErr("RandomZoomOut alone gives a size that varies per image: follow it with Resize(h, w), RandomCrop or CenterCrop, which fix the batch's size " +
			"(or with a RandomIoUCrop, and give the job a bound on the sizes, max_size=(h, w))")
	}
	return nil
}

// padNeeds refuses a Pad first that no crop after it brings to a fixed
// size.
func padNeeds(t *Transform) error {
	if t.pad != nil && t.rcrop == nil && t.center == nil {
		return transformErr("Pad alone gives a size that varies per image: follow it with a RandomCrop or CenterCrop, which fix the batch's size")
	}
	return nil
}

// placePad places a Pad: first, or right after a RandomCrop or
// CenterCrop that is not resized.
func placePad(t *Transform, op *optab.Op, n int) error {
	if n > 0 && (t.padAfter != nil || t.rrc != nil || t.resize != nil || (t.rcrop == nil && t.center == nil)) {
		return transformErr("Pad after a resampling geometry (RandomResizedCrop, Resize) or twice after the crop is not supported: Pad comes first, or right after a RandomCrop or CenterCrop")
	}
	if err := checkPadding(op, optab.ArgsOf[PadArgs](op).Padding); err != nil {
		return err
	}
	if n == 0 {
		t.pad = op
	} else {
		t.padAfter = op
	}
	return nil
}

// placeRandomCrop places a RandomCrop: first, or after a Pad or a
// RandomZoomOut.
func placeRandomCrop(t *Transform, op *optab.Op, n int) error {
	if n > 0 && (n > 1 || (t.pad == nil && t.zoom == nil) || t.padAfter != nil) {
		return transformErr("RandomCrop must be the only geometry op (after a Pad or a RandomZoomOut, if any) and come first")
	}
	if err := checkSize(op, false); err != nil {
		return err
	}
	if err := checkPadding(op, optab.ArgsOf[RandomCropArgs](op).Padding); err != nil {
		return err
	}
	if ca := optab.ArgsOf[RandomCropArgs](op); t.pad != nil && ca.pads() && ca.Fill != optab.FillOf(t.pad).Fill {
		return transformErr("Pad fill %v then RandomCrop padding with fill %v: padding of two fills in one crop is not supported (give both the same fill)", optab.FillOf(t.pad).Fill, ca.Fill)
	}
	t.rcrop = op
	return nil
}

// placeRRC places a RandomResizedCrop: first and alone.
func placeRRC(t *Transform, op *optab.Op, n int) error {
	if t.pad != nil {
		return transformErr("Pad before RandomResizedCrop is not supported: Pad may come before a RandomCrop or CenterCrop only")
	}
	if n > 0 {
		return transformErr("RandomResizedCrop must be the only geometry op and come first")
	}
	if err := checkRRC(op); err != nil {
		return err
	}
	t.rrc = op
	return nil
}

// placeResize places a Resize, RandomShortestSize or RandomResize: first,
// after a RandomZoomOut or a RandomIoUCrop, before a CenterCrop.
func placeResize(t *Transform, op *optab.Op, n int) error {
	if t.pad != nil {
		return transformErr("Pad before Resize is not supported: Pad may come before a RandomCrop or CenterCrop only")
	}
	if n > 0 && !(t.zoom != nil && n == 1) && t.iou == nil {
		return transformErr("Resize must come first (after a RandomZoomOut, if any), before CenterCrop")
	}
	if err := t.checkResize(op, n); err != nil {
		return err
	}
	t.resize = op
	return nil
}

// placeCenterCrop places a CenterCrop: after a Resize or a Pad, if any,
// before the other ops.
func placeCenterCrop(t *Transform, op *optab.Op, _ int) error {
	if t.rrc != nil || t.rcrop != nil || t.center != nil || t.padAfter != nil {
		return transformErr("CenterCrop must follow Resize or Pad (if any) and come before the other ops")
	}
	if err := checkSize(op, false); err != nil {
		return err
	}
	t.center = op
	return nil
}

// formatSize writes "(HxW" and the interpolation.
func formatSize(b *strings.Builder, op *optab.Op) {
	fmt.Fprintf(b, "(%dx%d", op.Size[0], op.Size[1])
	formatInterp(b, op)
}

// formatInterp ends String's arguments: the interpolation unless
// bilinear, then ")".
func formatInterp(b *strings.Builder, op *optab.Op) {
	if in := optab.ResamplingOf(op).Interp; in != InterpBilinear {
		fmt.Fprintf(b, ", %s", in)
	}
	b.WriteString(")")
}

// fillMasks refuses a padding op whose masks' fill is not a uint8 Mask's
// value: a fill per type's Mask value (FillTyped) that is not an integer
// 0..255, or a plain fill (every type's) of several values (torchvision's
// pad_mask refuses it) or not an integer.
func fillMasks(op *optab.Op) error {
	fill := optab.FillOf(op)
	if fill.FillTyped {
		if v := fill.FillMask; !(v >= 0 && v <= 255) || v != math.Trunc(v) {
			return fmt.Errorf("mask fill %v: want an integer 0..255 (a uint8 Mask's value)", v)
		}
		return nil
	}
	if f := fill.Fill; f[0] != f[1] || f[1] != f[2] || f[0] != math.Trunc(f[0]) {
		return fmt.Errorf("fill %v with masks: torchvision fills a Mask with the op's fill too, one integer 0..255 "+
			"(pad_mask refuses a fill of several values); give one, or a fill per type, {tv_tensors.Image: %v, tv_tensors.Mask: m}",
			f, fillText(f))
	}
	return nil
}

// maskFill is op's fill of a job's masks (fillMasks checked it): its fill
// per type's Mask value, else its one fill (None: 0).
func maskFill(op *optab.Op) uint8 {
	switch f := optab.FillOf(op); {
	case f.FillTyped:
		return uint8(f.FillMask)
	case f.FillNone:
		return 0
	default:
		return uint8(f.Fill[0])
	}
}

// fillText is a fill as Python writes it: one number, or a tuple of three.
func fillText(f [3]float64) string {
	if f[0] == f[1] && f[1] == f[2] {
		return fmt.Sprint(f[0])
	}
	return fmt.Sprintf("(%v, %v, %v)", f[0], f[1], f[2])
}

// A Resize((h, w)) or a CenterCrop after a RandomRotation with
// expand=True (at the top level, after the geometry) fixes the size the
// rotation grew: a step after the decode (fixSize), of the functional
// op's name, with the kernels below; the transform's bound is then the
// largest image before it (growRotate).
var (
	postResize     = optab.Def{Kind: OpResize, Targets: optab.TargetsMove, Draw: drawFix}
	postCenterCrop = optab.Def{Kind: OpCenterCrop, Targets: optab.TargetsMove, Draw: drawFix}
)

// drawFix emits the node's step; the ops after it draw on its size.
func drawFix(n *optab.Node, _ *det.RNG, d *optab.Drawer) {
	d.Emit(n.Step)
	d.H, d.W = n.Step.I[4], n.Step.I[5]
}

// fixSize compiles op, a Resize or CenterCrop after a RandomRotation with
// expand=True.
func fixSize(op *optab.Op, stream uint64, where string) (optab.Node, error) {
	n := optab.Node{Op: op, Stream: stream, MaxSteps: 1}
	if op.Kind == OpCenterCrop {
		if err := checkSize(op, false); err != nil {
			return n, err
		}
		n.Def, n.Step = &postCenterCrop, fn.Step{Fn: fn.CenterCrop, I: [6]int{4: op.Size[0], 5: op.Size[1]}}
		return n, nil
	}
	if err := checkSize(op, true); err != nil {
		return n, err
	}
	if op.Size[1] == 0 {
		return n, optab.OpError(where, "Resize(%d) of the shorter side after a RandomRotation with expand=True: give both sides, Resize((h, w))", op.Size[0])
	}
	if err := checkInterp(op, true); err != nil {
		return n, err
	}
	n.Def = &postResize
	rs := optab.ResamplingOf(op)
	n.Step = fn.Step{Fn: fn.Resize, I: [6]int{4: op.Size[0], 5: op.Size[1]}, Interp: rs.Interp, Antialias: rs.Antialiased()}
	return n, nil
}

// rrcArgs reads RandomResizedCrop's arguments; interpolation "random" is
// timm's RandomResizedCropAndInterpolation(interpolation="random").
func rrcArgs(a *optab.Args) optab.Op {
	ra := &RRCArgs{Scale: a.Pair("scale"), Ratio: a.Pair("ratio")}
	if a.Str("interpolation") == "random" {
		ra.Resampling, ra.RandomInterp = a.Resampling(""), true // bilinear, then the draw's
	} else {
		ra.Resampling = a.Resampling("interpolation")
	}
	return optab.Op{Size: a.Size("size"), Args: ra}
}

// resizeArgs reads Resize's: an int size resizes the shorter side
// (Size[1] 0); max_size is refused (the size would vary per image).
func resizeArgs(a *optab.Args) optab.Op {
	op := optab.Op{Args: &ResizeArgs{a.Resampling("interpolation")}}
	if is := a.Ints("size"); len(is) == 1 {
		op.Size = [2]int{is[0], 0}
	} else {
		op.Size = a.Size("size")
	}
	if !a.IsNone("max_size") {
		a.Errorf("max_size is not supported: a batch's images have one size (Resize then CenterCrop, or Resize((h, w)))")
	}
	return op
}

// iouCropArgs reads RandomIoUCrop's (and stoker's keyword-only p).
func iouCropArgs(a *optab.Args) optab.Op {
	ia := &IoUCropArgs{Scale: [2]float64{a.Float("min_scale"), a.Float("max_scale")},
		Ratio:   [2]float64{a.Float("min_aspect_ratio"), a.Float("max_aspect_ratio")},
		Options: a.Floats("sampler_options"), Trials: min(a.Int("trials"), 1<<20)}
	op := optab.Op{P: a.Float("p"), Args: ia}
	if ia.Options == nil {
		ia.Options = []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9, 1}
	}
	if !(op.P > 0 && op.P <= 1) {
		a.Errorf("p=%v: want 0 < p <= 1 (p=0 never crops: leave the op out)", op.P)
	}
	return op
}

// padArgs reads torchvision's padding forms (1 value: every side; 2:
// left and right, top and bottom; 4: left, top, right, bottom).
func padArgs(a *optab.Args) [4]int {
	switch p := a.Ints("padding"); len(p) {
	case 1:
		return [4]int{p[0], p[0], p[0], p[0]}
	case 2:
		return [4]int{p[0], p[1], p[0], p[1]}
	case 4:
		return [4]int(p)
	default:
		a.Errorf("padding of %d values: want 1, 2 or 4", len(p))
	}
	return [4]int{}
}

// pads says whether a RandomCrop may pad: it has padding, or
// pad_if_needed.
func (a RandomCropArgs) pads() bool { return a.Padding != [4]int{} || a.PadIfNeeded }

// fillArgs reads a constant padding's fill (a fill per type where the
// op takes one; None: 0) and padding_mode, which must be "constant".
func fillArgs(a *optab.Args) optab.Filling {
	if m := a.Str("padding_mode"); !a.IsNone("padding_mode") && m != "constant" {
		a.Errorf("padding_mode %q: stoker pads with a constant fill only (padding_mode=\"constant\")", optab.TruncKind(optab.OpKind(m)))
	}
	return a.TypedFill("fill", false)
}
