package pipeline

// The names of the rooms' internals the root's files and tests use: the
// op table's (pipeline/ops) and the Transform's (pipeline/transform),
// exported there for the root alone and named here as they were before
// the rooms were carved, unexported.

import (
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// The op table's internals (pipeline/ops: its registry, schema, compiler
// and their parts).
type (
	compileAt = ops.CompileAt
	compiler  = ops.Compiler
	drawer    = ops.Drawer
	node      = ops.Node
	opDef     = ops.Def
	opScratch = ops.Scratch
	param     = ops.Param
)

var (
	checkFill      = ops.CheckFill
	checkNormalize = ops.CheckNormalize
	checkProb      = ops.CheckProb
	checkSanitize  = ops.CheckSanitize
	defineOp       = ops.Define
	drawApplied    = ops.DrawApplied
	formatNone     = ops.FormatNone
	formatP        = ops.FormatP
	grows          = ops.Grows
	lookupOp       = ops.Lookup
	opError        = ops.OpError
	opKinds        = ops.Kinds
	opsString      = ops.OpsString
	pParam         = ops.PParam
	roleOf         = ops.RoleOf
	stepNs         = ops.StepNs
	truncKind      = ops.TruncKind
	errAbandoned   = ops.ErrAbandoned
	opDefs         = ops.Defs
)

const (
	maxOps           = ops.MaxOps
	maxSide          = ops.MaxSide
	pBool            = ops.PBool
	pFill            = ops.PFill
	pFillBy          = ops.PFillBy
	pFloat           = ops.PFloat
	pFloats          = ops.PFloats
	pInt             = ops.PInt
	pInterp          = ops.PInterp
	pInts            = ops.PInts
	pRange           = ops.PRange
	pSize            = ops.PSize
	pString          = ops.PString
	targetsContainer = ops.TargetsContainer
	targetsInstances = ops.TargetsInstances
	targetsMove      = ops.TargetsMove
	targetsPixels    = ops.TargetsPixels
)

// The Transform's and its plan's names the decoder uses
// (pipeline/transform).
type (
	mosaicDraw = transform.MosaicDraw
	multiDraw  = transform.MultiDraw
	samplePlan = transform.SamplePlan
)

var (
	centerOffset        = transform.CenterOffset
	copyPasteKey        = transform.CopyPasteKey
	copyPasteMixPartner = transform.CopyPasteMixPartner
	cutKey              = transform.CutKey
	drawYOLOPersp       = transform.DrawYOLOPersp
	expandBound         = transform.ExpandBound
	maxIoU              = transform.MaxIoU
	mixKey              = transform.MixKey
	padCorner           = transform.PadCorner
	resizeSize          = transform.ResizeSize
	resizedSize         = transform.ResizedSize
	rrcParams           = transform.RRCParams
)

const (
	canvasNs        = transform.CanvasNs
	canvasOutNs     = transform.CanvasOutNs
	canvasTapNs     = transform.CanvasTapNs
	cropResize      = transform.CropResize
	decodeNs        = transform.DecodeNs
	jitterOutNs     = transform.JitterOutNs
	maxJitter       = transform.MaxJitter
	maxStepJSON     = transform.MaxStepJSON
	nominalSourcePx = transform.NominalSourcePx
	resampleNs      = transform.ResampleNs
	resizeCrop      = transform.ResizeCrop
	sampleNs        = transform.SampleNs
	sizeTrailer     = transform.SizeTrailer
	streamCrop      = transform.StreamCrop
)
