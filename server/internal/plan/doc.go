// Package plan is the epoch plan, a pure function of the job, the epoch
// and the rank: the global shuffle (a keyed Feistel permutation), the
// block shuffle, repeated augmentation and a mix's draws, cut into each
// rank's batches, the same on every machine.
package plan
