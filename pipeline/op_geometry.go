package pipeline

// The geometry: the ops fused into the decode (torchvision.transforms.v2's
// RandomResizedCrop, Resize, CenterCrop, RandomCrop, Pad, and detection's
// RandomZoomOut, RandomIoUCrop, ScaleJitter, FixedSizeCrop,
// RandomShortestSize, RandomResize), and their functional ops with how they
// move a job's targets (the box, keypoint and mask kernels of crop, resize,
// center_crop, pad). NewTransform parses where they stand (transform.go,
// lsj.go, detgeom.go: the geometry's grammar); the sample's plan draws them
// (plan.go).

import (
	"fmt"
	"math"
	"strings"
)

const (
	OpRandomResizedCrop OpKind = "RandomResizedCrop"
	OpResize            OpKind = "Resize"
	OpCenterCrop        OpKind = "CenterCrop"
	OpRandomCrop        OpKind = "RandomCrop"
	OpPad               OpKind = "Pad"
	// OpRandomZoomOut pads the image onto a random larger canvas (SSD's
	// zoom out); first, before Resize(h, w), RandomCrop or CenterCrop.
	OpRandomZoomOut OpKind = "RandomZoomOut"
	// OpRandomIoUCrop is SSD's IoU crop, drawn against the sample's boxes
	// (a job with targets only); first or after a RandomZoomOut, then
	// Resize(h, w).
	OpRandomIoUCrop OpKind = "RandomIoUCrop"
)

const (
	// OpScaleJitter is torchvision.transforms.v2's ScaleJitter: the image
	// resized by min(Size[0]/h, Size[1]/w) (Size the target_size as
	// (height, width)) times a scale uniform in Scale (scale_range), each
	// side truncated; Interp and NoAntialias its resampling. A geometry
	// op, first, then FixedSizeCrop.
	OpScaleJitter OpKind = "ScaleJitter"
	// OpFixedSizeCrop is torchvision's FixedSizeCrop (its detection
	// references' and prototype transforms'): a crop of at most Size
	// (height, width) at one uniform r (top int((h - height) * r), left
	// int((w - width) * r) where the image is larger), padded on the right
	// and bottom with Fill to Size; the target boxes it leaves empty are
	// dropped with their labels. A geometry op: first, or after a
	// ScaleJitter.
	OpFixedSizeCrop OpKind = "FixedSizeCrop"
	// OpRandomShortestSize is torchvision.transforms.v2's
	// RandomShortestSize: the shorter side resized to one of Sizes
	// (min_size), drawn uniformly, the longer at most MaxSize (max_size;
	// 0: None), each side truncated; Interp and NoAntialias its
	// resampling. A geometry op, first; without a CenterCrop after it each
	// sample has its own size (sizes.go), MaxSize its bound.
	OpRandomShortestSize OpKind = "RandomShortestSize"
	// OpRandomResize is torchvision.transforms.v2's RandomResize: the
	// shorter side resized to a size uniform in [Sizes[0], Sizes[1])
	// (min_size, max_size), the longer scaled and truncated (Resize(int)).
	// A geometry op, first, then a CenterCrop: the longer side has no
	// bound of its own.
	OpRandomResize OpKind = "RandomResize"
)

func init() {
	size := param{name: "size", typ: pSize}
	interp := param{name: "interpolation", typ: pInterp, def: "'bilinear'"}
	antialias := param{name: "antialias", typ: pBool, def: "True"}
	// A fill per type on the ops whose masks follow (Op.FillTyped).
	fill := param{name: "fill", typ: pFillBy, def: "0"}
	mode := param{name: "padding_mode", typ: pString, def: "'constant'"}
	geometry := func(d opDef) {
		d.geometry, d.targets = true, targetsMove
		if d.misplaced == "" {
			d.misplaced = "a geometry op after other ops: the geometry must be the first op (one RandomResizedCrop, RandomCrop, or Resize then CenterCrop), fused into the decode"
		}
		defineOp(d)
	}
	lsj := func(d opDef) {
		d.misplaced, d.stays = fmt.Sprintf("%s after other ops is not supported: it is the geometry, first, fused into the decode", d.kind), true
		geometry(d)
	}
	geometry(opDef{kind: OpRandomResizedCrop, doc: "a random crop of area scale and aspect ratio, resized to size",
		params: []param{size, {name: "scale", typ: pRange, def: "(0.08, 1.0)"}, {name: "ratio", typ: pRange, def: "(0.75, 1.3333333333333333)"},
			interp, antialias},
		stays: true, format: formatSize})
	geometry(opDef{kind: OpResize, doc: "resized to (h, w), or its shorter side to size (then a CenterCrop)",
		params: []param{size, interp, {name: "max_size", typ: pInt, def: "None"}, antialias},
		stays:  true, format: func(b *strings.Builder, op *Op) {
			if op.Size[1] == 0 {
				fmt.Fprintf(b, "(%d", op.Size[0])
			} else {
				fmt.Fprintf(b, "(%dx%d", op.Size[0], op.Size[1])
			}
			formatInterp(b, op)
		}})
	geometry(opDef{kind: OpCenterCrop, doc: "the central crop of size (padded where the image is smaller)",
		params: []param{size}, stays: true, format: formatSize})
	geometry(opDef{kind: OpRandomCrop, doc: "a crop of size at a random place, after padding (constant fill)",
		params: []param{size, {name: "padding", typ: pInts, def: "None"}, {name: "pad_if_needed", typ: pBool, def: "False"}, fill, mode},
		stays:  true, masks: fillMasks,
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(%dx%d, padding=%v, pad_if_needed=%v, fill=%v)", op.Size[0], op.Size[1], op.Padding, op.PadIfNeeded, op.Fill)
		}})
	geometry(opDef{kind: OpPad, doc: "padding with a constant fill, right before or after a RandomCrop or CenterCrop",
		params: []param{{name: "padding", typ: pInts}, fill, mode},
		stays:  true, masks: fillMasks,
		misplaced: "Pad after other ops is not supported: Pad comes right before or right after a RandomCrop or CenterCrop (or give RandomCrop its padding)",
		format:    func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(padding=%v, fill=%v)", op.Padding, op.Fill) }})
	geometry(opDef{kind: OpRandomZoomOut, doc: "with probability p, the image padded with fill onto a canvas side_range times its size",
		params: []param{fill, {name: "side_range", typ: pRange, def: "(1.0, 4.0)"}, pParam(0.5)}, masks: fillMasks,
		misplaced: "RandomZoomOut after other ops is not supported: it is the first op (then Resize(h, w), RandomCrop or CenterCrop), fused into the decode",
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(fill=%v, side_range=%v, p=%g)", op.Fill, op.SideRange, op.P)
		}})
	geometry(opDef{kind: OpRandomIoUCrop, doc: "SSD's crop of a minimal IoU with the sample's boxes (then Resize(h, w))",
		params: []param{{name: "min_scale", typ: pFloat, def: "0.3"}, {name: "max_scale", typ: pFloat, def: "1.0"},
			{name: "min_aspect_ratio", typ: pFloat, def: "0.5"}, {name: "max_aspect_ratio", typ: pFloat, def: "2.0"},
			{name: "sampler_options", typ: pFloats, def: "None"}, {name: "trials", typ: pInt, def: "40"}},
		needsTargets: true,
		misplaced:    "RandomIoUCrop after other ops is not supported: it is the first op, or right after a RandomZoomOut (then Resize(h, w)), fused into the decode",
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(scale=%v, aspect_ratio=%v, sampler_options=%v, trials=%d)", op.Scale, op.Ratio, op.Options, op.Trials)
		}})
	lsj(opDef{kind: OpScaleJitter, doc: "resized by target_size times a scale drawn in scale_range (large-scale jitter)",
		params: []param{{name: "target_size", typ: pSize}, {name: "scale_range", typ: pRange, def: "(0.1, 2.0)"}, interp, antialias},
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(%dx%d, scale_range=%v", op.Size[0], op.Size[1], op.Scale)
			formatInterp(b, op)
		}})
	lsj(opDef{kind: OpFixedSizeCrop, doc: "a random crop of at most size, padded on the right and bottom with fill to size",
		params: []param{size, {name: "fill", typ: pFill, def: "0"}, mode},
		format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(%dx%d, fill=%v)", op.Size[0], op.Size[1], op.Fill) }})
	lsj(opDef{kind: OpRandomShortestSize, doc: "the shorter side resized to one of min_size, the longer at most max_size",
		params: []param{{name: "min_size", typ: pInts}, {name: "max_size", typ: pInt, def: "None"}, interp, antialias},
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(min_size=%v, max_size=%d", op.Sizes, op.MaxSize)
			formatInterp(b, op)
		}})
	lsj(opDef{kind: OpRandomResize, doc: "the shorter side resized to a size drawn in [min_size, max_size)",
		params: []param{{name: "min_size", typ: pInt}, {name: "max_size", typ: pInt}, interp, antialias},
		format: func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(min_size=%d, max_size=%d", op.Sizes[0], op.Sizes[1])
			formatInterp(b, op)
		}})
}

// formatSize writes "(HxW" and the interpolation.
func formatSize(b *strings.Builder, op *Op) {
	fmt.Fprintf(b, "(%dx%d", op.Size[0], op.Size[1])
	formatInterp(b, op)
}

// formatInterp ends String's arguments: the interpolation unless
// bilinear, then ")".
func formatInterp(b *strings.Builder, op *Op) {
	if op.Interp != InterpBilinear {
		fmt.Fprintf(b, ", %s", op.Interp)
	}
	b.WriteString(")")
}

// fillMasks refuses a padding op whose masks' fill is not a uint8 Mask's
// value: a fill per type's Mask value (FillTyped) that is not an integer
// 0..255, or a plain fill (every type's) of several values (torchvision's
// pad_mask refuses it) or not an integer.
func fillMasks(op *Op) error {
	if op.FillTyped {
		if v := op.FillMask; !(v >= 0 && v <= 255) || v != math.Trunc(v) {
			return fmt.Errorf("mask fill %v: want an integer 0..255 (a uint8 Mask's value)", v)
		}
		return nil
	}
	if f := op.Fill; f[0] != f[1] || f[1] != f[2] || f[0] != math.Trunc(f[0]) {
		return fmt.Errorf("fill %v with masks: torchvision fills a Mask with the op's fill too, one integer 0..255 "+
			"(pad_mask refuses a fill of several values); give one, or a fill per type, {tv_tensors.Image: %v, tv_tensors.Mask: m}",
			f, fillText(f))
	}
	return nil
}

// maskFill is op's fill of a job's masks (fillMasks checked it): its fill
// per type's Mask value, else its one fill (None: 0).
func (op *Op) maskFill() uint8 {
	switch {
	case op.FillTyped:
		return uint8(op.FillMask)
	case op.FillNone:
		return 0
	}
	return uint8(op.Fill[0])
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
	postResize     = opDef{kind: OpResize, targets: targetsMove, draw: drawFix}
	postCenterCrop = opDef{kind: OpCenterCrop, targets: targetsMove, draw: drawFix}
)

// drawFix emits the node's step; the ops after it draw on its size.
func drawFix(n *node, _ *RNG, d *drawer) {
	d.emit(n.step)
	d.h, d.w = n.step.I[4], n.step.I[5]
}

// fixSize compiles op, a Resize or CenterCrop after a RandomRotation with
// expand=True.
func fixSize(op *Op, stream uint64, where string) (node, error) {
	n := node{op: op, stream: stream, maxSteps: 1}
	if op.Kind == OpCenterCrop {
		if err := checkSize(op, false); err != nil {
			return n, err
		}
		n.def, n.step = &postCenterCrop, Step{Fn: FnCenterCrop, I: [6]int{4: op.Size[0], 5: op.Size[1]}}
		return n, nil
	}
	if err := checkSize(op, true); err != nil {
		return n, err
	}
	if op.Size[1] == 0 || op.MaxSize != 0 {
		return n, opError(where, "Resize(%d) of the shorter side after a RandomRotation with expand=True: give both sides, Resize((h, w))", op.Size[0])
	}
	if err := checkInterp(op, true); err != nil {
		return n, err
	}
	n.def = &postResize
	n.step = Step{Fn: FnResize, I: [6]int{4: op.Size[0], 5: op.Size[1]}, Interp: op.Interp, Antialias: !op.NoAntialias && op.Interp != InterpNearest}
	return n, nil
}
