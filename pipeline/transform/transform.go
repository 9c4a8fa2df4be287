// Package transform is the compiled transform (as torchvision.transforms.v2's
// Compose): Transform, made from a list of ops (NewTransform, NewViews, the
// presets: ParseTransform), with the geometry's op families (crops, resizes,
// pads, zoom-out, IoU crop, warps, detection's ScaleJitter and
// FixedSizeCrop, ultralytics' YOLO family and mosaic), a sample's plan
// (Plan: per view, its geometry's SamplePlan, which the decoder fuses into
// the decode, and its ops' steps), the multi-image draws (MultiDraw),
// several views, the presets, the cost
// model (Cost), stop_epoch and the targets' checks and moves.
//
// In: ops (the op table's Op, pipeline/ops, where the geometry's families
// register next to the others), a layout, a sample's key and its source's
// size. Out: the sample's plan (drawn, never decoded here: Transform.Plan),
// its trace, the output's shape and layout, the transform's worst cost.
// The pipeline's root executes the plan; a Transform's Trace is its plan's
// trace, drawn here alone. Of the module it imports the
// op table, the functional ops, the kernels, the targets, the datasets'
// names and the pipeline's internals: never the root, nor the codec.
package transform

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	optab "github.com/stoker-dev/stoker/pipeline/ops"
)

// Layout is the order of a sample's axes.
type Layout int

// Layouts. CHW is the default, what torch models take.
const (
	CHW Layout = iota
	HWC
)

func (l Layout) String() string {
	if l == HWC {
		return "HWC"
	}
	return "CHW"
}

// geomKind says how the geometry ops compose.
type geomKind int

const (
	// CropResize: crop a box of the source, then resize it to the output
	// (RandomResizedCrop, CenterCrop alone).
	CropResize geomKind = iota
	// ResizeCrop: resize the whole source, then crop (Resize, Resize +
	// CenterCrop).
	ResizeCrop
)

// Transform is a compiled, validated op list. It is immutable and safe for
// concurrent use.
type Transform struct {
	ops   []optab.Op
	geom  geomKind
	rrc   *optab.Op // RandomResizedCrop, if any
	rcrop *optab.Op // RandomCrop, if any
	pad   *optab.Op // Pad, if any: first, before a RandomCrop or CenterCrop
	// zoom is a RandomZoomOut, if any: first, before a Resize(h, w), a
	// RandomCrop or a CenterCrop; its padding is drawn per sample.
	zoom *optab.Op
	// iou is a RandomIoUCrop, if any: first or after a RandomZoomOut,
	// then Resize(h, w); iouMid the SanitizeBoundingBoxes steps and at
	// most one RandomHorizontalFlip (FnHorizontalFlip, drawn at preFlip)
	// between them, in order.
	iou     *optab.Op
	iouMid  []fn.Step
	preFlip float64
	// pre are the RandomPhotometricDistorts before the geometry, compiled:
	// run on the decoded image, before a canvas plan's geometry.
	pre    []optab.Node
	maxPre int
	// padAfter is a Pad right after a RandomCrop or a CenterCrop (not
	// resized), if any: the crop padded into a larger output.
	padAfter *optab.Op
	resize   *optab.Op // Resize, if any
	center   *optab.Op // CenterCrop, if any
	// jitter and fixed: a ScaleJitter and FixedSizeCrop (lsj.go); vary:
	// each sample's size is its own, outH x outW its bound (lsj.go).
	jitter, fixed *optab.Op
	// seg: the segmentation references' geometry (op_seg.go): t.resize, a
	// flip (drawn at segFlipP), a PadIfSmaller, then t.rcrop.
	seg      *segGeom
	segFlipP float64
	vary     bool
	// ragged: samples made compact in their slots (WithRagged, ragged.go).
	ragged bool
	// bound is the job's bound on a sample's size (height, width; 0: none),
	// which lets a geometry that keeps the image's own size, or a part of
	// it, make per-sample sizes (own: the image whole, no geometry op;
	// a RandomIoUCrop without a Resize after it): lsj.go's boundSize.
	bound     [2]int
	boundFrom string // where bound came from ("": the job's max_size)
	own       bool
	// varyGeom: the geometry's sizes vary (RandomShortestSize); where ops
	// grow it (growRotate), geomW x geomH its size, room their largest.
	varyGeom           bool
	geomW, geomH, room int
	// whole: the geometry is the image whole at its own size (a
	// RandomRotation with expand=True first); grow the ops after it, whose
	// room is each sample's (RoomFor).
	whole bool
	grow  []optab.Op
	// kern bounds what its steps' kernels keep (kernelScratchOf).
	kern KernelScratch
	// yolo is a YOLO geometry (op_yolo.go): YOLOLoadImage, then a
	// YOLOLetterBox and/or a YOLORandomPerspective.
	yolo *yoloGeom
	// flip is the p of a RandomHorizontalFlip right after the geometry:
	// fused into the decode (the resampler's coefficients run backwards).
	flip    float64
	hasFlip bool
	// post are the ops after the geometry (and a fused flip), compiled,
	// in order; maxSteps bounds the steps they draw for one sample.
	post     []optab.Node
	maxSteps int
	norm     *optab.Op
	outH     int
	outW     int
	layout   Layout
	// views are a transform of several views' (NewViews), each a one-view
	// transform, and their groups' names; nil for a one-view transform.
	// outH, outW and norm are then view 0's.
	views []*Transform
	// smartAfter is a SmartResize after a RandomResizedCrop whose size it
	// keeps (smartAfterCrop): nothing to make, its count of vision tokens.
	smartAfter *optab.Op
	// preCrop is a RandomResizedCrop before a resize of the whole image (a
	// trainer's before a vision-language processor: cropBefore), whose
	// output every later part of the geometry takes for the image.
	preCrop *optab.Op
	// viewImages is each view's group's Images, skipViews SkipViews'
	// answers (for records of one image, of several).
	viewImages []RecordImages
	skipViews  [2][]bool
	// sharedPre: the views are a vision-language processor's (one of
	// them a SmartResize, TileResize, AnyResResize...) and start with the
	// same ops before their geometry, drawn once for the image with view
	// 0's key (SharedPre): the trainer's augmentation, then the
	// processor's views of the one augmented image.
	sharedPre bool
	viewNames []string
	vlayout   ViewLayout
	// decode is how the fast path decodes a JPEG before the geometry
	// (WithDecode): DecodeExact, the zero value, or DecodeFast.
	decode   DecodeMode
	stop     *stopEpoch // a stop_epoch (decodemode.go), if any
	multiOps            // the multi-image family's ops, if any (op_multi.go)
}

// Needs is what an executor (the pipeline's Decoder) must know of a
// transform (or one of its views) beyond a sample's plan to size and
// route its work: plain values, the same for every sample. A user of
// the package needs none of it: the Transform's own methods say what a
// job gets (Size, Shape, SampleBytes, Cost, Trace, String).
type Needs struct {
	// GeomW is the width the geometry makes when the ops after it grow
	// the image (a RandomRotation with expand=True; 0: no such op).
	GeomW int
	// MaxSteps bounds the steps one sample draws after the geometry;
	// MaxPre those of the ops before it (detection's photometric ops).
	MaxSteps, MaxPre int
	// Norm is the Normalize the samples end in (nil: none, uint8
	// samples).
	Norm *optab.Op
	// YOLOSide is the YOLO family's geometry's imgsz (0: none).
	YOLOSide int
	// Whole: the geometry is the image whole at its own size (a
	// RandomRotation with expand=True first): its room is each
	// sample's (RoomFor).
	Whole bool
	// Turns: the ops (at the top level) have a RandomRotation, a
	// RandomAffine or a RandomPerspective: what moves masks through
	// canvas indexes (4 bytes a canvas pixel) rather than maps of rows
	// and columns.
	Turns bool
	// Staged: a sample may be made in the executor's own pixels before
	// the output's bytes, not straight into them: Normalize, ops before
	// the geometry, per-sample or grown sizes, steps on an HWC output,
	// or a geometry that may decode the image apart first (MayPad).
	Staged bool
	// MayPad: the geometry may decode a sample's visible part apart,
	// then pad or paste it into place: a crop that may pass the image
	// (CenterCrop, RandomCrop, Pad, FixedSizeCrop) or a canvas
	// (RandomZoomOut, RandomIoUCrop's flip, the ops or the crop before
	// the geometry, the YOLO geometry's letterbox). That part is at most
	// the image at its own size (SeenSize: a crop's before the geometry)
	// or the output's.
	MayPad bool
	// PadsCanvas: the canvas path resizes the canvas apart, then pads it
	// into the output (an AnyResResize after ops or a crop before it:
	// the Decoder's canvasView), in room of the output's size.
	PadsCanvas bool
	// Kernel is the steps' kernels' scratch bound (kernelScratchOf).
	Kernel KernelScratch
}

// Needs says what an executor must know of t beyond a sample's plan.
func (t *Transform) Needs() Needs {
	n := Needs{GeomW: t.geomW, MaxSteps: t.maxSteps, MaxPre: t.maxPre, Norm: t.norm,
		Whole: t.whole, Turns: t.turns(), Staged: t.staged(), MayPad: t.mayPad(), PadsCanvas: t.padsCanvas(), Kernel: t.kern}
	if t.yolo != nil {
		n.YOLOSide = t.yolo.ImgSz()
	}
	return n
}

// transformErr is a transform's error for ops it does not support (where
// they stand, or their arguments): errs.Unsupported, then the message.
func transformErr(format string, a ...any) error {
	return fmt.Errorf("%w: transform: %s", errs.Unsupported, fmt.Sprintf(format, a...))
}

// misplaced is the error of a geometry op, the geometry's op n, that
// stands where its family's placer does not take it: its Def's Misplaced.
func misplaced(op *optab.Op, n int) error {
	return transformErr("op %d (%s): %s", n, op.Kind, optab.Lookup(op.Kind).Misplaced)
}

// placer places a geometry op where it stands, the geometry's op n: it
// checks op against the ops before it (n, and what t holds of them: the
// ordering rules of its family, said there only) and records it in t. It
// returns the index of the op after it: n+1, or past the ops it takes with
// it (a RandomIoUCrop's). Each family of the geometry defines its ops'
// placers beside their Defs (definePlacer): op_geometry.go torchvision's
// crops, pads and resizes, lsj.go ScaleJitter and FixedSizeCrop,
// op_anyres.go PadToSquare, defineSelfSized the vision-language
// processors' resizes, op_yolo.go the YOLO geometry's, op_mosaic.go the
// multi-image family's, op_seg.go RandomResize's, which takes the
// segmentation references' run with it (a flip, PadIfSmaller, RandomCrop).
type placer struct {
	place func(t *Transform, op *optab.Op, n int) (next int, err error)
	// follows, if set, is the op's rule for every geometry op placed
	// after it (n: that op's position), checked before that op's own
	// placer: what may follow a canvas (RandomZoomOut's in
	// op_geometry.go, PadToSquare's in op_anyres.go) or a family's first
	// op (ScaleJitter's and FixedSizeCrop's in lsj.go, the YOLO family's
	// in op_yolo.go and op_mosaic.go).
	follows func(t *Transform, op *optab.Op, n int) error
	// needs, if set, is the op's rule on the geometry once it is placed:
	// what must come after it (a canvas or a Pad alone gives a size that
	// varies per image).
	needs func(t *Transform) error
}

// placers are the geometry's placers, by kind.
var placers = map[optab.OpKind]placer{}

// definePlacer registers kind's placer (at init).
func definePlacer(kind optab.OpKind, p placer) {
	if _, dup := placers[kind]; dup {
		panic(fmt.Sprintf("transform: %s placed twice", kind))
	}
	placers[kind] = p
}

// placeAt is a placer of one op: check, and n+1 next.
func placeAt(check func(t *Transform, op *optab.Op, n int) error) placer {
	return placer{place: func(t *Transform, op *optab.Op, n int) (int, error) {
		return n + 1, check(t, op, n)
	}}
}

// followedBy is p with the rule for the geometry ops after its op.
func (p placer) followedBy(rule func(t *Transform, op *optab.Op, n int) error) placer {
	p.follows = rule
	return p
}

// needing is p with its rule on the geometry once placed.
func (p placer) needing(rule func(t *Transform) error) placer {
	p.needs = rule
	return p
}

// RNG streams: the geometry draws from stream 1 and the op at position j
// after it (a fused flip is position 1) from stream 1+j, so that ops never
// shift each other's numbers (crop, flip and a ColorJitter after the flip
// keep the streams 1, 2 and 3 they always had). An op inside a container
// draws from its own stream, derived from its container's (node.stream).
const (
	StreamCrop = 1
	streamFlip = 2
)

// NewTransform validates ops and compiles them. The geometry comes first
// (one RandomResizedCrop, or Resize and/or CenterCrop, in that order, or
// a RandomCrop; a Pad may come right before a RandomCrop or a CenterCrop,
// or right after one that is not resized; a RandomZoomOut right before a
// Resize(h, w), a RandomCrop or a CenterCrop) and
// is fused into the decode; every other op follows it, in the order given,
// on the output-sized crop (a RandomHorizontalFlip right after the
// geometry is fused too); Normalize, if any, comes last. The output size
// must be fixed: Resize of the shorter side needs a CenterCrop after it.
func NewTransform(layout Layout, ops ...optab.Op) (*Transform, error) {
	return NewTransformBound(layout, [2]int{}, ops...)
}

// newTransform is NewTransform under a bound (lsj.go, the bound).
func newTransform(layout Layout, bound [2]int, boundFrom string, ops ...optab.Op) (*Transform, error) {
	t := &Transform{ops: cloneOps(ops), layout: layout, bound: bound, boundFrom: boundFrom}
	if err := checkBoundArg(bound); err != nil {
		return nil, err
	}
	if layout != CHW && layout != HWC {
		return nil, fmt.Errorf("%w: layout %d", errs.Unsupported, layout)
	}
	bad := func(format string, a ...any) (*Transform, error) {
		return nil, transformErr(format, a...)
	}
	// RandomPhotometricDistort before the geometry (compilePre), or a
	// RandomResizedCrop and those before a resize of the whole image
	// (cropBefore): the geometry is parsed from the op after them.
	all, pre, from := t.ops, beforeGeometry(t.ops), 0
	if pre > 0 && t.ops[0].Kind == OpRandomResizedCrop {
		if err := t.setPreCrop(&t.ops[0]); err != nil {
			return nil, err
		}
		from = 1
	}
	t.ops = t.ops[pre:]
	n := 0
	// The geometry's ops, each placed by its family's rule (placers),
	// after the rules of the ops placed before it (follows); then their
	// needs, once all are placed.
	var follows []func(t *Transform, op *optab.Op, n int) error
	var needs []func(t *Transform) error
	for n < len(t.ops) {
		op := &t.ops[n]
		p, ok := placers[op.Kind]
		if !ok {
			break
		}
		for _, rule := range follows {
			if err := rule(t, op, n); err != nil {
				return nil, err
			}
		}
		next, err := p.place(t, op, n)
		if err != nil {
			return nil, err
		}
		if err := checkInterp(op, true); err != nil {
			return nil, err
		}
		if p.follows != nil {
			follows = append(follows, p.follows)
		}
		if p.needs != nil {
			needs = append(needs, p.needs)
		}
		n = next
	}
	if err := t.checkMulti(); err != nil {
		return nil, err
	}
	for _, rule := range needs {
		if err := rule(t); err != nil {
			return nil, err
		}
	}
	switch {
	case t.fixed != nil, t.yolo != nil, t.seg != nil: // their placers set the size (lsj.go, op_yolo.go, op_seg.go)
	case t.mosaic != nil:
		t.geom, t.outH, t.outW = CropResize, 2*t.mosaicArgs.ImgSz, 2*t.mosaicArgs.ImgSz
	default: // torchvision's crops, pads and resizes, a self-sized resize, or none (op_geometry.go)
		if err := t.cropSize(); err != nil {
			return nil, err
		}
	}
	if err := t.growPadAfter(); err != nil {
		return nil, err
	}
	rest := t.ops[n:]
	if k := len(rest) - 1; k >= 0 && rest[k].Kind == optab.OpNormalize {
		if err := optab.CheckNormalize(&rest[k]); err != nil {
			return nil, err
		}
		t.norm, rest = &rest[k], rest[:k]
	}
	// A mosaic's flip is a step, and so is one after a segmentation geometry's own.
	if len(rest) > 0 && rest[0].Kind == optab.OpRandomHorizontalFlip && t.mosaic == nil && (t.seg == nil || t.seg.flip == nil) {
		if err := checkP(&rest[0], n); err != nil {
			return nil, err
		}
		t.flip, t.hasFlip = rest[0].P, true
		rest = rest[1:]
	}
	first := n + 1 // the position of rest[0] in ops
	if t.hasFlip {
		first++
	}
	if len(rest) > optab.MaxOps {
		return bad("%d ops after the geometry: the limit is %d", len(rest), optab.MaxOps)
	}
	if err := checkConvertLast(rest, pre+first-1); err != nil {
		return nil, err
	}
	if err := t.checkVaryOps(rest); err != nil {
		return nil, err
	}
	var c optab.Compiler
	sizes := t.compileSizes(rest)
	t.post = make([]optab.Node, len(rest))
	for i := range rest {
		j := i + 1 // position after the geometry
		if t.hasFlip {
			j++
		}
		c.W, c.H = sizes[i][0], sizes[i][1]
		nd, err := c.Compile(&rest[i], pre+first-1+i, uint64(1+j), 0)
		if err != nil {
			return nil, err
		}
		t.post[i] = nd
		t.maxSteps += nd.MaxSteps
	}
	if t.ops = all; pre > from {
		if err := t.compilePre(from, pre); err != nil {
			return nil, err
		}
	}
	if err := t.growRotate(rest, pre+first-1); err != nil {
		return nil, err
	}
	t.setLayout()
	t.kern = kernelScratchOf(t.ops)
	return t, nil
}

// Ops returns the compiled op list, defaults filled in.
func (t *Transform) Ops() []optab.Op { return append([]optab.Op(nil), t.ops...) }

// Layout returns the output layout.
func (t *Transform) Layout() Layout { return t.layout }

// Size returns the output height and width (view 0's, of several views).
func (t *Transform) Size() (h, w int) { return t.outH, t.outW }

// Float reports whether samples are float32 (the transform ends in Normalize).
func (t *Transform) Float() bool { return t.norm != nil }

// Shape returns a sample's shape in its layout: [C, H, W] or [H, W, C]
// (view 0's, of several views: View(v).Shape() is view v's).
func (t *Transform) Shape() [3]int {
	if t.layout == HWC {
		return [3]int{t.outH, t.outW, 3}
	}
	return [3]int{3, t.outH, t.outW}
}

// SampleBytes is the size of one output sample: its views' sizes added
// up.
func (t *Transform) SampleBytes() int {
	if t.views == nil {
		return t.viewBytes()
	}
	n := 0
	for _, v := range t.views {
		n += v.viewBytes()
	}
	return n
}

// staged says whether a Decoder may make a sample of t (this view) in
// its own pixels before the output's bytes, not straight into them:
// Normalize, ops before the geometry, per-sample or grown sizes, steps
// on an HWC output, or a geometry that may decode the image apart first
// (MayPad).
func (t *Transform) staged() bool {
	return t.norm != nil || len(t.pre) > 0 || t.vary || t.geomW > 0 || (t.layout == HWC && len(t.post) > 0) || t.mayPad()
}

// mayPad says whether t's geometry may decode a sample's visible part
// apart, then pad or paste it into place: a crop that may pass the image
// (CenterCrop, RandomCrop, Pad, FixedSizeCrop) or a canvas (RandomZoomOut,
// RandomIoUCrop's flip, the ops or the crop before the geometry, the YOLO
// geometry's letterbox). That part is at most the image at its own size
// (SeenSize: a crop's before the geometry) or the output's.
func (t *Transform) mayPad() bool {
	return t.center != nil || t.rcrop != nil || t.pad != nil || t.padAfter != nil || t.zoom != nil || t.iou != nil ||
		t.fixed != nil || t.yolo != nil || len(t.pre) > 0 || t.preCrop != nil
}

// SeenSize is the size of the image t's geometry takes of a w x h source:
// its crop's before the geometry (cropBefore), else w x h.
func (t *Transform) SeenSize(w, h int) (int, int) { return t.seenSize(w, h) }

// padsCanvas says whether t's canvas path resizes the canvas apart, then
// pads it into the output (an AnyResResize after ops or a crop before
// it: the Decoder's canvasView), in room of the output's size.
func (t *Transform) padsCanvas() bool {
	return onCanvas(t.resize) && (len(t.pre) > 0 || t.preCrop != nil)
}

// ZoomCanvas bounds the canvas of a RandomZoomOut or a PadToSquare for a
// w x h image: side_range's maximum of each side, rounded up and a pixel
// over (the side drawn in float32), or the square of the longer side; 0,
// 0 without one.
func (t *Transform) ZoomCanvas(w, h int) (cw, ch int64) {
	w, h = t.seenSize(w, h) // of a crop before the geometry, the crop's
	if t.zoom == nil {
		return 0, 0
	}
	return canvases[t.zoom.Kind].bound(t.zoom, w, h)
}

// PixelBytes is the size of a sample's uint8 pixels, before Normalize.
func (t *Transform) PixelBytes() int { return max(3*t.outH*t.outW, t.room) }

// String describes the op list in torchvision terms; a transform of
// several views, each group's count and op list.
func (t *Transform) String() string {
	if t.views == nil {
		return optab.OpsString(t.ops) + t.stopString()
	}
	var b strings.Builder
	b.WriteString("views[")
	for v := 0; v < len(t.views); {
		n := 1
		for v+n < len(t.views) && t.views[v+n] == t.views[v] {
			n++
		}
		if v > 0 {
			b.WriteString("; ")
		}
		if name := t.viewNames[v]; name != "" {
			fmt.Fprintf(&b, "%s: ", name)
		}
		fmt.Fprintf(&b, "%d x (%s)", n, optab.OpsString(t.views[v].ops))
		v += n
	}
	b.WriteString("]")
	return b.String()
}

// The checks NewTransform runs on each op's arguments, as torchvision's
// constructors check them.

// geometryKind reports whether k is a geometry op that newTransform's
// loop places (it has a placer): not PadIfSmaller, which op_seg.go's
// segmentation run takes.
func geometryKind(k optab.OpKind) bool {
	_, ok := placers[k]
	return ok
}

// maxIoUTrials and maxIoUOptions bound RandomIoUCrop's trials and
// sampler_options; maxIoURounds its rounds of an option and its trials,
// which torchvision repeats until one finds a crop (forever, on a sample
// whose boxes no crop can meet and no option >= 1): stoker fails such a
// sample.
const (
	maxIoUTrials  = 1000
	maxIoUOptions = 64
	maxIoURounds  = 1000
)

// iouCrop checks a RandomIoUCrop, the geometry's op n, and the ops after
// it up to the Resize(h, w) it needs: SanitizeBoundingBoxes and at most
// one RandomHorizontalFlip (t.iouMid, t.preFlip). It returns the Resize's
// index.
func (t *Transform) iouCrop(op *optab.Op, n int) (int, error) {
	bad := func(format string, a ...any) (int, error) {
		return 0, transformErr(format, a...)
	}
	if n > 0 && !(n == 1 && t.zoom != nil) {
		return bad("RandomIoUCrop must be the first op, or come right after a RandomZoomOut")
	}
	ia := optab.ArgsOf[IoUCropArgs](op)
	if s := ia.Scale; !(s[0] > 0 && s[0] <= s[1] && s[1] <= 1) {
		return bad("RandomIoUCrop min_scale %v, max_scale %v: want 0 < min_scale <= max_scale <= 1", s[0], s[1])
	}
	if r := ia.Ratio; !(r[0] > 0 && r[0] <= r[1] && r[1] <= 1e9) {
		return bad("RandomIoUCrop min_aspect_ratio %v, max_aspect_ratio %v: want 0 < min <= max", r[0], r[1])
	}
	if len(ia.Options) < 1 || len(ia.Options) > maxIoUOptions {
		return bad("RandomIoUCrop sampler_options of %d values: want 1 to %d", len(ia.Options), maxIoUOptions)
	}
	for _, v := range ia.Options {
		if !(v >= 0 && v <= 1e9) {
			return bad("RandomIoUCrop sampler_options %v: want minimal IoUs >= 0 (one >= 1 leaves the image)", ia.Options)
		}
	}
	if ia.Trials < 1 || ia.Trials > maxIoUTrials {
		return bad("RandomIoUCrop trials=%d: want 1 to %d", ia.Trials, maxIoUTrials)
	}
	if p := iouP(op); !(p > 0 && p <= 1) {
		return bad("RandomIoUCrop p=%v: want 0 < p <= 1", op.P)
	}
	j, flip := n+1, false
	for ; j < len(t.ops); j++ {
		o := &t.ops[j]
		switch {
		case o.Kind == optab.OpSanitizeBoundingBoxes:
			if err := optab.CheckSanitize(o); err != nil {
				return bad("op %d (%s): %v", j, o.Kind, err)
			}
			t.iouMid = append(t.iouMid, optab.Lookup(o.Kind).Step(o))
			continue
		case o.Kind == optab.OpRandomHorizontalFlip && !flip:
			if !(o.P >= 0 && o.P <= 1) {
				return bad("op %d (%s): p=%v: want 0 <= p <= 1", j, o.Kind, o.P)
			}
			t.preFlip, flip = o.P, true
			t.iouMid = append(t.iouMid, fn.Step{Fn: fn.HorizontalFlip})
			continue
		}
		break
	}
	resized := j < len(t.ops) && t.ops[j].Kind == OpResize && t.ops[j].Size[1] > 0
	if !resized && (t.bound == [2]int{} || j < len(t.ops) && geometryKind(t.ops[j].Kind)) {
		return bad("RandomIoUCrop needs Resize((h, w)) after it (after SanitizeBoundingBoxes and one RandomHorizontalFlip, if any): its crop's size varies per sample; " +
			"or give the job a bound on the sizes, max_size=(h, w), to keep each crop at its own size")
	}
	t.iou = op
	return j, nil
}

// checkPadding checks a padding op's padding (a RandomCrop's or Pad's;
// none for the others) and constant fill.
func checkPadding(op *optab.Op, padding [4]int) error {
	for _, v := range padding {
		if v < 0 || v > optab.MaxSide {
			return fmt.Errorf("%w: transform: %s padding %v: want 0..%d a side", errs.Unsupported, op.Kind, padding, optab.MaxSide)
		}
	}
	for _, v := range optab.FillOf(op).Fill {
		if !(v >= 0 && v <= 255) || v != math.Trunc(v) {
			return fmt.Errorf("%w: transform: %s fill %v: want integers 0..255 (uint8 pixels)", errs.Unsupported, op.Kind, optab.FillOf(op).Fill)
		}
	}
	return nil
}

// checkRRC checks a RandomResizedCrop, its zero scale and ratio set to
// torchvision's defaults (in a copy of its arguments: others may share
// them).
func checkRRC(op *optab.Op) error {
	a := optab.ArgsOf[RRCArgs](op)
	if a.Scale == [2]float64{} {
		a.Scale = [2]float64{0.08, 1}
	}
	if a.Ratio == [2]float64{} {
		a.Ratio = [2]float64{3.0 / 4, 4.0 / 3}
	}
	op.Args = &a
	// torchvision takes a lower bound of 0 (scale=(0.0, 1.0)): a draw of
	// an empty area fails the try, as one too large for the image does,
	// and the ten failed tries fall back to the center crop.
	if !(a.Scale[0] >= 0 && a.Scale[0] <= a.Scale[1] && a.Scale[1] <= 1) {
		return fmt.Errorf("%w: transform: RandomResizedCrop scale %v: want 0 <= lo <= hi <= 1", errs.Unsupported, a.Scale)
	}
	if !(a.Ratio[0] > 0 && a.Ratio[0] <= a.Ratio[1]) || math.IsInf(a.Ratio[1], 0) {
		return fmt.Errorf("%w: transform: RandomResizedCrop ratio %v: want 0 < lo <= hi, finite", errs.Unsupported, a.Ratio)
	}
	// When no drawn crop fits, torchvision's fallback crops the whole
	// height at width height*hi (or the whole width at height width/lo):
	// a range that makes that side round to 0 for every image a decoder
	// takes would fail every sample as an empty crop.
	if a.Ratio[1]*maxImageSide < 0.5 || maxImageSide/a.Ratio[0] < 0.5 {
		return fmt.Errorf("%w: transform: RandomResizedCrop ratio %v: every crop would be empty (a side of 0 pixels) on any image up to %d pixels a side; want a range that meets [1/%d, %d]",
			errs.Unsupported, a.Ratio, maxImageSide, maxImageSide, maxImageSide)
	}
	return checkSize(op, false)
}

// maxImageSide is the longest side of an image a JPEG can declare, the
// bound checkRRC takes for "any image".
const maxImageSide = 65535

// checkP checks a RandomHorizontalFlip fused into the decode (op pos).
func checkP(op *optab.Op, pos int) error {
	if !(op.P >= 0 && op.P <= 1) { // NaN too
		return optab.OpError(fmt.Sprintf("op %d (%s)", pos, op.Kind), "p=%v: want 0 <= p <= 1", op.P)
	}
	return nil
}

// checkInterp checks a geometry op's interpolation.
func checkInterp(op *optab.Op, geometry bool) error {
	in := optab.ResamplingOf(op).Interp
	if op.Kind == OpRandomResizedCrop && optab.ArgsOf[RRCArgs](op).RandomInterp && in != InterpBilinear {
		return fmt.Errorf("%w: transform: %s: a random interpolation draws bilinear or bicubic (Interp bilinear), got %s", errs.Unsupported, op.Kind, in)
	}
	switch in {
	case InterpBilinear, InterpBicubic, InterpNearest:
		return nil
	}
	return fmt.Errorf("%w: transform: %s: interpolation %s: want nearest, bilinear or bicubic", errs.Unsupported, op.Kind, in)
}

func checkSize(op *optab.Op, shorterOK bool) error {
	h, w := op.Size[0], op.Size[1]
	if w == 0 && !shorterOK {
		w = h
		op.Size[1] = w
	}
	if h <= 0 || h > optab.MaxSide || w < 0 || w > optab.MaxSide {
		return fmt.Errorf("%w: transform: %s size %v: sides must be in 1..%d", errs.Unsupported, op.Kind, op.Size, optab.MaxSide)
	}
	return nil
}

// growPadAfter adds a Pad after the crop (t.padAfter) to the output size.
func (t *Transform) growPadAfter() error {
	if t.padAfter == nil {
		return nil
	}
	pd := optab.ArgsOf[PadArgs](t.padAfter).Padding
	if t.outW += pd[0] + pd[2]; t.outW > optab.MaxSide {
		return fmt.Errorf("%w: transform: Pad after the crop: width %d is more than %d", errs.Unsupported, t.outW, optab.MaxSide)
	}
	if t.outH += pd[1] + pd[3]; t.outH > optab.MaxSide {
		return fmt.Errorf("%w: transform: Pad after the crop: height %d is more than %d", errs.Unsupported, t.outH, optab.MaxSide)
	}
	return nil
}
