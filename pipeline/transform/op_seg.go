package transform

// The semantic segmentation references' training geometry (torchvision's
// references/segmentation/presets.py, SegmentationPresetTrain with
// use_v2=True): RandomResize, a RandomHorizontalFlip, the references'
// PadIfSmaller (v2_extras.py), then RandomCrop, fused into the decode. The
// resampler makes only the crop's window of the resized image; the flip
// before the padding is the crop's mirror (segPlan), drawn and traced
// where it stands, so that the targets move through torchvision's order of
// steps.

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// OpPadIfSmaller is torchvision's segmentation references' PadIfSmaller
// (v2_extras.py, not in torchvision proper): the image padded on the
// right and bottom with Fill (FillTyped: FillMask the masks') to at least
// Size[0] a side (size; Size[1] the same): padding [0, 0, max(size - w,
// 0), max(size - h, 0)]. A geometry op: after a RandomResize (and a
// RandomHorizontalFlip), then a RandomCrop.
const OpPadIfSmaller optab.OpKind = "PadIfSmaller"

// PadIfSmallerArgs are PadIfSmaller's fill; its size is optab.Op.Size.
type PadIfSmallerArgs struct{ optab.Filling }

func init() {
	optab.Define(optab.Def{Kind: OpPadIfSmaller, Doc: "padded on the right and bottom with fill to at least size a side (the segmentation references')",
		Params:   []optab.Param{{Name: "size", Typ: optab.PInt}, {Name: "fill", Typ: optab.PFillBy, Def: "0"}},
		Geometry: true, Targets: optab.TargetsMove, Stays: true, Masks: fillMasks,
		FromArgs: func(a *optab.Args) optab.Op {
			s := min(a.Int("size"), 1<<20)
			return optab.Op{Size: [2]int{s, s}, Args: &PadIfSmallerArgs{a.TypedFill("fill", false)}}
		},
		Misplaced: "PadIfSmaller is supported only in the segmentation references' geometry: RandomResize, RandomHorizontalFlip (if any), PadIfSmaller, then RandomCrop",
		Format: func(b *strings.Builder, op *optab.Op) {
			f := optab.FillOf(op)
			fmt.Fprintf(b, "(%d, fill=%v", op.Size[0], f.Fill)
			if f.FillTyped {
				fmt.Fprintf(b, ", mask_fill=%v", f.FillMask)
			}
			b.WriteString(")")
		}})
}

// RandomResize's place (placer): first and ending in a RandomCrop, the
// segmentation references' run (segRun, which takes the flip, the
// PadIfSmaller and the RandomCrop with it); else a resize as torchvision's
// others are (placeResize, op_geometry.go: a CenterCrop after it).
func init() {
	definePlacer(OpRandomResize, placer{place: func(t *Transform, op *optab.Op, n int) (int, error) {
		if n == 0 {
			if next, err := t.segRun(); err != nil || next > 0 {
				return next, err
			}
		}
		return n + 1, placeResize(t, op, n)
	}})
}

// segGeom is a segmentation geometry's ops past its RandomResize
// (t.resize) and RandomCrop (t.rcrop): the flip between them, if any, and
// the PadIfSmaller.
type segGeom struct {
	flip *optab.Op // a RandomHorizontalFlip right after the RandomResize
	pad  *optab.Op // a PadIfSmaller right before the RandomCrop
}

// RNG streams of the segmentation geometry, children of the geometry's
// (as streamZoom): the flip before the padding, and the crop. The
// RandomResize draws its size from the geometry's own (ResizeSize).
const (
	streamSegFlip = StreamCrop*64 + 5
	streamSegCrop = StreamCrop*64 + 6
)

// segRun parses t's geometry when it is RandomResize, a
// RandomHorizontalFlip (if any), a PadIfSmaller (if any), then RandomCrop
// (t.seg), and returns how many ops it has (0: another geometry).
func (t *Transform) segRun() (int, error) {
	bad := func(format string, a ...any) (int, error) {
		return 0, transformErr(format, a...)
	}
	ops := t.ops
	if len(ops) == 0 || ops[0].Kind != OpRandomResize {
		return 0, nil
	}
	var g segGeom
	n := 1
	if n < len(ops) && ops[n].Kind == optab.OpRandomHorizontalFlip {
		g.flip, n = &ops[n], n+1
	}
	if n < len(ops) && ops[n].Kind == OpPadIfSmaller {
		g.pad, n = &ops[n], n+1
	}
	if n == len(ops) || ops[n].Kind != OpRandomCrop {
		if g.pad != nil {
			return bad("PadIfSmaller (op %d) needs a RandomCrop right after it, which fixes the batch's size", n-1)
		}
		return 0, nil // RandomResize then a CenterCrop, or alone: NewTransform's
	}
	crop := &ops[n]
	n++
	rs := &ops[0]
	if err := t.checkResize(rs, 0); err != nil {
		return 0, err
	}
	if err := checkInterp(rs, true); err != nil {
		return 0, err
	}
	if g.flip != nil {
		if err := checkP(g.flip, 1); err != nil {
			return 0, err
		}
	}
	if pd := g.pad; pd != nil {
		if pd.Size[1] == 0 {
			pd.Size[1] = pd.Size[0]
		}
		if s := pd.Size; s[0] < 1 || s[0] > optab.MaxSide || s[1] != s[0] {
			return bad("PadIfSmaller size %d: want 1..%d", s[0], optab.MaxSide)
		}
		if err := checkPadding(pd, [4]int{}); err != nil {
			return 0, err
		}
	}
	if err := checkSize(crop, false); err != nil {
		return 0, err
	}
	if err := checkPadding(crop, optab.ArgsOf[RandomCropArgs](crop).Padding); err != nil {
		return 0, err
	}
	if err := g.checkFills(crop); err != nil {
		return 0, err
	}
	if n < len(ops) && (geometryKind(ops[n].Kind) || ops[n].Kind == OpPadIfSmaller) {
		return bad("op %d (%s) after the RandomCrop is not supported: the geometry is RandomResize, RandomHorizontalFlip (if any), PadIfSmaller (if any), then RandomCrop", n, ops[n].Kind)
	}
	t.resize, t.rcrop, t.seg = rs, crop, &g
	if g.flip != nil {
		t.segFlipP = g.flip.P
	}
	t.geom, t.outH, t.outW = ResizeCrop, crop.Size[0], crop.Size[1]
	return n, nil
}

// checkFills refuses a RandomCrop that may pad a sample a PadIfSmaller
// padded, with another fill: one fill a sample (the pixels' and the
// masks'). A RandomCrop with pad_if_needed and no larger than the
// PadIfSmaller's size never pads after it.
func (g *segGeom) checkFills(crop *optab.Op) error {
	pd := g.pad
	if pd == nil {
		return nil
	}
	ca := optab.ArgsOf[RandomCropArgs](crop)
	pads := ca.Padding != [4]int{} || (ca.PadIfNeeded && (crop.Size[0] > pd.Size[0] || crop.Size[1] > pd.Size[1]))
	if pads && (optab.FillOf(crop).Fill != optab.FillOf(pd).Fill || maskFill(crop) != maskFill(pd)) {
		return fmt.Errorf("%w: transform: PadIfSmaller fill %v (masks %d) then RandomCrop padding with fill %v (masks %d): padding of two fills in one crop is not supported (give both the same fill)",
			errs.Unsupported, optab.FillOf(pd).Fill, maskFill(pd), optab.FillOf(crop).Fill, maskFill(crop))
	}
	return nil
}

// segPlan plans the segmentation geometry: the image resized to the
// RandomResize's drawn size W x H, flipped if the flip was drawn, padded
// by the PadIfSmaller on the right and bottom and by the RandomCrop's
// padding (pad_if_needed's too), cropped at a uniform top, then left, as
// torchvision's make_params draw them. The plan is the same crop of the
// unflipped resized image, mirrored (a flip before a crop is the mirrored
// crop, flipped): the window x in [W - sx - cw, W - sx) for the flipped
// image's [sx, sx + cw), its padding on the other side (PadAt).
func (t *Transform) segPlan(p *SamplePlan, k det.Key) error {
	W, H := ResizeSize(t.resize, k, p.SrcW, p.SrcH)
	if W < 1 || H < 1 {
		return fmt.Errorf("%w: RandomResize resizes the %dx%d image to %dx%d: a side of 0 pixels (torchvision's resize fails too)",
			errs.Unsupported, p.SrcW, p.SrcH, W, H)
	}
	p.Geom, p.RW, p.RH = ResizeCrop, W, H
	g := t.seg
	if g.flip != nil && t.segFlipP > 0 {
		r := k.Stream(streamSegFlip)
		p.Flip = r.Float64() < t.segFlipP
	}
	var pr, pb int
	if g.pad != nil {
		pr, pb = max(g.pad.Size[1]-W, 0), max(g.pad.Size[0]-H, 0)
	}
	op := t.rcrop
	ch, cw := op.Size[0], op.Size[1]
	pad, ph, pw := cropPadding(op, H+pb, W+pr)
	l, tp, r, b := pad[0], pad[1], pad[2], pad[3]
	if ph < ch || pw < cw {
		return fmt.Errorf("%w: image %dx%d, resized to %dx%d and padded to %dx%d, is smaller than the %dx%d crop (a PadIfSmaller of the crop's size before the RandomCrop, or its pad_if_needed=True, pads it)",
			errs.Unsupported, p.SrcW, p.SrcH, W, H, pw, ph, cw, ch)
	}
	top, left := cropAt(k.Stream(streamSegCrop), ph, pw, ch, cw)
	p.segPad = [2]int{pr, pb}
	p.rcPad, p.rcCrop, p.RCTop, p.RCLeft = [4]int{l, tp, r, b}, ph > ch || pw > cw, top, left
	p.RCFill = optab.FillOf(op).Fill
	if pr > 0 || pb > 0 {
		p.RCFill = optab.FillOf(g.pad).Fill // checkFills: the crop's padding, if any, is of the same fill
	}
	sx, sy := left-l, top-tp // the crop in the resized (and flipped) image
	if p.Flip {
		sx = W - sx - cw
	}
	p.cropWindow(W, H, sx, sy, cw, ch)
	return nil
}

// segSteps are the plan's segmentation geometry as functional ops, in
// torchvision's order: resize to the drawn size, horizontal_flip if
// drawn, the PadIfSmaller's pad, the RandomCrop's pad and crop.
func (t *Transform) segSteps(p *SamplePlan, buf []fn.Step) []fn.Step {
	rs := optab.ResamplingOf(t.resize)
	buf = append(buf, fn.Step{Fn: fn.Resize, I: [6]int{4: p.RH, 5: p.RW}, Interp: rs.Interp, Antialias: rs.Antialiased()})
	if p.Flip && t.seg.flip != nil { // else a flip fused after the crop, geometrySteps' last
		buf = append(buf, fn.Step{Fn: fn.HorizontalFlip})
	}
	if pr, pb := p.segPad[0], p.segPad[1]; pr > 0 || pb > 0 {
		pd := t.seg.pad
		buf = append(buf, fn.Step{Fn: fn.Pad, I: [6]int{0, 0, pr, pb}, Fill: optab.FillOf(pd).Fill, MaskFill: maskFill(pd)})
	}
	if p.rcPad != [4]int{} {
		buf = append(buf, fn.Step{Fn: fn.Pad, I: [6]int{p.rcPad[0], p.rcPad[1], p.rcPad[2], p.rcPad[3]}, Fill: optab.FillOf(t.rcrop).Fill, MaskFill: maskFill(t.rcrop)})
	}
	if p.rcCrop {
		buf = append(buf, fn.Step{Fn: fn.Crop, I: [6]int{p.RCTop, p.RCLeft, t.rcrop.Size[0], t.rcrop.Size[1]}})
	}
	return buf
}
