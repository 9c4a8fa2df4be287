// Package det is the deterministic maths every draw and byte of the
// pipeline rests on: the keyed counter-based generator (Key, RNG, its
// normal, gamma and Dirichlet draws), keyed permutations (the global
// shuffle's order), ultralytics' segment resampling, and Exp, Log, Sin,
// Cos and Tan computed without fused multiply-adds, so that every machine
// gives the same bytes. A leaf: the standard library only.
package det
