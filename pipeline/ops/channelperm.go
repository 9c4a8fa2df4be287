package ops

import (
	"github.com/stoker-dev/stoker/pipeline/det"
	"github.com/stoker-dev/stoker/pipeline/fn"
)

// RandomChannelPermutation: torchvision.transforms.v2's, the image's
// channels in an order drawn uniformly for each image (make_params'
// torch.randperm), applied by permute_channels. This op is defined here
// alone: its schema, draw, kernel and trace entry are the definition
// below and its functional op's (pipeline/fn's color.go); its wire form (a NamedOp),
// its Python class (python/stoker/_ops_generated.py) and its reference
// entry (docs/reference.md) are made from that definition.

const OpRandomChannelPermutation OpKind = "RandomChannelPermutation"

func init() {
	Define(Def{Kind: OpRandomChannelPermutation, Doc: "the image's channels in an order drawn uniformly per image",
		Named: true, Targets: TargetsPixels, AnyFormat: true, Format: FormatNone,
		Step: func(*Op) fn.Step { return fn.Step{Fn: fn.PermuteChannels} }, // its cost
		Draw: func(_ *Node, r *det.RNG, d *Drawer) {
			var perm [3]int
			r.Perm(perm[:])
			d.Emit(fn.Step{Fn: fn.PermuteChannels, I: [6]int{perm[0], perm[1], perm[2]}})
		}})
}
