package pipeline

// The pipeline's names for its rooms' types: the sentinel errors
// (pipeline/internal/errs), the sample's key and generator
// (pipeline/internal/det), a batch's stage times (pipeline/batch), the
// partner cache (pipeline/kernels/cv), the decoder index
// (pipeline/codec/index), the coefficient cache (pipeline/codec) and a
// sample's targets (pipeline/targets).

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/stoker-dev/stoker/pipeline/batch"
	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/codec/index"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/internal/det"
	"github.com/stoker-dev/stoker/pipeline/internal/errs"
	"github.com/stoker-dev/stoker/pipeline/kernels/cv"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/targets"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// Sentinel errors. Every error this package returns for bad input wraps one
// of them (test with errors.Is); the server maps them to status codes.
// They are pipeline/internal/errs' sentinels, which the pipeline's rooms
// (pipeline/dataset among them) wrap too: the same values.
var (
	// ErrCorrupt: the file is not a decodable image (truncated, corrupt,
	// zero bytes, not an image at all).
	ErrCorrupt = errs.Corrupt
	// ErrTooLarge: the file or the image it declares is over a limit (file
	// size cap, pixel budget, progressive scan cap).
	ErrTooLarge = errs.TooLarge
	// ErrUnsupported: a valid file or request this package does not handle
	// (an unknown format, an op in an order it cannot fuse, a bad parameter).
	ErrUnsupported = errs.Unsupported
)

// Key names one sample of one epoch of one job. Everything random about the
// sample is a pure function of its Key (det.Key: the keyed generator lives
// with the rest of the deterministic maths, in pipeline/internal/det).
type Key = det.Key

// RNG is a counter-based generator: value n of stream s is a hash of (key,
// s, n), the same on any machine and in any order of evaluation (det.RNG).
type RNG = det.RNG

// Permutation is a keyed pseudorandom bijection of [0, n) and its inverse
// (det.Permutation): the global shuffle's epoch order is
// EpochPermutation's, and a Mosaic draws its partners from a window of it.
type Permutation = det.Permutation

// NewPermutation is a permutation of [0, n), n > 0, keyed by r's next
// values.
func NewPermutation(n uint64, r RNG) Permutation { return det.NewPermutation(n, r) }

// PartnerCache holds a node's load_image'd images (a Mosaic's), shared by
// its Executor's decoders, within a budget of bytes (cv.PartnerCache).
type PartnerCache = cv.PartnerCache

// PartnerStats is what a PartnerCache holds and has done.
type PartnerStats = cv.PartnerStats

// NewPartnerCache returns an empty PartnerCache that holds at most budget
// bytes.
func NewPartnerCache(budget int64) *PartnerCache { return cv.NewPartnerCache(budget) }

// WithPartnerCache has a Decoder (an Executor's decoders) keep the
// images a Mosaic load_image's in c and take them from it. Default: none
// (every image of every mosaic decoded).
func WithPartnerCache(c *PartnerCache) Option { return func(o *options) { o.partners = c } }

// EpochPermutation is the global shuffle's order of epoch of a dataset of
// n samples, keyed by (seed, epoch, n).
func EpochPermutation(n, seed, epoch uint64) Permutation { return det.EpochPermutation(n, seed, epoch) }

// StageTimes is where the time of making one batch went (batch.StageTimes):
// each stage's time summed over the batch's samples, and the batch's own
// wall time. An Executor that times its stages (WithStageObserver) fills a
// Batch's Times; a batch made without timing has zero Times.
type StageTimes = batch.StageTimes

// Index is the decoder index of baseline JPEGs (index.Index, in
// pipeline/codec/index): entropy-decoder checkpoints per file, within a
// budget of bytes, saved to and loaded from index files.
type Index = index.Index

// IndexStats is what an Index holds and has done.
type IndexStats = index.Stats

// NewIndex returns an empty Index that holds at most budget bytes.
func NewIndex(budget int64) *Index { return index.New(budget) }

// ErrIndexFile is wrapped by the errors Index.Load returns for an index
// file that is not used: corrupt, truncated, too large, of another version
// or of other data.
var ErrIndexFile = index.ErrFile

// WithIndex has a Decoder (an Executor's decoders) use and extend ix.
// Default: none (every decode is a first decode).
func WithIndex(ix *Index) Option { return func(o *options) { o.index = ix } }

// IndexFingerprint is what an index file of the given datasets is tagged
// with (Save, Load) and named by (IndexPath): a hash of their fingerprints,
// in any order. A server with the same data, under any names, finds the
// same file.
func IndexFingerprint(datasets ...Dataset) string {
	fps := make([]string, len(datasets))
	for i, ds := range datasets {
		fps[i] = ds.Fingerprint()
	}
	slices.Sort(fps)
	h := sha256.New()
	for _, fp := range fps {
		h.Write([]byte(fp))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// IndexPath is the index file of the data with fingerprint fp
// (IndexFingerprint) in dir.
func IndexPath(dir, fp string) string { return index.Path(dir, fp) }

// CoefCache keeps baseline JPEGs' quantized DCT coefficients, and
// progressive JPEGs' sequential transcodes, for later crops of the same
// files, within a budget of bytes (codec.CoefCache).
type CoefCache = codec.CoefCache

// CoefStats is what a CoefCache holds and has done.
type CoefStats = codec.CoefStats

// NewCoefCache returns an empty CoefCache that holds at most budget bytes.
func NewCoefCache(budget int64) *CoefCache { return codec.NewCoefCache(budget) }

// WithCoefCache has a Decoder (an Executor's decoders) use and fill c.
// Default: none.
func WithCoefCache(c *CoefCache) Option { return func(o *options) { o.coefs = c } }

// Targets are one sample's instances (boxes XYXY, labels, crowd flags,
// keypoints, masks) on a canvas of W x H: pipeline/targets' type, whose
// kernels move them; the op registry says which kernel a step calls
// (MoveTargets, MoveBoxes, MoveKeypoints).
type Targets = targets.Targets

// BoxFormat is a box format of torchvision's tv_tensors.BoundingBoxFormat
// (targets.BoxFormat): its value is the targets' header field
// (AppendTargets).
type BoxFormat = targets.BoxFormat

// The formats: corners; corner and size; centre and size.
const (
	BoxXYXY   = targets.BoxXYXY
	BoxXYWH   = targets.BoxXYWH
	BoxCXCYWH = targets.BoxCXCYWH
)

// ParseBoxFormat parses "XYXY", "XYWH" or "CXCYWH" (any case, as
// torchvision's BoundingBoxFormat[name.upper()]).
func ParseBoxFormat(s string) (BoxFormat, error) { return targets.ParseBoxFormat(s) }

// AppendTargets appends t's encoding (targets.AppendTargets gives the
// layout; docs/detection.md too).
func AppendTargets(b []byte, t *Targets) []byte { return targets.AppendTargets(b, t) }

// OverlapRatio is the overlap mask's downsample: ultralytics' Format's
// mask_ratio default (4).
const OverlapRatio = targets.OverlapRatio

// TargetsSize is the bytes AppendTargets writes for k instances of p
// keypoints each.
func TargetsSize(k, p int) int64 { return targets.TargetsSize(k, p) }

// OverlapMaskSize is the bytes of the overlap mask of k instances on a w x
// h canvas after the targets (targets.OverlapMaskSize).
func OverlapMaskSize(w, h, k int) int64 { return targets.OverlapMaskSize(w, h, k) }

// The functional ops (pipeline/fn, torchvision.transforms.v2.functional):
// a step's Fn and its drawn arguments. fn defines them; these are the
// pipeline's names for them, as its callers (server, the trace, the
// parity tests) know them.
type (
	// Fn names a functional op (fn.Fn).
	Fn = fn.Fn
	// Step is one functional op applied to one sample with its drawn
	// arguments (fn.Step).
	Step = fn.Step
)

// FnNone is no op: a step that does nothing.
const FnNone = fn.None

// The functional ops, by torchvision's functional name (fn's).
var (
	FnGaussianBlur      = fn.GaussianBlur
	FnSanitizeBoxes     = fn.SanitizeBoxes
	FnConvertBoxFormat  = fn.ConvertBoxFormat
	FnClampBoxes        = fn.ClampBoxes
	FnClampKeypoints    = fn.ClampKeypoints
	FnSanitizeKeypoints = fn.SanitizeKeypoints
	FnAdjustBrightness  = fn.AdjustBrightness
	FnAdjustContrast    = fn.AdjustContrast
	FnAdjustSaturation  = fn.AdjustSaturation
	FnAdjustHue         = fn.AdjustHue
	FnRGBToGrayscale    = fn.RGBToGrayscale
	FnPermuteChannels   = fn.PermuteChannels
	FnErase             = fn.Erase
	FnHorizontalFlip    = fn.HorizontalFlip
	FnVerticalFlip      = fn.VerticalFlip
	FnResizedCrop       = fn.ResizedCrop
	FnResize            = fn.Resize
	FnCenterCrop        = fn.CenterCrop
	FnPad               = fn.Pad
	FnCrop              = fn.Crop
	FnIoUCrop           = fn.IoUCrop
	FnFixedSizeCrop     = fn.FixedSizeCrop
	FnNormalize         = fn.Normalize
	FnAdjustSharpness   = fn.AdjustSharpness
	FnSolarize          = fn.Solarize
	FnPosterize         = fn.Posterize
	FnInvert            = fn.Invert
	FnEqualize          = fn.Equalize
	FnAutocontrast      = fn.Autocontrast
	FnSolarizeAdd       = fn.SolarizeAdd
	FnMixBegin          = fn.MixBegin
	FnMixChain          = fn.MixChain
	FnMixEnd            = fn.MixEnd
	FnMixBlend          = fn.MixBlend
	FnMixFold           = fn.MixFold
	FnRotate            = fn.Rotate
	FnAffine            = fn.Affine
	FnPerspective       = fn.Perspective
	FnYOLOLoad          = fn.YOLOLoad
	FnYOLOLetterBox     = fn.YOLOLetterBox
	FnYOLOPerspective   = fn.YOLOPerspective
	FnYOLOHSV           = fn.YOLOHSV
	FnYOLOFlipLR        = fn.YOLOFlipLR
	FnYOLOFlipUD        = fn.YOLOFlipUD
)

// OpKind names an op, with torchvision.transforms.v2's name and semantics
// (ops.OpKind).
type OpKind = ops.OpKind

// Op is one step of a transform, with torchvision's arguments (ops.Op:
// its doc says which kind reads which field).
type Op = ops.Op

// OpSchema is one op's schema (ops.OpSchema): its kind, doc and
// torchvision's arguments.
type OpSchema = ops.OpSchema

// ParamSchema is one argument of an op's schema (ops.ParamSchema).
type ParamSchema = ops.ParamSchema

// The ops of the op table's families (pipeline/ops: blur, boxes, channel
// permutation, color, containers, erase, flip, normalize, point ops,
// policies); the geometry's families (op_*.go) define theirs here.
const (
	OpGaussianBlur             = ops.OpGaussianBlur
	OpSanitizeBoundingBoxes    = ops.OpSanitizeBoundingBoxes
	OpConvertBoundingBoxFormat = ops.OpConvertBoundingBoxFormat
	OpClampBoundingBoxes       = ops.OpClampBoundingBoxes
	OpClampKeyPoints           = ops.OpClampKeyPoints
	OpSanitizeKeyPoints        = ops.OpSanitizeKeyPoints
	OpRandomChannelPermutation = ops.OpRandomChannelPermutation
	OpColorJitter              = ops.OpColorJitter
	OpGrayscale                = ops.OpGrayscale
	OpRandomGrayscale          = ops.OpRandomGrayscale
	OpRandomPhotometricDistort = ops.OpRandomPhotometricDistort
	OpRandomApply              = ops.OpRandomApply
	OpRandomChoice             = ops.OpRandomChoice
	OpRandomOrder              = ops.OpRandomOrder
	OpRandomErasing            = ops.OpRandomErasing
	OpRandomHorizontalFlip     = ops.OpRandomHorizontalFlip
	OpRandomVerticalFlip       = ops.OpRandomVerticalFlip
	OpNormalize                = ops.OpNormalize
	OpRandomSolarize           = ops.OpRandomSolarize
	OpRandomPosterize          = ops.OpRandomPosterize
	OpRandomInvert             = ops.OpRandomInvert
	OpRandomEqualize           = ops.OpRandomEqualize
	OpRandomAutocontrast       = ops.OpRandomAutocontrast
	OpRandomAdjustSharpness    = ops.OpRandomAdjustSharpness
	OpTrivialAugmentWide       = ops.OpTrivialAugmentWide
	OpRandAugment              = ops.OpRandAugment
	OpAutoAugment              = ops.OpAutoAugment
	OpAugMix                   = ops.OpAugMix
	OpTimmRandAugment          = ops.OpTimmRandAugment
	OpTimmAutoAugment          = ops.OpTimmAutoAugment
	OpTimmAugMix               = ops.OpTimmAugMix
)

// MaxNesting is how deep a transform's containers (RandomApply,
// RandomChoice, RandomOrder) may nest inside one another (ops.MaxNesting).
const MaxNesting = ops.MaxNesting

// MaxEraseCount bounds RandomErasing's count (ops.MaxEraseCount).
const MaxEraseCount = ops.MaxEraseCount

// ColorJitterOp is ColorJitter(brightness, contrast, saturation, hue) in
// torchvision's single-number form.
func ColorJitterOp(brightness, contrast, saturation, hue float64) Op {
	return ops.ColorJitterOp(brightness, contrast, saturation, hue)
}

// OpSchemas are the registered ops' schemas, by name (ops.OpSchemas: the
// op table's families and the geometry's).
func OpSchemas() []OpSchema { return ops.OpSchemas() }

// NamedOp is the op kind with args, the others at their defaults: a
// NamedOp from the wire (ops.NamedOp).
func NamedOp(kind string, args map[string]any) (Op, error) { return ops.NamedOp(kind, args) }

// ApplyTrace runs a trace's steps after the geometry on pix, a w x h
// image as three planes (CHW, uint8), in place (ops.ApplyTrace).
func ApplyTrace(pix []byte, w, h int, steps []Step) error { return ops.ApplyTrace(pix, w, h, steps) }

// ApplyTraceSized is ApplyTrace with steps that may change the size
// (rotate's expand): it returns the image after them and its size
// (ops.ApplyTraceSized).
func ApplyTraceSized(pix []byte, w, h int, steps []Step) ([]byte, int, int, error) {
	return ops.ApplyTraceSized(pix, w, h, steps)
}

// The Transform (pipeline/transform: the compiled transform, its
// geometry's ops and plan, views, presets, the cost model and the
// targets' checks), under the names the pipeline has always given them.
type (
	Cost          = transform.Cost
	DecodeMode    = transform.DecodeMode
	Instances     = transform.Instances
	Interpolation = transform.Interpolation
	Layout        = transform.Layout
	TargetCost    = transform.TargetCost
	Targeted      = transform.Targeted
	Transform     = transform.Transform
	ViewGroup     = transform.ViewGroup
	ViewLayout    = transform.ViewLayout
)

// The Transform's constants: layouts, decode modes, interpolations, the
// geometry's op kinds, bounds.
const (
	CHW                     = transform.CHW
	DecodeExact             = transform.DecodeExact
	DecodeFast              = transform.DecodeFast
	DefaultMaxSampleCPU     = transform.DefaultMaxSampleCPU
	FieldTargets            = transform.FieldTargets
	HWC                     = transform.HWC
	InterpBicubic           = transform.InterpBicubic
	InterpBilinear          = transform.InterpBilinear
	InterpNearest           = transform.InterpNearest
	MaxViews                = transform.MaxViews
	OpCenterCrop            = transform.OpCenterCrop
	OpCopyPaste             = transform.OpCopyPaste
	OpCutMix                = transform.OpCutMix
	OpFixedSizeCrop         = transform.OpFixedSizeCrop
	OpMixUp                 = transform.OpMixUp
	OpMosaic                = transform.OpMosaic
	OpPad                   = transform.OpPad
	OpPadIfSmaller          = transform.OpPadIfSmaller
	OpRandomAffine          = transform.OpRandomAffine
	OpRandomCrop            = transform.OpRandomCrop
	OpRandomIoUCrop         = transform.OpRandomIoUCrop
	OpRandomPerspective     = transform.OpRandomPerspective
	OpRandomResize          = transform.OpRandomResize
	OpRandomResizedCrop     = transform.OpRandomResizedCrop
	OpRandomRotation        = transform.OpRandomRotation
	OpRandomShortestSize    = transform.OpRandomShortestSize
	OpRandomZoomOut         = transform.OpRandomZoomOut
	OpResize                = transform.OpResize
	OpScaleJitter           = transform.OpScaleJitter
	OpYOLOLetterBox         = transform.OpYOLOLetterBox
	OpYOLOLoadImage         = transform.OpYOLOLoadImage
	OpYOLORandomFlip        = transform.OpYOLORandomFlip
	OpYOLORandomHSV         = transform.OpYOLORandomHSV
	OpYOLORandomPerspective = transform.OpYOLORandomPerspective
)

// The DETR family's and YOLO's stop_epoch op lists
// (transform.DETRStopOps, transform.YOLOStopOps).
var (
	DETRStopOps = transform.DETRStopOps
	YOLOStopOps = transform.YOLOStopOps
)

// AppendTrace is transform.AppendTrace.
func AppendTrace(b []byte, steps []fn.Step) []byte { return transform.AppendTrace(b, steps) }

// CheckMasks is transform.CheckMasks.
func CheckMasks(t *Transform) error { return transform.CheckMasks(t) }

// CheckOverlapMask is transform.CheckOverlapMask.
func CheckOverlapMask(t *Transform, ds dataset.Dataset) error {
	return transform.CheckOverlapMask(t, ds)
}

// CheckTargets is transform.CheckTargets.
func CheckTargets(t *Transform) error { return transform.CheckTargets(t) }

// LayoutOf is transform.LayoutOf.
func LayoutOf(sizes ...int) ViewLayout { return transform.LayoutOf(sizes...) }

// MoveBoxes is transform.MoveBoxes.
func MoveBoxes(boxes [][4]float32, w int, h int, steps []fn.Step) (int, int, error) {
	return transform.MoveBoxes(boxes, w, h, steps)
}

// MoveKeypoints is transform.MoveKeypoints.
func MoveKeypoints(pts [][2]float32, w int, h int, steps []fn.Step) (int, int, error) {
	return transform.MoveKeypoints(pts, w, h, steps)
}

// MoveTargets is transform.MoveTargets.
func MoveTargets(t *targets.Targets, w int, h int, steps []fn.Step) (int, int, error) {
	return transform.MoveTargets(t, w, h, steps)
}

// NeedsTargets is transform.NeedsTargets.
func NeedsTargets(t *Transform) string { return transform.NeedsTargets(t) }

// NewTransform is transform.NewTransform.
func NewTransform(layout Layout, ops ...Op) (*Transform, error) {
	return transform.NewTransform(layout, ops...)
}

// NewTransformBound is transform.NewTransformBound.
func NewTransformBound(layout Layout, bound [2]int, ops ...Op) (*Transform, error) {
	return transform.NewTransformBound(layout, bound, ops...)
}

// NewTransformData is transform.NewTransformData.
func NewTransformData(layout Layout, w, h int, ops ...Op) (*Transform, error) {
	return transform.NewTransformData(layout, w, h, ops...)
}

// NewViews is transform.NewViews.
func NewViews(layout Layout, groups ...ViewGroup) (*Transform, error) {
	return transform.NewViews(layout, groups...)
}

// OneView is transform.OneView.
func OneView(size int) ViewLayout { return transform.OneView(size) }

// ParseDecodeMode is transform.ParseDecodeMode.
func ParseDecodeMode(s string) (DecodeMode, error) { return transform.ParseDecodeMode(s) }

// ParseInterpolation is transform.ParseInterpolation.
func ParseInterpolation(s string) (Interpolation, error) { return transform.ParseInterpolation(s) }

// ParseTrace is transform.ParseTrace.
func ParseTrace(data []byte) ([]fn.Step, error) { return transform.ParseTrace(data) }

// ParseTransform is transform.ParseTransform.
func ParseTransform(preset string, layout Layout) (*Transform, error) {
	return transform.ParseTransform(preset, layout)
}

// Preset is transform.Preset.
func Preset(name string) ([]Op, error) { return transform.Preset(name) }

// PresetNames is transform.PresetNames.
func PresetNames() []string { return transform.PresetNames() }

// TargetCostOf is what the targets of a job with field set fs on ds add
// to t's samples (transform.TargetCostOf).
func TargetCostOf(t *Transform, ds dataset.Dataset, fs *FieldSet) TargetCost {
	return transform.TargetCostOf(t, ds, fs)
}

// TargetKeypoints is transform.TargetKeypoints.
func TargetKeypoints(ds dataset.Dataset) int { return transform.TargetKeypoints(ds) }

// ViewPreset is transform.ViewPreset.
func ViewPreset(name string) ([]ViewGroup, bool) { return transform.ViewPreset(name) }
