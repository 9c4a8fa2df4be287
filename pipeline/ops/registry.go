package ops

// The op registry. Every op (a torchvision.transforms.v2 class: Def) is
// defined once, in its family's file (here, or for the geometry's
// families pipeline/transform's op_*.go, which register with Define): its schema (its
// arguments, their defaults and bounds), how it is checked and compiled,
// what it draws, its String and its worst cost. Every functional op (a
// torchvision.transforms.v2.functional kernel: fn.Def) is defined once,
// in its family's file of pipeline/fn, the room below: the kernel its
// steps call and how they move a job's targets, its trace entry, its
// checks and its cost. Everything else reads these tables: the compiler
// (Compile), the draw (Node.Draw), the kernels' call (fn.Apply), a trace's checks and parse (fn.Check, ParseTrace), the
// targets (MoveBoxes, MoveKeypoints, MoveTargets, the masks: their
// kernels are pipeline/targets'), the cost
// model, String, stop_epoch, the wire's named ops (internal/opspec), the
// reference (`stoker ops list`, docs/reference.md) and the Python client's
// classes (python/stoker/_ops_generated.py, generated from OpSchemas, and
// a test that holds the hand-written ones to it). Adding an op is one
// family file here, its functional op's in pipeline/fn, its kernel and
// its tests.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
)

// Def is one op: torchvision.transforms.v2's class, its schema and
// every part of stoker that knows it.
type Def struct {
	Kind OpKind
	// Doc is one line for the reference (docs/reference.md, `stoker ops
	// list`) and the generated Python class.
	Doc string
	// Params is its schema: torchvision's arguments, in its order, with
	// their defaults (python/stoker's classes take the same; a test holds
	// them to it).
	Params []Param
	// FromArgs makes the op from its arguments (a NamedOp's, checked
	// against Params' types), recording what is wrong in a (Args.Errorf);
	// nil: each param sets its field (Param.At).
	FromArgs func(a *Args) Op
	// Named: its Python class is generated from Params (no hand-written
	// one). Every op travels on the wire as a NamedOp.
	Named bool
	// Geometry: fused into the decode, placed by NewTransform (its place
	// there is its family's placer's rule); Misplaced says why it cannot
	// stand after other ops.
	Geometry  bool
	Misplaced string
	// Targets is what it does to a job's targets; needsTargets: refused in
	// a job without them; anyFormat: it may follow a
	// ConvertBoundingBoxFormat (it acts on boxes in their format, or on
	// pixels alone); stays: stop_epoch may not switch it off (it fixes
	// the batch's size or type).
	Targets      targetRole
	NeedsTargets bool
	// NeedsKeypoints: it acts on the instances' keypoints, so a job whose
	// dataset says its instances have none is refused at open (every
	// sample would fail, as torchvision's fails on a sample without a
	// KeyPoints).
	NeedsKeypoints bool
	AnyFormat      bool
	Stays          bool
	// Kids is how a container runs the ops it holds: in order (the
	// default; RandomApply), one of them (RandomChoice), or each in any
	// order (RandomOrder): what may follow what inside it.
	Kids KidsOrder
	// OneSize: Compile fixes it for the sample's one size (a policy's
	// magnitudes), so it cannot follow a geometry of per-sample sizes
	// (NewTransform refuses it there, in containers too). GaussianBlur is
	// not: its kernel runs on the size it gets, and a sample too small for
	// it fails alone.
	OneSize bool
	// Compile checks its arguments beyond the schema and precomputes its
	// node (nil: nothing to check); step, for an op whose only draw is
	// whether it applies, is the step it emits (node.step).
	Compile func(c *Compiler, n *Node, at CompileAt) error
	Step    func(op *Op) fn.Step
	// Grow: whether the op grows the image past the geometry's size (a
	// RandomRotation with expand=True) and, if it does, the most it makes
	// of a w x h image (gw x gh); afterGrow compiles a geometry op that
	// follows such an op at the top level, as a step after the decode
	// (Resize, CenterCrop: fixSize).
	Grow      func(op *Op, w, h int) (gw, gh int, grows bool)
	AfterGrow func(op *Op, stream uint64, where string) (Node, error)
	// Draw appends one sample's steps, torchvision's make_params and
	// transform (nil: a geometry op, drawn by the sample's plan).
	Draw func(n *Node, r *det.RNG, d *Drawer)
	// Format writes String's arguments after the kind (nil: "(p=P)").
	Format func(b *strings.Builder, op *Op)
	// MaxNs is the most its steps may cost on a w x h image (nil: its
	// step's cost).
	MaxNs func(n *Node, w, h int) float64
	// Masks refuses an op whose targets' masks cannot follow (nil: they
	// follow it, or it is not a geometric op).
	Masks func(op *Op) error
	// Keeps is what its kernels keep of a worker's scratch (nil:
	// nothing): the transform bounds a worker's scratch by what its ops
	// keep, each kind of buffer once (transform.KernelScratch).
	Keeps func(op *Op) Keeps
}

// Keeps is the buffers an op's kernels keep in a worker's scratch, reused
// by the next step that keeps the same: Warp, a rotation's, an affine's
// or a perspective's copy of the image and its RGBX source; Mix, AugMix's
// original, running blend and accumulator; Sharp, the sharpness kernel's
// two rows; Erase, RandomErasing's noise tables; Blur, GaussianBlur's
// planes and sums, for kernels of BlurSide at most.
type Keeps struct {
	Warp, Mix, Sharp, Erase, Blur bool
	BlurSide                      int
}

// Or is what k and o keep together.
func (k Keeps) Or(o Keeps) Keeps {
	return Keeps{Warp: k.Warp || o.Warp, Mix: k.Mix || o.Mix, Sharp: k.Sharp || o.Sharp, Erase: k.Erase || o.Erase,
		Blur: k.Blur || o.Blur, BlurSide: max(k.BlurSide, o.BlurSide)}
}

// CompileAt is where an op being compiled stands: where names it in
// errors (its position through its containers); depth, path and pos are
// a container's, for its ops.
type CompileAt struct {
	Where string
	depth int
	pos   int
	path  []string
}

var Defs = map[OpKind]*Def{}

// Define registers an op; family files call it from init.
func Define(d Def) {
	if _, dup := Defs[d.Kind]; dup {
		panic("pipeline: op defined twice: " + string(d.Kind))
	}
	Defs[d.Kind] = &d
}

// Lookup is k's definition, nil for an unknown kind.
func Lookup(k OpKind) *Def { return Defs[k] }

// Kinds are the registered kinds, sorted.
func Kinds() []OpKind {
	ks := make([]OpKind, 0, len(Defs))
	for k := range Defs {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// RoleOf is what op does to targets: a container's is its ops'.
func RoleOf(k OpKind) targetRole {
	if d := Lookup(k); d != nil {
		return d.Targets
	}
	return targetsRefused
}

// errUnknownOp is an unknown kind's error.
func errUnknownOp(k OpKind) error {
	return fmt.Errorf("%w: unknown op %q", errs.Unsupported, TruncKind(k))
}

// targetRole says what an op does to a job's targets: its functional
// ops' role (fn.TargetRole), a container's its ops'.
type targetRole = fn.TargetRole

const (
	targetsRefused   = fn.TargetsRefused
	TargetsPixels    = fn.TargetsPixels
	TargetsMove      = fn.TargetsMove
	TargetsInstances = fn.TargetsInstances
	TargetsContainer = fn.TargetsContainer
)

// MaxSide is the longest side of an image the ops make (fn.MaxSide).
const MaxSide = fn.MaxSide

// TruncKind is k shortened for a message (a client's string).
func TruncKind(k OpKind) string {
	if len(k) > 64 {
		return string(k[:64]) + "…"
	}
	return string(k)
}
