package pipeline

// The policies as ops: torchvision.transforms.v2's TrivialAugmentWide,
// RandAugment, AutoAugment and AugMix, and timm's RandAugment, AutoAugment
// and AugMix (pipeline/policy holds their spaces and draws), with AugMix's
// blending steps. Targets do not follow them: torchvision's own refuse a
// BoundingBoxes.

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/policy"
)

// Policies: torchvision's, and timm's under their own names
// (pipeline/policy's kinds).
const (
	OpTrivialAugmentWide = OpKind(policy.TrivialAugmentWide)
	OpRandAugment        = OpKind(policy.RandAugment)
	OpAutoAugment        = OpKind(policy.AutoAugment)
	OpAugMix             = OpKind(policy.AugMix)
	OpTimmRandAugment    = OpKind(policy.TimmRandAugment)
	OpTimmAutoAugment    = OpKind(policy.TimmAutoAugment)
	OpTimmAugMix         = OpKind(policy.TimmAugMix)
)

func init() {
	interp := func(def string) param { return param{name: "interpolation", typ: pInterp, def: def} }
	fill := func(def string) param { return param{name: "fill", typ: pFill, def: def} }
	timm := func(kind OpKind, doc, config string) {
		definePolicy(kind, doc, []param{{name: "config", typ: pString, def: config}, interp("None"), fill("(124, 116, 104)")}, formatPolicy)
	}
	definePolicy(OpTrivialAugmentWide, "one op of its space at a random magnitude bin, per image",
		[]param{{name: "num_magnitude_bins", typ: pInt, def: "31"}, interp("'nearest'"), fill("None")}, formatNone)
	definePolicy(OpRandAugment, "num_ops ops of its space at one magnitude, per image",
		[]param{{name: "num_ops", typ: pInt, def: "2"}, {name: "magnitude", typ: pInt, def: "9"},
			{name: "num_magnitude_bins", typ: pInt, def: "31"}, interp("'nearest'"), fill("None")},
		func(b *strings.Builder, op *Op) {
			fmt.Fprintf(b, "(num_ops=%d, magnitude=%d)", op.NumOps, op.Magnitude)
		})
	definePolicy(OpAutoAugment, "one sub-policy of the named policy (imagenet, cifar10, svhn), per image",
		[]param{{name: "policy", typ: pString, def: "'imagenet'"}, interp("'nearest'"), fill("None")}, formatPolicy)
	definePolicy(OpAugMix, "a Dirichlet-weighted mix of mixture_width chains of random ops, blended with the image",
		[]param{{name: "severity", typ: pInt, def: "3"}, {name: "mixture_width", typ: pInt, def: "3"},
			{name: "chain_depth", typ: pInt, def: "-1"}, {name: "alpha", typ: pFloat, def: "1.0"},
			{name: "all_ops", typ: pBool, def: "True"}, interp("'bilinear'"), fill("None")}, formatNone)
	timm(OpTimmRandAugment, "timm's RandAugment of a config string (rand-m9-mstd0.5-inc1)", "'rand-m9-mstd0.5-inc1'")
	timm(OpTimmAutoAugment, "timm's AutoAugment of a config string (original, v0, 3a, ...)", "'original'")
	timm(OpTimmAugMix, "timm's AugMix of a config string (augmix-m3-w3)", "'augmix-m3-w3'")
}

func definePolicy(kind OpKind, doc string, params []param, format func(*strings.Builder, *Op)) {
	defineOp(opDef{kind: kind, doc: doc, params: params, format: format,
		compile: func(c *compiler, n *node, at compileAt) error {
			pol, err := policy.New(policyParams(n.op), c.w, c.h)
			if err != nil {
				return opError(at.where, "%v", err)
			}
			n.pol, n.maxSteps = pol, pol.MaxSteps()
			return nil
		},
		draw:  func(n *node, r *RNG, d *drawer) { d.steps = n.pol.Draw(r, d.w, d.h, d.steps) },
		maxNs: func(n *node, w, h int) float64 { return n.pol.MaxNs(w, h) }})
}

func formatPolicy(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(%s)", op.Policy) }

// policyParams is op's arguments as its policy reads them.
func policyParams(op *Op) *policy.Params {
	return &policy.Params{Kind: policy.Kind(op.Kind), Interp: op.Interp, RandomInterp: op.RandomInterp,
		Fill: op.Fill, FillNone: op.FillNone, NumOps: op.NumOps, Magnitude: op.Magnitude, Bins: op.Bins,
		Policy: op.Policy, Severity: op.Severity, MixtureWidth: op.MixtureWidth, ChainDepth: op.ChainDepth,
		Alpha: op.Alpha, PartialOps: op.PartialOps}
}
