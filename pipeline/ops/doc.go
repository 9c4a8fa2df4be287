// Package ops is the pipeline's op table (as DALI's operator registry, and
// torchvision.transforms.v2's classes over its functional ops): Op, an op
// with torchvision's arguments, and OpKind; the registry of op
// definitions (Def, Define, Lookup) with their schemas (Param,
// OpSchemas, NamedOp); the compiler of an op list into Nodes and the
// Drawer a sample's steps are drawn into (Node.Draw, Drawer.Emit); and
// the families that only draw steps: blur, boxes, channel permutation,
// color, containers, erase, flip, normalize, point ops and the policies.
//
// In: ops (Op) and the output size they compile for. Out: per sample,
// drawn from its generator (det.RNG), the functional steps (fn.Step) the
// kernels run, each op's worst cost, its schema for the wire and the
// docs. The geometry (the first op, fused into the decode) and its
// families (crops, resizes, warps, detection's, the mosaic) live with the
// Transform in pipeline/transform, which registers them here; the
// pipeline's root names this package's types as before (ops.Op,
// ops.OpKind, the Op* kinds). Its tests draw each family's compiled
// node as a Transform does, without one. Of the module it imports the functional ops (pipeline/fn), the
// policies (pipeline/policy), the kernels' and targets' names, the
// batch's (pipeline/batch) and the pipeline's internals: never the root,
// nor the codec (TestArrows).
package ops
