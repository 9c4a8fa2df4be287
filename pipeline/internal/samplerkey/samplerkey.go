// Package samplerkey is the key to a Transform's side for the Decoder
// (pipeline/transform's Transform.Sampler: the multi-image ops' draws,
// sizes and scratch bounds, the transform of an epoch; the sample's plan
// itself is Transform.Plan's, public). Being internal, only the
// pipeline's own packages can name a Key, and TestArrows lets the
// pipeline's root alone import it (besides pipeline/transform, which asks
// for it): a server, a command or a client reads a Transform through its
// own methods (Plan, Size, Shape, Cost, Trace, String, ...).
package samplerkey

// Key opens Transform.Sampler; it has no size. Its field, unexported,
// keeps a value of it from being written outside the pipeline under
// another type's name (a struct{}{} is not a Key).
type Key struct{ key struct{} }
