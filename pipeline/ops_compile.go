package pipeline

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/internal/det"
)

// Bounds on what a transform may ask, so that a spec cannot cost the server
// unbounded time or memory per sample.
const (
	maxOps      = 32 // ops in one list (after the geometry, or in a container)
	maxDepth    = MaxNesting
	maxNodes    = 128
	maxSteps    = 256 // steps one sample may draw
	maxPolicyOp = 16  // RandAugment's num_ops, AugMix's mixture_width
	// MaxEraseCount bounds RandomErasing's boxes per sample (timm's
	// max_count).
	MaxEraseCount = 16
	// maxKernel bounds a blur's side: a sample's blur costs its side in
	// multiply-adds per pixel (twice).
	maxKernel = 1023
)

// MaxNesting is how deep a transform's containers (RandomApply,
// RandomChoice, RandomOrder) may nest inside one another.
const MaxNesting = 4

// node is a compiled op after the geometry: what it draws from, and what
// it needs precomputed (a policy's magnitudes, say). Nodes are immutable.
type node struct {
	op     *Op
	stream uint64 // its RNG stream (Key.Stream)
	kids   []node // a container's ops
	cum    []float64
	// jit: ColorJitter's ranges (brightness, contrast, saturation, hue),
	// jitOn: which are not None.
	jit   [4][2]float64
	jitOn [4]bool
	// logRatio: RandomErasing's log aspect range.
	logRatio [2]float64
	// pol: a policy's table.
	pol *policy
	// step: what an op whose only draw is whether it applies emits.
	step Step
	// maxSteps bounds the steps one draw emits.
	maxSteps int
}

// compiler compiles op lists for an output of w x h.
type compiler struct {
	w, h  int
	nodes int
}

// opError is a bad op's error: where it is (its position, through its
// containers) and what is wrong.
func opError(path string, format string, a ...any) error {
	return fmt.Errorf("%w: transform: %s: %s", ErrUnsupported, path, fmt.Sprintf(format, a...))
}

// compile checks op (at position pos of its list; path names its
// containers) and returns its node, drawing from stream.
func (c *compiler) compile(op *Op, pos int, stream uint64, depth int, path ...string) (node, error) {
	where := strings.Join(append(path, fmt.Sprintf("op %d (%s)", pos, op.Kind)), " > ")
	bad := func(format string, a ...any) (node, error) { return node{}, opError(where, format, a...) }
	c.nodes++
	if c.nodes > maxNodes {
		return bad("more than %d ops in all", maxNodes)
	}
	n := node{op: op, stream: stream, maxSteps: 1}
	prob := func() error {
		if !(op.P >= 0 && op.P <= 1) {
			return opError(where, "p=%v: want 0 <= p <= 1", op.P)
		}
		return nil
	}
	n.step = fixedStep(op)
	switch op.Kind {
	case OpRandomResizedCrop, OpResize, OpCenterCrop, OpRandomCrop, OpPad, OpRandomZoomOut, OpRandomIoUCrop, OpScaleJitter, OpFixedSizeCrop, OpRandomShortestSize, OpRandomResize:
		if depth > 0 {
			return bad("a geometry op inside a container: the geometry is the transform's first op, fused into the decode")
		}
		if op.Kind == OpScaleJitter || op.Kind == OpFixedSizeCrop || op.Kind == OpRandomShortestSize || op.Kind == OpRandomResize {
			return bad("%s after other ops is not supported: it is the geometry, first, fused into the decode", op.Kind)
		}
		if op.Kind == OpRandomZoomOut {
			return bad("RandomZoomOut after other ops is not supported: it is the first op (then Resize(h, w), RandomCrop or CenterCrop), fused into the decode")
		}
		if op.Kind == OpRandomIoUCrop {
			return bad("RandomIoUCrop after other ops is not supported: it is the first op, or right after a RandomZoomOut (then Resize(h, w)), fused into the decode")
		}
		if op.Kind == OpPad {
			return bad("Pad after other ops is not supported: Pad comes right before or right after a RandomCrop or CenterCrop (or give RandomCrop its padding)")
		}
		return bad("a geometry op after other ops: the geometry must be the first op (one RandomResizedCrop, RandomCrop, or Resize then CenterCrop), fused into the decode")
	case OpNormalize:
		return bad("Normalize must come once, last (and not inside a container)")
	case OpRandomHorizontalFlip, OpRandomVerticalFlip, OpRandomGrayscale, OpRandomInvert, OpRandomEqualize, OpRandomAutocontrast:
		if err := prob(); err != nil {
			return node{}, err
		}
	case OpGrayscale:
	case OpSanitizeBoundingBoxes:
		if err := checkSanitize(op); err != nil {
			return bad("%v", err)
		}
	case OpClampBoundingBoxes, OpClampKeyPoints, OpSanitizeKeyPoints:
		// No argument to check: targets_clamp.go.
	case OpConvertBoundingBoxFormat:
		if depth > 0 {
			return bad("ConvertBoundingBoxFormat inside a container is not supported: it comes last, after every op that moves boxes")
		}
		if op.BoxFormat > BoxCXCYWH {
			return bad("format %d: want XYXY, XYWH or CXCYWH", op.BoxFormat)
		}
	case OpRandomSolarize:
		if err := prob(); err != nil {
			return node{}, err
		}
		if !(op.Threshold >= 0 && op.Threshold <= 255) {
			return bad("threshold %v: want 0..255 (the uint8 image's range)", op.Threshold)
		}
	case OpRandomPosterize:
		if err := prob(); err != nil {
			return node{}, err
		}
		if op.Bits < 0 || op.Bits > 8 {
			return bad("bits %d: want 0..8", op.Bits)
		}
	case OpRandomAdjustSharpness:
		if err := prob(); err != nil {
			return node{}, err
		}
		if !(op.Factor >= 0 && op.Factor <= 1e3) {
			return bad("sharpness_factor %v: want 0 <= x <= 1000", op.Factor)
		}
	case OpColorJitter:
		if err := c.jitter(&n, where); err != nil {
			return node{}, err
		}
		n.maxSteps = 4
	case OpRandomPhotometricDistort:
		if err := prob(); err != nil {
			return node{}, err
		}
		if !op.JitterRanges {
			return bad("RandomPhotometricDistort takes (min, max) ranges (JitterRanges)")
		}
		if err := c.jitter(&n, where); err != nil {
			return node{}, err
		}
		n.maxSteps = 5
	case OpGaussianBlur:
		for _, k := range op.KernelSize {
			if k <= 0 || k%2 == 0 || k > maxKernel {
				return bad("kernel_size %v: each must be odd, positive and at most %d", op.KernelSize, maxKernel)
			}
		}
		if op.KernelSize[0]/2 >= c.w || op.KernelSize[1]/2 >= c.h {
			return bad("kernel_size %v on a %dx%d image: torchvision refuses a kernel whose half is not smaller than the image's side", op.KernelSize, c.w, c.h)
		}
		if !(op.Sigma[0] > 0 && op.Sigma[0] <= op.Sigma[1] && op.Sigma[1] <= 1e4) {
			return bad("sigma %v: want 0 < min <= max (at most 10000)", op.Sigma)
		}
	case OpRandomRotation, OpRandomAffine:
		if err := c.affine(op, where); err != nil {
			return node{}, err
		}
	case OpRandomPerspective:
		if err := prob(); err != nil {
			return node{}, err
		}
		if !(op.Distortion >= 0 && op.Distortion <= 1) {
			return bad("distortion_scale %v: want 0..1", op.Distortion)
		}
		if err := checkFill(op.Fill, where); err != nil {
			return node{}, err
		}
		if op.Interp != InterpNearest && op.Interp != InterpBilinear {
			return bad("interpolation %s: torchvision's perspective of a tensor is nearest or bilinear", op.Interp)
		}
	case OpRandomErasing:
		if err := prob(); err != nil {
			return node{}, err
		}
		if !(op.Scale[0] >= 0 && op.Scale[0] <= op.Scale[1] && op.Scale[1] <= 1) {
			return bad("scale %v: want 0 <= min <= max <= 1", op.Scale)
		}
		if !(op.Ratio[0] > 0 && op.Ratio[0] <= op.Ratio[1]) || math.IsInf(op.Ratio[1], 0) {
			return bad("ratio %v: want 0 < min <= max, finite", op.Ratio)
		}
		for _, v := range op.Value {
			if !(v >= 0 && v <= 255) {
				return bad("value %v: want pixel values in 0..255 (stoker erases uint8 pixels: a value v after Normalize is 255*(mean + std*v))", op.Value)
			}
		}
		if op.RandomValue {
			if err := checkNoiseNormalize(op, where); err != nil {
				return node{}, err
			}
		} else if op.RandomColor {
			return bad("RandomColor (one random colour per box) needs RandomValue")
		}
		lo, hi := max(op.MinCount, 1), max(op.MaxCount, op.MinCount, 1)
		if lo > hi || hi > MaxEraseCount {
			return bad("count %d..%d: want 1 <= min <= max <= %d", op.MinCount, op.MaxCount, MaxEraseCount)
		}
		n.maxSteps = hi
		n.logRatio = [2]float64{det.Log(op.Ratio[0]), det.Log(op.Ratio[1])}
	case OpRandomApply, OpRandomChoice, OpRandomOrder:
		if err := c.container(&n, where, depth, path, pos); err != nil {
			return node{}, err
		}
	case OpTrivialAugmentWide, OpRandAugment, OpAutoAugment, OpAugMix, OpTimmRandAugment, OpTimmAutoAugment, OpTimmAugMix:
		pol, err := newPolicy(op, c.w, c.h)
		if err != nil {
			return bad("%v", err)
		}
		n.pol, n.maxSteps = pol, pol.maxSteps
	default:
		return bad("unknown op %q", op.Kind)
	}
	if n.maxSteps > maxSteps {
		return bad("may draw %d steps per sample: the limit is %d", n.maxSteps, maxSteps)
	}
	return n, nil
}

// fixedStep is the step of an op that draws nothing but whether it
// applies (the Random* ops with a p of their own, and Grayscale).
func fixedStep(op *Op) Step {
	switch op.Kind {
	case OpRandomHorizontalFlip:
		return Step{Fn: FnHorizontalFlip}
	case OpRandomVerticalFlip:
		return Step{Fn: FnVerticalFlip}
	case OpRandomGrayscale, OpGrayscale:
		return Step{Fn: FnRGBToGrayscale, I: [6]int{3}}
	case OpRandomSolarize:
		return Step{Fn: FnSolarize, F: [6]float64{op.Threshold}}
	case OpRandomPosterize:
		return Step{Fn: FnPosterize, I: [6]int{op.Bits}}
	case OpRandomInvert:
		return Step{Fn: FnInvert}
	case OpRandomEqualize:
		return Step{Fn: FnEqualize}
	case OpRandomAutocontrast:
		return Step{Fn: FnAutocontrast}
	case OpRandomAdjustSharpness:
		return Step{Fn: FnAdjustSharpness, F: [6]float64{op.Factor}}
	case OpSanitizeBoundingBoxes:
		return Step{Fn: FnSanitizeBoxes, F: [6]float64{op.MinSize, op.MinArea}}
	case OpConvertBoundingBoxFormat:
		return Step{Fn: FnConvertBoxFormat, I: [6]int{int(op.BoxFormat)}}
	case OpClampBoundingBoxes:
		return Step{Fn: FnClampBoxes}
	case OpClampKeyPoints:
		return Step{Fn: FnClampKeypoints}
	case OpSanitizeKeyPoints:
		return Step{Fn: FnSanitizeKeypoints}
	}
	return Step{}
}

// jitter compiles ColorJitter's ranges, as torchvision's _check_input.
func (c *compiler) jitter(n *node, where string) error {
	op := n.op
	scalar := [4]float64{op.Brightness, op.Contrast, op.Saturation, op.Hue}
	names := [4]string{"brightness", "contrast", "saturation", "hue"}
	for i := range 4 {
		center, lo, hi := 1.0, 0.0, math.Inf(1)
		if i == 3 {
			center, lo, hi = 0, -0.5, 0.5
		}
		r := op.Jitter[i]
		if !op.JitterRanges {
			x := scalar[i]
			if !(x >= 0) || math.IsInf(x, 0) {
				return opError(where, "%s %v: a single number must be finite and >= 0", names[i], x)
			}
			r = [2]float64{center - x, center + x}
			if i < 3 {
				r[0] = math.Max(r[0], 0)
			}
		}
		if !(lo <= r[0] && r[0] <= r[1] && r[1] <= hi) || math.IsInf(r[1], 0) {
			return opError(where, "%s %v: want %v <= min <= max <= %v", names[i], r, lo, hi)
		}
		if i < 3 && r[1] > 100 {
			return opError(where, "%s %v: a factor over 100 makes every pixel 0 or 255", names[i], r)
		}
		n.jit[i], n.jitOn[i] = r, !(r[0] == center && r[1] == center)
	}
	return nil
}

// affine checks RandomRotation's and RandomAffine's arguments.
func (c *compiler) affine(op *Op, where string) error {
	if !(op.Degrees[0] <= op.Degrees[1]) || math.Abs(op.Degrees[0]) > 1e6 || math.Abs(op.Degrees[1]) > 1e6 {
		return opError(where, "degrees %v: want min <= max, finite", op.Degrees)
	}
	if err := checkFill(op.Fill, where); err != nil {
		return err
	}
	if op.Interp != InterpNearest && op.Interp != InterpBilinear {
		return opError(where, "interpolation %s: torchvision rotates and shears tensors with nearest or bilinear", op.Interp)
	}
	if op.HasCenter && !(math.Abs(op.Center[0]) <= 1e6 && math.Abs(op.Center[1]) <= 1e6) {
		return opError(where, "center %v: want finite", op.Center)
	}
	if op.Kind == OpRandomRotation {
		return nil
	}
	if op.HasTranslate {
		for _, t := range op.Translate {
			if !(t >= 0 && t <= 1) {
				return opError(where, "translate %v: each must be in 0..1", op.Translate)
			}
		}
	}
	if op.Scale != [2]float64{} && !(op.Scale[0] > 0 && op.Scale[0] <= op.Scale[1] && op.Scale[1] <= 100) {
		return opError(where, "scale %v: want 0 < min <= max", op.Scale)
	}
	if op.HasShear {
		k := 2
		if op.ShearY {
			k = 4
		}
		for i := 0; i < k; i += 2 {
			if !(op.Shear[i] <= op.Shear[i+1]) || math.Abs(op.Shear[i]) > 1e6 || math.Abs(op.Shear[i+1]) > 1e6 {
				return opError(where, "shear %v: want min <= max, finite", op.Shear[:k])
			}
		}
	}
	return nil
}

// checkFill checks a fill: one value per channel in the uint8 range.
func checkFill(fill [3]float64, where string) error {
	for _, v := range fill {
		if !(v >= 0 && v <= 255) {
			return opError(where, "fill %v: want values in 0..255", fill)
		}
	}
	return nil
}

// checkNoiseNormalize fills in and checks the Normalize RandomErasing's
// noise is drawn for.
func checkNoiseNormalize(op *Op, where string) error {
	if op.Std == [3]float64{} && op.Mean == [3]float64{} {
		op.Mean, op.Std = imagenetMean, imagenetStd
	}
	for c := range 3 {
		if !(op.Std[c] > 0 && op.Std[c] < 1e3 && math.Abs(op.Mean[c]) < 1e3) {
			return opError(where, "the noise's mean %v and std %v: want finite, std > 0", op.Mean, op.Std)
		}
	}
	return nil
}

// ImageNet's per-channel mean and std, in [0, 1] units.
var (
	imagenetMean = [3]float64{0.485, 0.456, 0.406}
	imagenetStd  = [3]float64{0.229, 0.224, 0.225}
)

// container compiles RandomApply's, RandomChoice's and RandomOrder's ops.
func (c *compiler) container(n *node, where string, depth int, path []string, pos int) error {
	op := n.op
	if len(op.Ops) == 0 {
		return opError(where, "pass at least one op")
	}
	if len(op.Ops) > maxOps {
		return opError(where, "%d ops: the limit is %d", len(op.Ops), maxOps)
	}
	if depth+1 > maxDepth {
		return opError(where, "containers nested deeper than %d", maxDepth)
	}
	if op.Kind == OpRandomApply && !(op.P >= 0 && op.P <= 1) {
		return opError(where, "p=%v: want 0 <= p <= 1", op.P)
	}
	if op.Kind != OpRandomChoice && op.Probs != nil {
		return opError(where, "only RandomChoice takes a list of p")
	}
	if op.Kind == OpRandomChoice {
		probs := op.Probs
		if probs == nil {
			probs = make([]float64, len(op.Ops))
			for i := range probs {
				probs[i] = 1
			}
		}
		if len(probs) != len(op.Ops) {
			return opError(where, "%d values of p for %d ops", len(probs), len(op.Ops))
		}
		var total float64
		for _, p := range probs {
			if !(p >= 0) || math.IsInf(p, 0) {
				return opError(where, "p %v: want finite values >= 0", probs)
			}
			total += p
		}
		if !(total > 0) {
			return opError(where, "p %v: want a positive sum", probs)
		}
		n.cum = make([]float64, len(probs))
		var acc float64
		for i, p := range probs {
			acc += p
			n.cum[i] = acc / total
		}
	}
	n.kids = make([]node, len(op.Ops))
	n.maxSteps = 0
	for i := range op.Ops {
		kid, err := c.compile(&op.Ops[i], i, n.stream*64+uint64(i)+1, depth+1, append(path, fmt.Sprintf("op %d (%s)", pos, op.Kind))...)
		if err != nil {
			return err
		}
		n.kids[i] = kid
		if op.Kind == OpRandomChoice {
			n.maxSteps = max(n.maxSteps, kid.maxSteps)
		} else {
			n.maxSteps += kid.maxSteps
		}
	}
	return nil
}
