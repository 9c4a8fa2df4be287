package ops

// The policies as ops: torchvision.transforms.v2's TrivialAugmentWide,
// RandAugment, AutoAugment and AugMix, and timm's RandAugment, AutoAugment
// and AugMix (pipeline/policy holds their spaces and draws), with AugMix's
// blending steps. Targets do not follow them: torchvision's own refuse a
// BoundingBoxes.

import (
	"fmt"
	"strings"

	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/kernels"
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

// Each policy's own arguments (Op.Args), with torchvision's and timm's
// names; interpolation and fill their Resampling and Filling, as every
// warping op's.
type (
	// TrivialAugmentWideArgs: num_magnitude_bins.
	TrivialAugmentWideArgs struct {
		Bins int
		Resampling
		Filling
	}
	// RandAugmentArgs: num_ops, magnitude, num_magnitude_bins.
	RandAugmentArgs struct {
		NumOps, Magnitude, Bins int
		Resampling
		Filling
	}
	// AutoAugmentArgs: policy ("imagenet", "cifar10", "svhn").
	AutoAugmentArgs struct {
		Policy string
		Resampling
		Filling
	}
	// AugMixArgs: severity, mixture_width, chain_depth, alpha, and
	// all_ops=False as PartialOps.
	AugMixArgs struct {
		Severity, MixtureWidth, ChainDepth int
		Alpha                              float64
		PartialOps                         bool
		Resampling
		Filling
	}
	// TimmArgs: timm's config string ("rand-m9-mstd0.5-inc1"), of
	// TimmRandAugment, TimmAutoAugment and TimmAugMix; RandomInterp, that
	// each resampling op draws bilinear or bicubic (interpolation None,
	// timm's default; its Interp is then nearest).
	TimmArgs struct {
		Config       string
		RandomInterp bool
		Resampling
		Filling
	}
)

func init() {
	interp := func(def string) Param { return Param{Name: "interpolation", Typ: PInterp, Def: def} }
	fill := func(def string) Param { return Param{Name: "fill", Typ: PFill, Def: def} }
	timm := func(kind OpKind, doc, config string) {
		definePolicy(kind, doc, []Param{{Name: "config", Typ: PString, Def: config}, interp("None"), fill("(124, 116, 104)")}, formatPolicy)
	}
	definePolicy(OpTrivialAugmentWide, "one op of its space at a random magnitude bin, per image",
		[]Param{{Name: "num_magnitude_bins", Typ: PInt, Def: "31"}, interp("'nearest'"), fill("None")}, FormatNone)
	definePolicy(OpRandAugment, "num_ops ops of its space at one magnitude, per image",
		[]Param{{Name: "num_ops", Typ: PInt, Def: "2"}, {Name: "magnitude", Typ: PInt, Def: "9"},
			{Name: "num_magnitude_bins", Typ: PInt, Def: "31"}, interp("'nearest'"), fill("None")},
		func(b *strings.Builder, op *Op) {
			a := ArgsOf[RandAugmentArgs](op)
			fmt.Fprintf(b, "(num_ops=%d, magnitude=%d)", a.NumOps, a.Magnitude)
		})
	definePolicy(OpAutoAugment, "one sub-policy of the named policy (imagenet, cifar10, svhn), per image",
		[]Param{{Name: "policy", Typ: PString, Def: "'imagenet'"}, interp("'nearest'"), fill("None")}, formatPolicy)
	definePolicy(OpAugMix, "a Dirichlet-weighted mix of mixture_width chains of random ops, blended with the image",
		[]Param{{Name: "severity", Typ: PInt, Def: "3"}, {Name: "mixture_width", Typ: PInt, Def: "3"},
			{Name: "chain_depth", Typ: PInt, Def: "-1"}, {Name: "alpha", Typ: PFloat, Def: "1.0"},
			{Name: "all_ops", Typ: PBool, Def: "True"}, interp("'bilinear'"), fill("None")}, FormatNone)
	timm(OpTimmRandAugment, "timm's RandAugment of a config string (rand-m9-mstd0.5-inc1)", "'rand-m9-mstd0.5-inc1'")
	timm(OpTimmAutoAugment, "timm's AutoAugment of a config string (original, v0, 3a, ...)", "'original'")
	timm(OpTimmAugMix, "timm's AugMix of a config string (augmix-m3-w3)", "'augmix-m3-w3'")
}

func definePolicy(kind OpKind, doc string, params []Param, format func(*strings.Builder, *Op)) {
	// Every policy may rotate, shear or translate, and sharpen; AugMix's
	// also blend.
	keeps := Keeps{Warp: true, Sharp: true, Mix: kind == OpAugMix || kind == OpTimmAugMix}
	Define(Def{Kind: kind, Doc: doc, Params: params, Format: format, FromArgs: policyArgs, OneSize: true,
		Keeps: func(*Op) Keeps { return keeps },
		Compile: func(c *Compiler, n *Node, at CompileAt) error {
			pol, err := policy.New(policyParams(n.Op), c.W, c.H)
			if err != nil {
				return OpError(at.Where, "%v", err)
			}
			n.pol, n.MaxSteps = pol, pol.MaxSteps()
			return nil
		},
		Draw:  func(n *Node, r *det.RNG, d *Drawer) { d.Steps = n.pol.Draw(r, d.W, d.H, d.Steps) },
		MaxNs: func(n *Node, w, h int) float64 { return n.pol.MaxNs(w, h) }})
}

// formatPolicy writes AutoAugment's policy or a timm policy's config.
func formatPolicy(b *strings.Builder, op *Op) { fmt.Fprintf(b, "(%s)", policyParams(op).Policy) }

// policyParams is op's arguments as its policy reads them.
func policyParams(op *Op) *policy.Params {
	f := FillOf(op)
	p := &policy.Params{Kind: policy.Kind(op.Kind), Interp: ResamplingOf(op).Interp, Fill: f.Fill, FillNone: f.FillNone}
	switch op.Kind {
	case OpTrivialAugmentWide:
		p.Bins = ArgsOf[TrivialAugmentWideArgs](op).Bins
	case OpRandAugment:
		a := ArgsOf[RandAugmentArgs](op)
		p.NumOps, p.Magnitude, p.Bins = a.NumOps, a.Magnitude, a.Bins
	case OpAutoAugment:
		p.Policy = ArgsOf[AutoAugmentArgs](op).Policy
	case OpAugMix:
		a := ArgsOf[AugMixArgs](op)
		p.Severity, p.MixtureWidth, p.ChainDepth, p.Alpha, p.PartialOps = a.Severity, a.MixtureWidth, a.ChainDepth, a.Alpha, a.PartialOps
	default:
		a := ArgsOf[TimmArgs](op)
		p.Policy, p.RandomInterp = a.Config, a.RandomInterp
	}
	return p
}

// policyArgs reads a policy's arguments: torchvision's (fill None: no
// fill blended) and timm's (a config string; interpolation None: bilinear
// or bicubic drawn per op; fill None: the default, ImageNet's mean).
func policyArgs(a *Args) Op {
	var op Op
	timm := a.kind == OpTimmRandAugment || a.kind == OpTimmAutoAugment || a.kind == OpTimmAugMix
	var f Filling
	if fill, ok := a.Fill("fill"); ok {
		f.Fill = fill
	} else if timm {
		f.Fill = [3]float64{124, 116, 104}
	} else {
		f.FillNone = true
	}
	randomInterp := timm && a.IsNone("interpolation")
	r := Resampling{Interp: kernels.Nearest} // timm's random one: bilinear or bicubic drawn per op
	if !randomInterp {
		r.Interp = a.Interp("interpolation")
	}
	switch a.kind {
	case OpTrivialAugmentWide:
		op.Args = &TrivialAugmentWideArgs{Bins: a.Int("num_magnitude_bins"), Resampling: r, Filling: f}
	case OpRandAugment:
		op.Args = &RandAugmentArgs{NumOps: a.Int("num_ops"), Magnitude: a.Int("magnitude"), Bins: a.Int("num_magnitude_bins"), Resampling: r, Filling: f}
	case OpAutoAugment:
		op.Args = &AutoAugmentArgs{Policy: a.Str("policy"), Resampling: r, Filling: f}
	case OpAugMix:
		m := &AugMixArgs{Severity: a.Int("severity"), MixtureWidth: a.Int("mixture_width"), ChainDepth: a.Int("chain_depth"),
			Alpha: a.Float("alpha"), PartialOps: !a.Bool("all_ops"), Resampling: r, Filling: f}
		if m.ChainDepth == 0 || m.ChainDepth < -1 {
			a.Errorf("chain_depth %d: want -1 (random 1..3) or >= 1", m.ChainDepth)
		}
		op.Args = m
	default:
		op.Args = &TimmArgs{Config: a.Str("config"), RandomInterp: randomInterp, Resampling: r, Filling: f}
	}
	return op
}
