package pipeline

// The op registry. Every op (a torchvision.transforms.v2 class: opDef) and
// every functional op (a torchvision.transforms.v2.functional kernel:
// fnDef) is defined once, in its family's file (op_*.go): its schema (its
// arguments, their defaults and bounds), how it is checked and compiled,
// what it draws, the kernel its steps call and how they move a job's
// targets, its trace entry and its cost. Everything else reads these
// tables: the compiler (compile), the draw (node.draw), the kernels' call
// (applyStep), a trace's checks and parse (checkStep, ParseTrace), the
// targets (MoveBoxes, MoveKeypoints, MoveTargets, the masks: their
// kernels are pipeline/targets'), the cost
// model, String, stop_epoch, the wire's named ops (internal/opspec), the
// reference (`stoker ops list`, docs/reference.md) and the Python client's
// classes (python/stoker/_ops_generated.py, generated from OpSchemas, and
// a test that holds the hand-written ones to it). Adding an op is one
// family file, its kernel and its tests.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/kernels"
)

// targetRole says what an op or a functional op does to a job's targets
// (boxes, labels, keypoints, masks).
type targetRole uint8

const (
	// targetsRefused: targets do not support it (the zero value, so that
	// an op that says nothing is refused rather than leaves its targets
	// behind).
	targetsRefused targetRole = iota
	// targetsPixels: pixels alone; the targets stay, as torchvision passes
	// a BoundingBoxes, KeyPoints or Mask through it.
	targetsPixels
	// targetsMove: it moves them (fnDef's boxes, points and masks).
	targetsMove
	// targetsInstances: it drops, clamps or reformats instances
	// (fnDef.instances, run by MoveTargets between the moves).
	targetsInstances
	// targetsContainer: its ops' roles, each.
	targetsContainer
)

// fnDef is one functional op: torchvision.transforms.v2.functional's
// name and arguments (the trace's), its kernel and checks, its cost, and
// what it does to targets.
type fnDef struct {
	name string
	args []arg
	// geometry: fused into the decode; it appears in a trace, never among
	// the steps run after the decode.
	geometry bool
	// kernel runs the step on a sample's planes (nil: no kernel after the
	// decode: the geometry, Normalize, the targets' ops).
	kernel func(p kernels.Planes, st *Step, ks *kernels.Scratch)
	// size, when set, is the size of the step's output on a w x h image
	// (rotate's expand: it may differ), and grow its kernel then: p's
	// bytes have room for the output (their capacity), whose planes it
	// returns.
	size func(st *Step, w, h int) (int, int)
	grow func(p kernels.Planes, st *Step, ks *kernels.Scratch) kernels.Planes
	// check checks a parsed trace's step as its kernel needs it (a drawn
	// step is valid by construction); nil: the generic checks only.
	check func(st *Step, w, h int) error
	// fails, when set, is a drawn step's error before its kernel runs (a
	// draw torchvision's kernel raises on fails its sample so).
	fails func(st *Step) error
	// ns is the cost model's nanoseconds a pixel of the step's image
	// (calibrated by `stoker bench cost`); cost, when set, is the step's
	// cost on an image of px pixels instead of ns times px.
	ns   float64
	cost func(st *Step, ns, px float64) float64
	// targets: what the step does to a job's targets; with targetsMove,
	// boxes, points and masks move them (a nil one: that target does not
	// support the step yet), with targetsInstances, instances does it.
	targets   targetRole
	boxes     func(boxes [][4]float32, w, h int, st *Step) (int, int, error)
	points    func(pts [][2]float32, w, h int, st *Step) (int, int, error)
	masks     func(t *Targets, st *Step) error
	instances func(t *Targets, w, h int, st *Step) (int, int, error)
}

// fnDefs are the functional ops by Fn, FnNone's (the zero, which does
// nothing) first.
var fnDefs = []fnDef{{name: "", targets: targetsPixels}}

// unknownFn is an Fn's definition beyond fnDefs: no kernel, refused by
// the targets.
var unknownFn = fnDef{name: "unknown"}

// defineFn registers a functional op and returns its Fn. Family files
// call it in their package-level var declarations (var FnX =
// defineFn(...)), so an Fn's value is its place in that order: internal,
// never on the wire (a trace names its steps).
func defineFn(d fnDef) Fn {
	if len(fnDefs) > 255 {
		panic("pipeline: more than 255 functional ops")
	}
	fnDefs = append(fnDefs, d)
	return Fn(len(fnDefs) - 1)
}

// def is f's definition (unknownFn for an unknown f).
func (f Fn) def() *fnDef {
	if int(f) < len(fnDefs) {
		return &fnDefs[f]
	}
	return &unknownFn
}

// drawnError is a drawn step's error before its kernel runs (its
// fnDef.fails), nil for most.
func (st *Step) drawnError() error {
	if f := st.Fn.def().fails; f != nil {
		return f(st)
	}
	return nil
}

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

// fnByName maps torchvision's functional names to Fns: built in init,
// after every family's defineFn has run.
var fnByName map[string]Fn

func init() {
	fnByName = make(map[string]Fn, len(fnDefs))
	for f := 1; f < len(fnDefs); f++ {
		if _, dup := fnByName[fnDefs[f].name]; dup {
			panic("pipeline: functional op defined twice: " + fnDefs[f].name)
		}
		fnByName[fnDefs[f].name] = Fn(f)
	}
}

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
