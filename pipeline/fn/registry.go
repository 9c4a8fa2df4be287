package fn

// The functional ops' table: every Fn's definition (Def), registered by
// its family's file through define.

import (
	"github.com/stoker-dev/stoker/pipeline/kernels"
	"github.com/stoker-dev/stoker/pipeline/targets"
)

// TargetRole says what an op or a functional op does to a job's targets
// (boxes, labels, keypoints, masks).
type TargetRole uint8

const (
	// TargetsRefused: targets do not support it (the zero value, so that
	// an op that says nothing is refused rather than leaves its targets
	// behind).
	TargetsRefused TargetRole = iota
	// TargetsPixels: pixels alone; the targets stay, as torchvision passes
	// a BoundingBoxes, KeyPoints or Mask through it.
	TargetsPixels
	// TargetsMove: it moves them (Def's boxes, points and masks).
	TargetsMove
	// TargetsInstances: it drops, clamps or reformats instances
	// (Def.Instances, run by MoveTargets between the moves).
	TargetsInstances
	// TargetsContainer: its ops' roles, each.
	TargetsContainer
)

// Def is one functional op: torchvision.transforms.v2.functional's
// name and arguments (the trace's), its kernel and checks, its cost, and
// what it does to targets.
type Def struct {
	name string
	args []arg
	// Geometry: fused into the decode; it appears in a trace, never among
	// the steps run after the decode.
	Geometry bool
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
	// fails, when set, is a drawn step's error before its kernel runs on
	// a w x h image (a draw, or an image size, torchvision's kernel
	// raises on fails its sample so).
	fails func(st *Step, w, h int) error
	// Ns is the cost model's nanoseconds a pixel of the step's image
	// (calibrated by `stoker bench cost`); cost, when set, is the step's
	// cost on an image of px pixels instead of Ns times px.
	Ns   float64
	Cost func(st *Step, ns, px float64) float64
	// Role: what the step does to a job's targets; with TargetsMove,
	// boxes, points and masks move them (a nil one: that target does not
	// support the step yet), with TargetsInstances, instances does it.
	Role      TargetRole
	Boxes     func(boxes [][4]float32, w, h int, st *Step) (int, int, error)
	Points    func(pts [][2]float32, w, h int, st *Step) (int, int, error)
	Masks     func(t *targets.Targets, st *Step) error
	Instances func(t *targets.Targets, w, h int, st *Step) (int, int, error)
}

// defs are the functional ops by Fn, None's (the zero, which does
// nothing) first.
var defs = []Def{{name: "", Role: TargetsPixels}}

// unknown is an Fn's definition beyond defs: no kernel, refused by
// the targets.
var unknown = Def{name: "unknown"}

// define registers a functional op and returns its Fn. Family files
// call it in their package-level var declarations (var X =
// define(...)), so an Fn's value is its place in that order: internal,
// never on the wire (a trace names its steps).
func define(d Def) Fn {
	if len(defs) > 255 {
		panic("pipeline: more than 255 functional ops")
	}
	defs = append(defs, d)
	return Fn(len(defs) - 1)
}

// Count is the number of Fns, None included: every Fn below it is
// defined.
func Count() int { return len(defs) }

// Def is f's definition (unknown for an unknown f).
func (f Fn) Def() *Def {
	if int(f) < len(defs) {
		return &defs[f]
	}
	return &unknown
}

// DrawnError is a drawn step's error before its kernel runs on a w x h
// image (its Def.fails), nil for most.
func (st *Step) DrawnError(w, h int) error {
	if f := st.Fn.Def().fails; f != nil {
		return f(st, w, h)
	}
	return nil
}

// byName maps torchvision's functional names to Fns: built in init,
// after every family's define has run.
var byName map[string]Fn

func init() {
	byName = make(map[string]Fn, len(defs))
	for f := 1; f < len(defs); f++ {
		if _, dup := byName[defs[f].name]; dup {
			panic("pipeline: functional op defined twice: " + defs[f].name)
		}
		byName[defs[f].name] = Fn(f)
	}
}
