package ops

// The containers: torchvision.transforms.v2's RandomApply, RandomChoice
// and RandomOrder. Their ops are compiled as the transform's (never the
// geometry), each drawing from a stream of its own, derived from its
// container's (node.stream).

import (
	"fmt"
	"math"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
)

const (
	OpRandomApply  OpKind = "RandomApply"
	OpRandomChoice OpKind = "RandomChoice"
	OpRandomOrder  OpKind = "RandomOrder"
)

// ChoiceArgs are RandomChoice's own arguments: p, its ops' weights (nil:
// uniform). Its ops are Op.Ops, as every container's.
type ChoiceArgs struct{ P []float64 }

func init() {
	Define(Def{Kind: OpRandomApply, Doc: "its ops, in order, with probability p",
		Params:   []Param{{Name: "transforms", Typ: pOps}, PParam(0.5)},
		FromArgs: func(a *Args) Op { return Op{Ops: a.Ops("transforms"), P: a.Float("p")} },
		Targets:  TargetsContainer, Compile: compileContainer,
		Draw: func(n *Node, r *det.RNG, d *Drawer) {
			if r.Float64() < n.Op.P {
				for i := range n.kids {
					n.kids[i].Draw(d)
				}
			}
		},
		Format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "([%s], p=%g)", OpsString(op.Ops), op.P) },
		MaxNs:  sumKidsNs})
	Define(Def{Kind: OpRandomChoice, Doc: "one of its ops, drawn with the weights p (None: uniform)",
		Params:   []Param{{Name: "transforms", Typ: pOps}, {Name: "p", Typ: PFloats, Def: "None"}},
		FromArgs: func(a *Args) Op { return Op{Ops: a.Ops("transforms"), Args: &ChoiceArgs{P: a.Floats("p")}} },
		Targets:  TargetsContainer, Compile: compileContainer, Kids: KidsOneOf,
		Draw: func(n *Node, r *det.RNG, d *Drawer) {
			u := r.Float64()
			i := 0
			for i < len(n.cum)-1 && u >= n.cum[i] {
				i++
			}
			n.kids[i].Draw(d)
		},
		Format: formatKids,
		MaxNs: func(n *Node, w, h int) float64 {
			var s float64
			for i := range n.kids {
				s = max(s, n.kids[i].MaxNs(w, h))
			}
			return s
		}})
	Define(Def{Kind: OpRandomOrder, Doc: "its ops, each once, in a random order",
		Params:   []Param{{Name: "transforms", Typ: pOps}},
		FromArgs: func(a *Args) Op { return Op{Ops: a.Ops("transforms")} },
		Targets:  TargetsContainer, Compile: compileContainer, Kids: KidsAnyOrder,
		Draw: func(n *Node, r *det.RNG, d *Drawer) {
			var perm [MaxOps]int
			p := perm[:len(n.kids)]
			r.Perm(p)
			for _, i := range p {
				n.kids[i].Draw(d)
			}
		},
		Format: formatKids, MaxNs: sumKidsNs})
}

// KidsOrder is how a container runs the ops it holds (Def.Kids).
type KidsOrder uint8

const (
	KidsInOrder  KidsOrder = iota // each, in order (RandomApply's, when it applies)
	KidsOneOf                     // one of them (RandomChoice)
	KidsAnyOrder                  // each, in an order drawn (RandomOrder)
)

func formatKids(b *strings.Builder, op *Op) { fmt.Fprintf(b, "([%s])", OpsString(op.Ops)) }

// sumKidsNs is the most a container that may apply all its ops costs.
func sumKidsNs(n *Node, w, h int) float64 {
	var s float64
	for i := range n.kids {
		s += n.kids[i].MaxNs(w, h)
	}
	return s
}

// compileContainer compiles RandomApply's, RandomChoice's and
// RandomOrder's ops.
func compileContainer(c *Compiler, n *Node, at CompileAt) error {
	op, where := n.Op, at.Where
	if len(op.Ops) == 0 {
		return OpError(where, "pass at least one op")
	}
	if len(op.Ops) > MaxOps {
		return OpError(where, "%d ops: the limit is %d", len(op.Ops), MaxOps)
	}
	if at.depth+1 > maxDepth {
		return OpError(where, "containers nested deeper than %d", maxDepth)
	}
	if op.Kind == OpRandomApply && !(op.P >= 0 && op.P <= 1) {
		return OpError(where, "p=%v: want 0 <= p <= 1", op.P)
	}
	if op.Kind != OpRandomChoice && op.Args != nil {
		return OpError(where, "only RandomChoice takes a list of p")
	}
	if op.Kind == OpRandomChoice {
		probs := ArgsOf[ChoiceArgs](op).P
		if probs == nil {
			probs = make([]float64, len(op.Ops))
			for i := range probs {
				probs[i] = 1
			}
		}
		if len(probs) != len(op.Ops) {
			return OpError(where, "%d values of p for %d ops", len(probs), len(op.Ops))
		}
		var total float64
		for _, p := range probs {
			if !(p >= 0) || math.IsInf(p, 0) {
				return OpError(where, "p %v: want finite values >= 0", probs)
			}
			total += p
		}
		if !(total > 0) {
			return OpError(where, "p %v: want a positive sum", probs)
		}
		n.cum = make([]float64, len(probs))
		var acc float64
		for i, p := range probs {
			acc += p
			n.cum[i] = acc / total
		}
	}
	n.kids = make([]Node, len(op.Ops))
	n.MaxSteps = 0
	for i := range op.Ops {
		kid, err := c.Compile(&op.Ops[i], i, n.Stream*64+uint64(i)+1, at.depth+1, append(at.path, fmt.Sprintf("op %d (%s)", at.pos, op.Kind))...)
		if err != nil {
			return err
		}
		n.kids[i] = kid
		if op.Kind == OpRandomChoice {
			n.MaxSteps = max(n.MaxSteps, kid.MaxSteps)
		} else {
			n.MaxSteps += kid.MaxSteps
		}
	}
	return nil
}
