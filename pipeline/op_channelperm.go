package pipeline

// RandomChannelPermutation: torchvision.transforms.v2's, the image's
// channels in an order drawn uniformly for each image (make_params'
// torch.randperm), applied by permute_channels. This op is defined here
// alone: its schema, draw, kernel and trace entry are the definition
// below and its functional op's (op_color.go); its wire form (a NamedOp),
// its Python class (python/stoker/_ops_generated.py) and its reference
// entry (docs/reference.md) are made from that definition.

const OpRandomChannelPermutation OpKind = "RandomChannelPermutation"

func init() {
	defineOp(opDef{kind: OpRandomChannelPermutation, doc: "the image's channels in an order drawn uniformly per image",
		named: true, targets: targetsPixels, anyFormat: true, format: formatNone,
		step: func(*Op) Step { return Step{Fn: FnPermuteChannels} }, // its cost
		draw: func(_ *node, r *RNG, d *drawer) {
			var perm [3]int
			r.Perm(perm[:])
			d.emit(Step{Fn: FnPermuteChannels, I: [6]int{perm[0], perm[1], perm[2]}})
		}})
}
