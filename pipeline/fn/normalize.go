package fn

// normalize: the packing's functional op (the class is
// pipeline/ops' normalize.go).

// Normalize is the packing's, no kernel after the decode; it costs an
// output pixel as float32 (a decode with it over one without).
var Normalize = define(Def{name: "normalize", args: []arg{{"mean", argFloat, 0, 3}, {"std", argFloat, 3, 3}},
	Ns: 7.4, check: noKernel, Role: TargetsPixels})
