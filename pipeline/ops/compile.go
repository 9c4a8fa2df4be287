package ops

// The ops' compile and draw.
//
// Floating point in this file: a sample's steps must be the same bits on
// every machine, so every product that is added is wrapped in float64(...)
// (no fused multiply-add), and exp and log are det.Exp and det.Log.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/fn"
	"github.com/stoker-dev/stoker/pipeline/policy"
)

// Bounds on what a transform may ask, so that a spec cannot cost the server
// unbounded time or memory per sample.
const (
	MaxOps   = 32 // ops in one list (after the geometry, or in a container)
	maxDepth = MaxNesting
	maxNodes = 128
	maxSteps = 256 // steps one sample may draw
)

// MaxNesting is how deep a transform's containers (RandomApply,
// RandomChoice, RandomOrder) may nest inside one another.
const MaxNesting = 4

// Node is a compiled op after the geometry: what it draws from, and what
// it needs precomputed (a policy's magnitudes, say). Nodes are immutable.
type Node struct {
	Op     *Op
	Def    *Def
	Stream uint64 // its RNG stream (Key.Stream)
	kids   []Node // a container's ops
	cum    []float64
	// jit: ColorJitter's ranges (brightness, contrast, saturation, hue),
	// jitOn: which are not None.
	jit   [4][2]float64
	jitOn [4]bool
	// logRatio: RandomErasing's log aspect range; erasing its
	// arguments, its noise's Normalize filled in.
	logRatio [2]float64
	erasing  ErasingArgs
	// pol: a policy's table.
	pol *policy.Policy
	// Step: what an op whose only draw is whether it applies emits.
	Step fn.Step
	// MaxSteps bounds the steps one draw emits.
	MaxSteps int
}

// Compiler compiles op lists for an output of W x H: the size the ops
// get, or its bound where each sample has its own (a RandomShortestSize's,
// the size before a rotation that grows it), or 0 x 0 where nothing bounds
// it before a sample's header (a geometry that is the image whole). Only
// an op compiled for one size (Def.OneSize) needs it, and a transform
// whose sizes vary refuses those.
type Compiler struct {
	W, H  int
	nodes int
	grown bool // a RandomRotation with expand=True was compiled (opDef.afterGrow)
}

// OpError is a bad op's error: where it is (its position, through its
// containers) and what is wrong.
func OpError(path string, format string, a ...any) error {
	return fmt.Errorf("%w: transform: %s: %s", errs.Unsupported, path, fmt.Sprintf(format, a...))
}

// Compile checks op (at position pos of its list; path names its
// containers) and returns its node, drawing from stream: its definition's
// compile (registry.go), a geometry op refused where it stands.
func (c *Compiler) Compile(op *Op, pos int, stream uint64, depth int, path ...string) (Node, error) {
	where := strings.Join(append(path, fmt.Sprintf("op %d (%s)", pos, op.Kind)), " > ")
	bad := func(format string, a ...any) (Node, error) { return Node{}, OpError(where, format, a...) }
	c.nodes++
	if c.nodes > maxNodes {
		return bad("more than %d ops in all", maxNodes)
	}
	d := Lookup(op.Kind)
	if d == nil {
		return bad("unknown op %q", op.Kind)
	}
	if d.AfterGrow != nil && c.grown && depth == 0 {
		return d.AfterGrow(op, stream, where) // after a RandomRotation with expand=True
	}
	if d.Geometry {
		if depth > 0 {
			return bad("a geometry op inside a container: the geometry is the transform's first op, fused into the decode")
		}
		return bad("%s", d.Misplaced)
	}
	n := Node{Op: op, Def: d, Stream: stream, MaxSteps: 1}
	if d.Step != nil {
		n.Step = d.Step(op)
	}
	if d.Compile != nil {
		if err := d.Compile(c, &n, CompileAt{Where: where, depth: depth, pos: pos, path: path}); err != nil {
			return Node{}, err
		}
	}
	if n.MaxSteps > maxSteps {
		return bad("may draw %d steps per sample: the limit is %d", n.MaxSteps, maxSteps)
	}
	c.grown = c.grown || depth == 0 && Grows(op)
	return n, nil
}

// Grows reports whether op is, or holds, an op that grows the image: one
// whose definition's Grow says so (a RandomRotation with expand=True).
func Grows(op *Op) bool {
	if _, _, grows := GrowOf(op, 1, 1); grows {
		return true
	}
	return slices.ContainsFunc(op.Ops, func(o Op) bool { return Grows(&o) })
}

// GrowOf is what op itself (not the ops it holds) makes of a w x h image
// that it grows (its Def's Grow): its bound, gw x gh; else w x h, and
// grows false.
func GrowOf(op *Op, w, h int) (gw, gh int, grows bool) {
	if d := Lookup(op.Kind); d != nil && d.Grow != nil {
		if gw, gh, grows = d.Grow(op, w, h); grows {
			return gw, gh, true
		}
	}
	return w, h, false
}

// The helpers the families' definitions share.

// PParam is the argument p, a probability of default def.
func PParam(def float64) Param {
	return Param{Name: "p", Typ: PFloat, Def: strconv.FormatFloat(def, 'f', -1, 64), At: func(o *Op) any { return &o.P }, Lo: 0, Hi: 1}
}

// KeywordOnly is p keyword-only (after torchvision's *): an argument
// stoker adds to torchvision's signature (RandomIoUCrop's p).
func KeywordOnly(p Param) Param {
	p.kwOnly = true
	return p
}

// CheckProb checks an op's p: 0 <= p <= 1.
func CheckProb(op *Op, at CompileAt) error {
	if !(op.P >= 0 && op.P <= 1) {
		return OpError(at.Where, "p=%v: want 0 <= p <= 1", op.P)
	}
	return nil
}

// compileP is the compile of an op whose only argument is p.
func compileP(_ *Compiler, n *Node, at CompileAt) error { return CheckProb(n.Op, at) }

// DrawApplied is the draw of an op that draws only whether it applies:
// torchvision's _RandomApplyTransform (torch.rand(1) >= p skips).
func DrawApplied(n *Node, r *det.RNG, d *Drawer) {
	if r.Float64() < n.Op.P {
		d.Emit(n.Step)
	}
}

// drawAlways is the draw of an op that draws nothing.
func drawAlways(n *Node, _ *det.RNG, d *Drawer) { d.Emit(n.Step) }

// CheckFill checks a fill: one value per channel in the uint8 range.
func CheckFill(fill [3]float64, where string) error {
	for _, v := range fill {
		if !(v >= 0 && v <= 255) {
			return OpError(where, "fill %v: want values in 0..255", fill)
		}
	}
	return nil
}

// Drawer collects the steps a sample's ops draw, for an output of w x h;
// r is the generator of the node drawing (node.draw). An op's draw is
// called through its definition, so what it is handed escapes: a Decoder
// keeps its drawer (drawInto), and a sample's draw allocates nothing.
type Drawer struct {
	K     det.Key
	W, H  int
	Steps []fn.Step
	r     det.RNG
}

func (d *Drawer) Emit(st fn.Step) { d.Steps = append(d.Steps, st) }

// Draw appends the node's steps for the sample, drawing from its stream,
// with torchvision.transforms.v2's sampling: its definition's draw.
func (n *Node) Draw(d *Drawer) {
	outer := d.r // a container's, around its ops' draws
	d.r = d.K.Stream(n.Stream)
	n.Def.Draw(n, &d.r, d)
	d.r = outer
}

// StepNs is what st costs on a w x h image (fn.StepNs).
func StepNs(st fn.Step, w, h int) float64 { return fn.StepNs(st, w, h) }

// MaxNs is the most the node's steps may cost on a w x h image: every op
// that may apply applied, the most expensive choice of a RandomChoice,
// a policy's longest draw of its most expensive op: its definition's
// maxNs, else its one step's cost.
func (n *Node) MaxNs(w, h int) float64 {
	if n.Def.MaxNs != nil {
		return n.Def.MaxNs(n, w, h)
	}
	return StepNs(n.Step, w, h)
}
