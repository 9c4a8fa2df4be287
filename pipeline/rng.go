package pipeline

import "github.com/stoker-dev/stoker/pipeline/internal/det"

// Key names one sample of one epoch of one job. Everything random about the
// sample is a pure function of its Key (det.Key: the keyed generator lives
// with the rest of the deterministic maths, in pipeline/internal/det).
type Key = det.Key

// RNG is a counter-based generator: value n of stream s is a hash of (key,
// s, n), the same on any machine and in any order of evaluation (det.RNG).
type RNG = det.RNG
