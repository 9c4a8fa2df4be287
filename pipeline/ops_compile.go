package pipeline

// The ops' compile and draw.
//
// Floating point in this file: a sample's steps must be the same bits on
// every machine, so every product that is added is wrapped in float64(...)
// (no fused multiply-add), and exp and log are det.Exp and det.Log.

import (
	"fmt"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"slices"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/policy"
)

// Bounds on what a transform may ask, so that a spec cannot cost the server
// unbounded time or memory per sample.
const (
	maxOps   = 32 // ops in one list (after the geometry, or in a container)
	maxDepth = MaxNesting
	maxNodes = 128
	maxSteps = 256 // steps one sample may draw
)

// MaxNesting is how deep a transform's containers (RandomApply,
// RandomChoice, RandomOrder) may nest inside one another.
const MaxNesting = 4

// node is a compiled op after the geometry: what it draws from, and what
// it needs precomputed (a policy's magnitudes, say). Nodes are immutable.
type node struct {
	op     *Op
	def    *opDef
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
	pol *policy.Policy
	// step: what an op whose only draw is whether it applies emits.
	step Step
	// maxSteps bounds the steps one draw emits.
	maxSteps int
}

// compiler compiles op lists for an output of w x h.
type compiler struct {
	w, h  int
	nodes int
	grown bool // a RandomRotation with expand=True was compiled (opDef.afterGrow)
}

// opError is a bad op's error: where it is (its position, through its
// containers) and what is wrong.
func opError(path string, format string, a ...any) error {
	return fmt.Errorf("%w: transform: %s: %s", ErrUnsupported, path, fmt.Sprintf(format, a...))
}

// compile checks op (at position pos of its list; path names its
// containers) and returns its node, drawing from stream: its definition's
// compile (registry.go), a geometry op refused where it stands.
func (c *compiler) compile(op *Op, pos int, stream uint64, depth int, path ...string) (node, error) {
	where := strings.Join(append(path, fmt.Sprintf("op %d (%s)", pos, op.Kind)), " > ")
	bad := func(format string, a ...any) (node, error) { return node{}, opError(where, format, a...) }
	c.nodes++
	if c.nodes > maxNodes {
		return bad("more than %d ops in all", maxNodes)
	}
	d := lookupOp(op.Kind)
	if d == nil {
		return bad("unknown op %q", op.Kind)
	}
	if d.afterGrow != nil && c.grown && depth == 0 {
		return d.afterGrow(op, stream, where) // after a RandomRotation with expand=True
	}
	if d.geometry {
		if depth > 0 {
			return bad("a geometry op inside a container: the geometry is the transform's first op, fused into the decode")
		}
		return bad("%s", d.misplaced)
	}
	n := node{op: op, def: d, stream: stream, maxSteps: 1}
	if d.step != nil {
		n.step = d.step(op)
	}
	if d.compile != nil {
		if err := d.compile(c, &n, compileAt{where: where, depth: depth, pos: pos, path: path}); err != nil {
			return node{}, err
		}
	}
	if n.maxSteps > maxSteps {
		return bad("may draw %d steps per sample: the limit is %d", n.maxSteps, maxSteps)
	}
	c.grown = c.grown || depth == 0 && grows(op)
	return n, nil
}

// grows reports whether op is, or holds, an op that grows the image: one
// whose definition's grows says so (a RandomRotation with expand=True).
func grows(op *Op) bool {
	if d := lookupOp(op.Kind); d != nil && d.grows != nil && d.grows(op) {
		return true
	}
	return slices.ContainsFunc(op.Ops, func(o Op) bool { return grows(&o) })
}

// The helpers the families' definitions share.

// pParam is the argument p, a probability of default def.
func pParam(def float64) param {
	return param{name: "p", typ: pFloat, def: strconv.FormatFloat(def, 'f', -1, 64), field: "P", lo: 0, hi: 1}
}

// checkProb checks an op's p: 0 <= p <= 1.
func checkProb(op *Op, at compileAt) error {
	if !(op.P >= 0 && op.P <= 1) {
		return opError(at.where, "p=%v: want 0 <= p <= 1", op.P)
	}
	return nil
}

// compileP is the compile of an op whose only argument is p.
func compileP(_ *compiler, n *node, at compileAt) error { return checkProb(n.op, at) }

// drawApplied is the draw of an op that draws only whether it applies:
// torchvision's _RandomApplyTransform (torch.rand(1) >= p skips).
func drawApplied(n *node, r *RNG, d *drawer) {
	if r.Float64() < n.op.P {
		d.emit(n.step)
	}
}

// drawAlways is the draw of an op that draws nothing.
func drawAlways(n *node, _ *RNG, d *drawer) { d.emit(n.step) }

// checkFill checks a fill: one value per channel in the uint8 range.
func checkFill(fill [3]float64, where string) error {
	for _, v := range fill {
		if !(v >= 0 && v <= 255) {
			return opError(where, "fill %v: want values in 0..255", fill)
		}
	}
	return nil
}

// drawer collects the steps a sample's ops draw, for an output of w x h;
// r is the generator of the node drawing (node.draw). An op's draw is
// called through its definition, so what it is handed escapes: a Decoder
// keeps its drawer (drawInto), and a sample's draw allocates nothing.
type drawer struct {
	k     Key
	w, h  int
	steps []Step
	r     RNG
}

func (d *drawer) emit(st Step) { d.steps = append(d.steps, st) }

// draw appends the node's steps for the sample, drawing from its stream,
// with torchvision.transforms.v2's sampling: its definition's draw.
func (n *node) draw(d *drawer) {
	outer := d.r // a container's, around its ops' draws
	d.r = d.k.Stream(n.stream)
	n.def.draw(n, &d.r, d)
	d.r = outer
}

// stepNs is what st costs on a w x h image (fn.StepNs).
func stepNs(st Step, w, h int) float64 { return fn.StepNs(st, w, h) }

// maxNs is the most the node's steps may cost on a w x h image: every op
// that may apply applied, the most expensive choice of a RandomChoice,
// a policy's longest draw of its most expensive op: its definition's
// maxNs, else its one step's cost.
func (n *node) maxNs(w, h int) float64 {
	if n.def.maxNs != nil {
		return n.def.maxNs(n, w, h)
	}
	return stepNs(n.step, w, h)
}
