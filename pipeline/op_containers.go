package pipeline

// The containers: torchvision.transforms.v2's RandomApply, RandomChoice
// and RandomOrder. Their ops are compiled as the transform's (never the
// geometry), each drawing from a stream of its own, derived from its
// container's (node.stream).

import (
	"fmt"
	"math"
	"strings"
)

const (
	OpRandomApply  OpKind = "RandomApply"
	OpRandomChoice OpKind = "RandomChoice"
	OpRandomOrder  OpKind = "RandomOrder"
)

func init() {
	defineOp(opDef{kind: OpRandomApply, doc: "its ops, in order, with probability p",
		params:  []param{{name: "transforms", typ: pOps}, pParam(0.5)},
		targets: targetsContainer, compile: compileContainer,
		draw: func(n *node, r *RNG, d *drawer) {
			if r.Float64() < n.op.P {
				for i := range n.kids {
					n.kids[i].draw(d)
				}
			}
		},
		format: func(b *strings.Builder, op *Op) { fmt.Fprintf(b, "([%s], p=%g)", opsString(op.Ops), op.P) },
		maxNs:  sumKidsNs})
	defineOp(opDef{kind: OpRandomChoice, doc: "one of its ops, drawn with the weights p (None: uniform)",
		params:  []param{{name: "transforms", typ: pOps}, {name: "p", typ: pFloats, def: "None"}},
		targets: targetsContainer, compile: compileContainer,
		draw: func(n *node, r *RNG, d *drawer) {
			u := r.Float64()
			i := 0
			for i < len(n.cum)-1 && u >= n.cum[i] {
				i++
			}
			n.kids[i].draw(d)
		},
		format: formatKids,
		maxNs: func(n *node, w, h int) float64 {
			var s float64
			for i := range n.kids {
				s = max(s, n.kids[i].maxNs(w, h))
			}
			return s
		}})
	defineOp(opDef{kind: OpRandomOrder, doc: "its ops, each once, in a random order",
		params:  []param{{name: "transforms", typ: pOps}},
		targets: targetsContainer, compile: compileContainer,
		draw: func(n *node, r *RNG, d *drawer) {
			var perm [maxOps]int
			p := perm[:len(n.kids)]
			r.Perm(p)
			for _, i := range p {
				n.kids[i].draw(d)
			}
		},
		format: formatKids, maxNs: sumKidsNs})
}

func formatKids(b *strings.Builder, op *Op) { fmt.Fprintf(b, "([%s])", opsString(op.Ops)) }

// sumKidsNs is the most a container that may apply all its ops costs.
func sumKidsNs(n *node, w, h int) float64 {
	var s float64
	for i := range n.kids {
		s += n.kids[i].maxNs(w, h)
	}
	return s
}

// compileContainer compiles RandomApply's, RandomChoice's and
// RandomOrder's ops.
func compileContainer(c *compiler, n *node, at compileAt) error {
	op, where := n.op, at.where
	if len(op.Ops) == 0 {
		return opError(where, "pass at least one op")
	}
	if len(op.Ops) > maxOps {
		return opError(where, "%d ops: the limit is %d", len(op.Ops), maxOps)
	}
	if at.depth+1 > maxDepth {
		return opError(where, "containers nested deeper than %d", maxDepth)
	}
	if op.Kind == OpRandomApply && !(op.P >= 0 && op.P <= 1) {
		return opError(where, "p=%v: want 0 <= p <= 1", op.P)
	}
	if op.Kind != OpRandomChoice && op.Probs != nil {
		return opError(where, "only RandomChoice takes a list of p")
	}
	if op.Kind == OpRandomChoice {
		probs := op.Probs
		if probs == nil {
			probs = make([]float64, len(op.Ops))
			for i := range probs {
				probs[i] = 1
			}
		}
		if len(probs) != len(op.Ops) {
			return opError(where, "%d values of p for %d ops", len(probs), len(op.Ops))
		}
		var total float64
		for _, p := range probs {
			if !(p >= 0) || math.IsInf(p, 0) {
				return opError(where, "p %v: want finite values >= 0", probs)
			}
			total += p
		}
		if !(total > 0) {
			return opError(where, "p %v: want a positive sum", probs)
		}
		n.cum = make([]float64, len(probs))
		var acc float64
		for i, p := range probs {
			acc += p
			n.cum[i] = acc / total
		}
	}
	n.kids = make([]node, len(op.Ops))
	n.maxSteps = 0
	for i := range op.Ops {
		kid, err := c.compile(&op.Ops[i], i, n.stream*64+uint64(i)+1, at.depth+1, append(at.path, fmt.Sprintf("op %d (%s)", at.pos, op.Kind))...)
		if err != nil {
			return err
		}
		n.kids[i] = kid
		if op.Kind == OpRandomChoice {
			n.maxSteps = max(n.maxSteps, kid.maxSteps)
		} else {
			n.maxSteps += kid.maxSteps
		}
	}
	return nil
}
