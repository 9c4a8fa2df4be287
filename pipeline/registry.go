package pipeline

// The op registry. Every op (a torchvision.transforms.v2 class: opDef) is
// defined once, in its family's file (op_*.go): its schema (its
// arguments, their defaults and bounds), how it is checked and compiled,
// what it draws, its String and its worst cost. Every functional op (a
// torchvision.transforms.v2.functional kernel: fn.Def) is defined once,
// in its family's file of pipeline/fn, the room below: the kernel its
// steps call and how they move a job's targets, its trace entry, its
// checks and its cost. Everything else reads these tables: the compiler
// (compile), the draw (node.draw), the kernels' call (fn.Apply), a trace's checks and parse (fn.Check, ParseTrace), the
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

	"github.com/stoker-dev/stoker/pipeline/fn"
)

// opDef is one op: torchvision.transforms.v2's class, its schema and
// every part of stoker that knows it.
type opDef struct {
	kind OpKind
	// doc is one line for the reference (docs/reference.md, `stoker ops
	// list`) and the generated Python class.
	doc string
	// params is its schema: torchvision's arguments, in its order, with
	// their defaults (python/stoker's classes take the same; a test holds
	// them to it).
	params []param
	// named: it travels on the wire as a NamedOp (its name and params),
	// having no message of its own, and its Python class is generated.
	named bool
	// geometry: fused into the decode, parsed by NewTransform (its place
	// there is the geometry's grammar); misplaced says why it cannot stand
	// after other ops.
	geometry  bool
	misplaced string
	// targets is what it does to a job's targets; needsTargets: refused in
	// a job without them; anyFormat: it may follow a
	// ConvertBoundingBoxFormat (it acts on boxes in their format, or on
	// pixels alone); stays: stop_epoch may not switch it off (it fixes
	// the batch's size or type).
	targets      targetRole
	needsTargets bool
	anyFormat    bool
	stays        bool
	// compile checks its arguments beyond the schema and precomputes its
	// node (nil: nothing to check); step, for an op whose only draw is
	// whether it applies, is the step it emits (node.step).
	compile func(c *compiler, n *node, at compileAt) error
	step    func(op *Op) Step
	// grows: the op grows the image past the geometry's size (a
	// RandomRotation with expand=True); afterGrow compiles a geometry op
	// that follows such an op at the top level, as a step after the
	// decode (Resize, CenterCrop: fixSize).
	grows     func(op *Op) bool
	afterGrow func(op *Op, stream uint64, where string) (node, error)
	// draw appends one sample's steps, torchvision's make_params and
	// transform (nil: a geometry op, drawn by the sample's plan).
	draw func(n *node, r *RNG, d *drawer)
	// format writes String's arguments after the kind (nil: "(p=P)").
	format func(b *strings.Builder, op *Op)
	// maxNs is the most its steps may cost on a w x h image (nil: its
	// step's cost).
	maxNs func(n *node, w, h int) float64
	// masks refuses an op whose targets' masks cannot follow (nil: they
	// follow it, or it is not a geometric op).
	masks func(op *Op) error
}

// compileAt is where an op being compiled stands: where names it in
// errors (its position through its containers); depth, path and pos are
// a container's, for its ops.
type compileAt struct {
	where string
	depth int
	pos   int
	path  []string
}

var opDefs = map[OpKind]*opDef{}

// defineOp registers an op; family files call it from init.
func defineOp(d opDef) {
	if _, dup := opDefs[d.kind]; dup {
		panic("pipeline: op defined twice: " + string(d.kind))
	}
	opDefs[d.kind] = &d
}

// lookupOp is k's definition, nil for an unknown kind.
func lookupOp(k OpKind) *opDef { return opDefs[k] }

// opKinds are the registered kinds, sorted.
func opKinds() []OpKind {
	ks := make([]OpKind, 0, len(opDefs))
	for k := range opDefs {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// roleOf is what op does to targets: a container's is its ops'.
func roleOf(k OpKind) targetRole {
	if d := lookupOp(k); d != nil {
		return d.targets
	}
	return targetsRefused
}

// errUnknownOp is an unknown kind's error.
func errUnknownOp(k OpKind) error {
	return fmt.Errorf("%w: unknown op %q", ErrUnsupported, truncKind(k))
}

// targetRole says what an op does to a job's targets: its functional
// ops' role (fn.TargetRole), a container's its ops'.
type targetRole = fn.TargetRole

const (
	targetsRefused   = fn.TargetsRefused
	targetsPixels    = fn.TargetsPixels
	targetsMove      = fn.TargetsMove
	targetsInstances = fn.TargetsInstances
	targetsContainer = fn.TargetsContainer
)

// maxSide is the longest side of an image the ops make (fn.MaxSide).
const maxSide = fn.MaxSide

// truncKind is k shortened for a message (a client's string).
func truncKind(k OpKind) string {
	if len(k) > 64 {
		return string(k[:64]) + "…"
	}
	return string(k)
}
