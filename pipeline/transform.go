package pipeline

import (
	"fmt"
)

// OpKind names an op, with torchvision.transforms.v2's name and semantics.
type OpKind string

// The ops a Transform is built from are defined by their families' files
// (op_*.go), each registered with its schema (registry.go). The geometry
// (the first op, or Resize then CenterCrop, and detection's) is fused into
// the decode; every other op runs on the output-sized crop, in the order
// given.

// Op is one step of a transform, with torchvision's arguments. Each kind
// reads the fields its doc names; zero fields take torchvision's defaults
// where the doc says so (RandomResizedCrop scale (0.08, 1) and ratio
// (3/4, 4/3), say), and the wire (server/transform.go) fills every other
// default in before a Transform is made. Size is (height, width); Resize
// with Size[1] == 0 resizes the shorter side to Size[0] keeping the aspect
// ratio, like Resize(int).
type Op struct {
	Kind OpKind
	// Size: RandomResizedCrop, Resize, CenterCrop, RandomCrop.
	Size [2]int
	// Padding: RandomCrop's and Pad's padding (left, top, right,
	// bottom), and PadIfNeeded RandomCrop's pad_if_needed; their fill is
	// Fill (constant mode).
	Padding     [4]int
	PadIfNeeded bool
	// Scale: RandomResizedCrop's and RandomErasing's area range;
	// RandomAffine's scale range ((0, 0): None).
	Scale [2]float64
	// Ratio: RandomResizedCrop's and RandomErasing's aspect range.
	Ratio [2]float64
	// P: the probability of the Random* ops that have one, and of
	// RandomApply.
	P float64
	// ColorJitter: torchvision's single-number forms, each drawn from
	// [max(0, 1-x), 1+x] (hue: [-x, x]); 0 is None. With JitterRanges the
	// (min, max) forms in Jitter are used instead (brightness, contrast,
	// saturation, hue), a range of (1, 1) ((0, 0) for hue) being None.
	Brightness, Contrast, Saturation, Hue float64
	JitterRanges                          bool
	Jitter                                [4][2]float64
	// Normalize: output = (pixel/255 - Mean) / Std, as float32.
	// RandomErasing with RandomValue: the Normalize its noise is drawn
	// for (zero: ImageNet's).
	Mean, Std [3]float64
	// Interp and NoAntialias: the resampling of the geometry,
	// RandomRotation, RandomAffine and the policies. NoAntialias is
	// torchvision's antialias=False (the geometry only).
	Interp      Interpolation
	NoAntialias bool
	// Degrees: RandomRotation's and RandomAffine's angle range.
	Degrees [2]float64
	// Translate: RandomAffine's (max_dx, max_dy) as fractions of the
	// size; HasTranslate false is None.
	Translate    [2]float64
	HasTranslate bool
	// Shear: RandomAffine's shear ranges, x (Shear[0:2]) and, when
	// ShearY, y (Shear[2:4]); HasShear false is None.
	Shear            [4]float64
	HasShear, ShearY bool
	// Fill: RandomRotation's, RandomAffine's and the policies' fill, one
	// value per channel; FillNone is torchvision's fill=None (the
	// policies' default), which for bilinear keeps a border pixel's inside
	// taps instead of blending towards a fill.
	Fill      [3]float64
	FillNone  bool
	FillTyped bool    // a fill per type ({Image: v, Mask: m}): Fill (FillNone) the pixels' alone
	FillMask  float64 // with FillTyped, the masks' fill (else Fill is every type's; CheckMasks)
	// Center: RandomRotation's and RandomAffine's center, pixels from the
	// top left; HasCenter false is None (the image's center).
	Center    [2]float64
	HasCenter bool
	// Expand: RandomRotation's expand (each sample its own size).
	Expand bool
	// KernelSize (x, y) and Sigma (min, max): GaussianBlur.
	KernelSize [2]int
	Sigma      [2]float64
	// Threshold: RandomSolarize (0..255). Bits: RandomPosterize.
	// Factor: RandomAdjustSharpness's sharpness_factor.
	Threshold float64
	Bits      int
	Factor    float64
	// MinSize and MinArea: SanitizeBoundingBoxes' bounds (each >= 1).
	MinSize, MinArea float64
	Sizes            []int // RandomShortestSize's min_size; RandomResize's min_size, max_size
	MaxSize          int   // RandomShortestSize's max_size (0: None)
	// SideRange: RandomZoomOut's side_range (min, max), its fill Fill.
	SideRange [2]float64
	// RandomIoUCrop: Scale (min_scale, max_scale), Ratio
	// (min_aspect_ratio, max_aspect_ratio), Options its sampler_options
	// (the minimal IoUs; one >= 1 leaves the image), Trials its trials.
	Options []float64
	Trials  int
	// BoxFormat: ConvertBoundingBoxFormat's format.
	BoxFormat  BoxFormat
	ClampNone  bool    // ClampBoundingBoxes' clamping_mode None: the boxes left
	Distortion float64 // RandomPerspective's distortion_scale (0..1)
	// Value: RandomErasing's fill, per channel in pixel units (0..255);
	// RandomValue is value="random", RandomColor with it one random colour
	// per box (timm's mode "rand"). MinCount and MaxCount: timm's count of
	// boxes (0: 1; MaxCount 0: MinCount), each box's area divided by it.
	Value              [3]float64
	RandomValue        bool
	RandomColor        bool
	MinCount, MaxCount int
	// Ops: RandomApply's, RandomChoice's and RandomOrder's ops; Probs:
	// RandomChoice's p (nil: uniform).
	Ops   []Op
	Probs []float64
	// NumOps, Magnitude, Bins: RandAugment's num_ops, magnitude and
	// num_magnitude_bins (Bins also TrivialAugmentWide's).
	NumOps, Magnitude, Bins int
	// Policy: AutoAugment's policy ("imagenet", "cifar10", "svhn");
	// TimmRandAugment's config string ("rand-m9-mstd0.5-inc1").
	Policy string
	// AugMix: severity, mixture_width, chain_depth, alpha, and
	// all_ops=False as PartialOps.
	Severity, MixtureWidth, ChainDepth int
	Alpha                              float64
	PartialOps                         bool
	// RandomInterp: TimmRandAugment draws bilinear or bicubic for each
	// resampling op (timm's default when no interpolation is set);
	// RandomResizedCrop draws one of the two per sample, after its crop
	// (timm's RandomResizedCropAndInterpolation(interpolation="random")),
	// Interp then bilinear.
	RandomInterp bool
	// The YOLO family's (op_yolo.go), with ultralytics' names: ImgSz,
	// YOLOLoadImage's imgsz; YOLOLetterBox's new_shape is Size (h, w),
	// with auto, scale_fill, scaleup, center and stride; YOLORandomPerspective's
	// degrees, translate, scale, shear, perspective and size (w, h; 0:
	// None); YOLORandomHSV's gains; YOLORandomFlip's p (P), direction and
	// flip_idx.
	ImgSz                                        int
	Auto, ScaleFill, ScaleUp, LetterCenter       bool
	Stride                                       int
	YDegrees, YTranslate, YScale, YShear, YPersp float64
	YSize                                        [2]int
	HGain, SGain, VGain                          float64
	Direction                                    string
	FlipIdx                                      []int
	// Tiles: ultralytics' Mosaic's n (its imgsz is ImgSz; op_mosaic.go).
	// Mode: YOLOCopyPaste's mode ("flip"); Beta, Areas: YOLOCutMix's.
	Tiles int
	Mode  string
	Beta  float64
	Areas int
}

// ColorJitterOp is ColorJitter(brightness, contrast, saturation, hue) in
// torchvision's single-number form.
func ColorJitterOp(brightness, contrast, saturation, hue float64) Op {
	return Op{Kind: OpColorJitter, Brightness: brightness, Contrast: contrast, Saturation: saturation, Hue: hue}
}

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
	// cropResize: crop a box of the source, then resize it to the output
	// (RandomResizedCrop, CenterCrop alone).
	cropResize geomKind = iota
	// resizeCrop: resize the whole source, then crop (Resize, Resize +
	// CenterCrop).
	resizeCrop
)

// Transform is a compiled, validated op list. It is immutable and safe for
// concurrent use.
type Transform struct {
	ops   []Op
	geom  geomKind
	rrc   *Op // RandomResizedCrop, if any
	rcrop *Op // RandomCrop, if any
	pad   *Op // Pad, if any: first, before a RandomCrop or CenterCrop
	// zoom is a RandomZoomOut, if any: first, before a Resize(h, w), a
	// RandomCrop or a CenterCrop; its padding is drawn per sample.
	zoom *Op
	// iou is a RandomIoUCrop, if any: first or after a RandomZoomOut,
	// then Resize(h, w); iouMid the SanitizeBoundingBoxes steps and at
	// most one RandomHorizontalFlip (FnHorizontalFlip, drawn at preFlip)
	// between them, in order.
	iou     *Op
	iouMid  []Step
	preFlip float64
	// pre are the RandomPhotometricDistorts before the geometry, compiled:
	// run on the decoded image, before a canvas plan's geometry.
	pre    []node
	maxPre int
	// padAfter is a Pad right after a RandomCrop or a CenterCrop (not
	// resized), if any: the crop padded into a larger output.
	padAfter *Op
	resize   *Op // Resize, if any
	center   *Op // CenterCrop, if any
	// jitter and fixed: a ScaleJitter and FixedSizeCrop (lsj.go); vary:
	// each sample's size is its own, outH x outW its bound (lsj.go).
	jitter, fixed *Op
	vary          bool
	// varyGeom: the geometry's sizes vary (RandomShortestSize); where ops
	// grow it (growRotate), geomW x geomH its size, room their largest.
	varyGeom           bool
	geomW, geomH, room int
	// yolo is a YOLO geometry (yolo.go): YOLOLoadImage, then a
	// YOLOLetterBox and/or a YOLORandomPerspective.
	yolo *yoloGeom
	// flip is the p of a RandomHorizontalFlip right after the geometry:
	// fused into the decode (the resampler's coefficients run backwards).
	flip    float64
	hasFlip bool
	// post are the ops after the geometry (and a fused flip), compiled,
	// in order; maxSteps bounds the steps they draw for one sample.
	post     []node
	maxSteps int
	norm     *Op
	outH     int
	outW     int
	layout   Layout
	// views are a transform of several views' (NewViews), each a one-view
	// transform, and their groups' names; nil for a one-view transform.
	// outH, outW and norm are then view 0's.
	views     []*Transform
	viewNames []string
	vlayout   ViewLayout
	// decode is how the fast path decodes a JPEG before the geometry
	// (WithDecode): DecodeExact, the zero value, or DecodeFast.
	decode DecodeMode
	stop   *stopEpoch // a stop_epoch (decodemode.go), if any
	// mosaic is ultralytics' Mosaic, if any: the geometry, its partners
	// read with the sample (op_mosaic.go, decode_multi.go).
	mosaic *Op
	mixup  *Op // ultralytics' MixUp, right after the Mosaic
	// copyPaste and copyPasteMix: ultralytics' CopyPaste in flip mode, right
	// after the Mosaic, and in mixup mode, after its warp (op_yolo.go).
	copyPaste, copyPasteMix *Op
	cutmix                  *Op // ultralytics' CutMix, last of the multi-image geometry
}

// RNG streams: the geometry draws from stream 1 and the op at position j
// after it (a fused flip is position 1) from stream 1+j, so that ops never
// shift each other's numbers (crop, flip and a ColorJitter after the flip
// keep the streams 1, 2 and 3 they always had). An op inside a container
// draws from its own stream, derived from its container's (node.stream).
const (
	streamCrop = 1
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
func NewTransform(layout Layout, ops ...Op) (*Transform, error) {
	t := &Transform{ops: cloneOps(ops), layout: layout}
	if layout != CHW && layout != HWC {
		return nil, fmt.Errorf("%w: layout %d", ErrUnsupported, layout)
	}
	bad := func(format string, a ...any) (*Transform, error) {
		return nil, fmt.Errorf("%w: transform: %s", ErrUnsupported, fmt.Sprintf(format, a...))
	}
	// RandomPhotometricDistort before the geometry (compilePre): the
	// geometry is parsed from the op after them.
	all, pre := t.ops, leadingPre(t.ops)
	t.ops = t.ops[pre:]
	n, err := t.lsjGeometry() // ops of the geometry: a ScaleJitter and FixedSizeCrop's (lsj.go)
	if err == nil && n == 0 {
		n, err = t.yoloGeometry() // or the YOLO family's (yolo.go)
	}
	if err != nil {
		return nil, err
	}
	for n < len(t.ops) && (geometryKind(t.ops[n].Kind) || t.mosaic != nil && t.ops[n].Kind == OpYOLORandomPerspective) {
		op := &t.ops[n]
		if err := t.checkZoomOut(op, n); err != nil {
			return nil, err
		}
		switch op.Kind {
		case OpMosaic, OpYOLORandomPerspective, OpMixUp, OpCopyPaste, OpCutMix: // a YOLORandomPerspective after a Mosaic (yoloGeometry parses it after a YOLOLoadImage)
			if err := t.multiOp(op, n); err != nil {
				return nil, err
			}
		case OpRandomZoomOut:
			t.zoom = op
		case OpRandomIoUCrop:
			k, err := t.iouCrop(op, n)
			if err != nil {
				return nil, err
			}
			n = k // the Resize after it is next
			continue
		case OpPad:
			if n > 0 && (t.padAfter != nil || t.rrc != nil || t.resize != nil || (t.rcrop == nil && t.center == nil)) {
				return bad("Pad after a resampling geometry (RandomResizedCrop, Resize) or twice after the crop is not supported: Pad comes first, or right after a RandomCrop or CenterCrop")
			}
			if err := checkPadding(op); err != nil {
				return nil, err
			}
			if n == 0 {
				t.pad = op
			} else {
				t.padAfter = op
			}
		case OpRandomCrop:
			if n > 0 && (n > 1 || (t.pad == nil && t.zoom == nil) || t.padAfter != nil) {
				return bad("RandomCrop must be the only geometry op (after a Pad or a RandomZoomOut, if any) and come first")
			}
			if err := checkSize(op, false); err != nil {
				return nil, err
			}
			if err := checkPadding(op); err != nil {
				return nil, err
			}
			if t.pad != nil && (op.Padding != [4]int{} || op.PadIfNeeded) && op.Fill != t.pad.Fill {
				return bad("Pad fill %v then RandomCrop padding with fill %v: padding of two fills in one crop is not supported (give both the same fill)", t.pad.Fill, op.Fill)
			}
			t.rcrop = op
		case OpRandomResizedCrop:
			if t.pad != nil {
				return bad("Pad before RandomResizedCrop is not supported: Pad may come before a RandomCrop or CenterCrop only")
			}
			if n > 0 {
				return bad("RandomResizedCrop must be the only geometry op and come first")
			}
			if err := checkRRC(op); err != nil {
				return nil, err
			}
			t.rrc = op
		case OpResize, OpRandomShortestSize, OpRandomResize:
			if t.pad != nil {
				return bad("Pad before Resize is not supported: Pad may come before a RandomCrop or CenterCrop only")
			}
			if n > 0 && !(t.zoom != nil && n == 1) && t.iou == nil {
				return bad("Resize must come first (after a RandomZoomOut, if any), before CenterCrop")
			}
			if err := t.checkResize(op, n); err != nil {
				return nil, err
			}
			t.resize = op
		case OpCenterCrop:
			if t.rrc != nil || t.rcrop != nil || t.center != nil || t.padAfter != nil {
				return bad("CenterCrop must follow Resize or Pad (if any) and come before the other ops")
			}
			if err := checkSize(op, false); err != nil {
				return nil, err
			}
			t.center = op
		}
		if err := checkInterp(op, true); err != nil {
			return nil, err
		}
		n++
	}
	if err := t.checkMulti(); err != nil {
		return nil, err
	}
	if err := t.checkAlone(); err != nil {
		return nil, err
	}
	switch {
	case t.fixed != nil, t.yolo != nil: // lsjGeometry or yoloGeometry set the size
	case t.mosaic != nil:
		t.geom, t.outH, t.outW = cropResize, 2*t.mosaic.ImgSz, 2*t.mosaic.ImgSz
	case t.rcrop != nil:
		t.geom, t.outH, t.outW = cropResize, t.rcrop.Size[0], t.rcrop.Size[1]
	case t.rrc != nil:
		t.geom, t.outH, t.outW = cropResize, t.rrc.Size[0], t.rrc.Size[1]
	case t.center != nil:
		t.geom, t.outH, t.outW = resizeCrop, t.center.Size[0], t.center.Size[1]
		if t.resize == nil {
			t.geom = cropResize
		}
	case t.resize != nil && t.resize.Size[1] > 0:
		t.geom, t.outH, t.outW = resizeCrop, t.resize.Size[0], t.resize.Size[1]
	case t.resize != nil:
		if err := t.varySize(); err != nil {
			return nil, err
		}
	case len(t.ops) > 0 && expands(&t.ops[0]):
		return bad("op 0 is RandomRotation with expand=True: its size follows the image's, which nothing bounds; put a geometry that fixes the size before it (Resize((h, w)), RandomResizedCrop, CenterCrop, or RandomShortestSize with a max_size): each sample is then its own size, at most the rotated bound")
	case len(t.ops) > 0:
		return bad("op 0 is %s: the first op must be the geometry (RandomResizedCrop, Resize(h, w) or Resize then CenterCrop, or CenterCrop), which fixes the batch's size", t.ops[0].Kind)
	default:
		return bad("no geometry op: a batch needs a fixed size (RandomResizedCrop, Resize(h, w) or CenterCrop)")
	}
	if err := t.growPadAfter(); err != nil {
		return nil, err
	}
	rest := t.ops[n:]
	if k := len(rest) - 1; k >= 0 && rest[k].Kind == OpNormalize {
		if err := checkNormalize(&rest[k]); err != nil {
			return nil, err
		}
		t.norm, rest = &rest[k], rest[:k]
	}
	if len(rest) > 0 && rest[0].Kind == OpRandomHorizontalFlip && t.mosaic == nil { // a mosaic's flip is a step
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
	if len(rest) > maxOps {
		return bad("%d ops after the geometry: the limit is %d", len(rest), maxOps)
	}
	if err := checkConvertLast(rest, pre+first-1); err != nil {
		return nil, err
	}
	if err := t.checkVaryOps(rest); err != nil {
		return nil, err
	}
	c := compiler{w: t.outW, h: t.outH}
	t.post = make([]node, len(rest))
	for i := range rest {
		j := i + 1 // position after the geometry
		if t.hasFlip {
			j++
		}
		nd, err := c.compile(&rest[i], pre+first-1+i, uint64(1+j), 0)
		if err != nil {
			return nil, err
		}
		t.post[i] = nd
		t.maxSteps += nd.maxSteps
	}
	if t.ops = all; pre > 0 {
		if err := t.compilePre(pre); err != nil {
			return nil, err
		}
	}
	if err := t.growRotate(rest, pre+first-1); err != nil {
		return nil, err
	}
	t.setLayout()
	return t, nil
}

// Ops returns the compiled op list, defaults filled in.
func (t *Transform) Ops() []Op { return append([]Op(nil), t.ops...) }

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

// pixelBytes is the size of a sample's uint8 pixels, before Normalize.
func (t *Transform) pixelBytes() int { return max(3*t.outH*t.outW, t.room) }
