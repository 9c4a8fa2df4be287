// Package policy holds the augmentation policies: torchvision.transforms.v2's
// TrivialAugmentWide, RandAugment, AutoAugment and AugMix, and timm's
// RandAugment, AutoAugment and AugMix, each under its own name, never mixed
// up with torchvision's.
//
// In: a policy op's arguments (Params: the pipeline's Op fields it reads)
// and the output size it runs at (New). Out: per sample, drawn from the
// sample's generator (det.RNG), the functional steps (fn.Step) it applies
// (Draw), at most MaxSteps of them, costing at most MaxNs; so a policy
// costs no more than the ops it picks. The op table (pipeline/ops' policies.go)
// register them as ops; a policy links the functional ops (pipeline/fn),
// the kernels' names (pipeline/kernels) and the pipeline's internals,
// never the pipeline's root, its ops or its codec.
package policy
