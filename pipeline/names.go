package pipeline

// The names of the rooms' internals the root's files and tests use: the
// op table's (pipeline/ops) and the Transform's (pipeline/transform),
// exported there for the root alone and named here as they were before
// the rooms were carved, unexported.

import (
	"github.com/stoker-dev/stoker/pipeline/internal/samplerkey"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
)

// The op table's internals (pipeline/ops: its registry, schema, compiler
// and their parts).
type (
	compiler  = ops.Compiler
	drawer    = ops.Drawer
	node      = ops.Node
	opScratch = ops.Scratch
)

var (
	grows        = ops.Grows
	opsString    = ops.OpsString
	errAbandoned = ops.ErrAbandoned
)

const (
	maxSide = ops.MaxSide
)

// sk opens a Transform's side for the Decoder, t.Sampler(sk): its plan,
// draws and compiled nodes, which only the root reads (TestArrows lets
// only the root, pipeline/transform and the tests' testops import
// pipeline/internal/samplerkey).
var sk samplerkey.Key

// The Transform's and its plan's names the decoder uses
// (pipeline/transform).
type (
	mosaicDraw = transform.MosaicDraw
	multiDraw  = transform.MultiDraw
	samplePlan = transform.SamplePlan
)

var (
	centerOffset        = transform.CenterOffset
	copyPasteMixPartner = transform.CopyPasteMixPartner
	cutKey              = transform.CutKey
	drawYOLOPersp       = transform.DrawYOLOPersp
	mixKey              = transform.MixKey
	padCorner           = transform.PadCorner
	resizeSize          = transform.ResizeSize
	resizedSize         = transform.ResizedSize
)

const (
	cropResize  = transform.CropResize
	maxJitter   = transform.MaxJitter
	resizeCrop  = transform.ResizeCrop
	sizeTrailer = transform.SizeTrailer
)
