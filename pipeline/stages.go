package pipeline

import "time"

// StageTimes is where the time of making one batch went: each stage's
// time summed over the batch's samples, and the batch's own wall time. An
// Executor that times its stages (WithStageObserver) fills a Batch's
// Times; a batch made without timing has zero Times.
type StageTimes struct {
	// Queue is the time samples waited in their queue for a worker (a
	// core); Read the time reading their bytes (a file, or a store's
	// answer: a read-ahead in flight is waited for here); Decode the time
	// decoding them, with the crop, resize, flip and pack that the
	// libjpeg-turbo path does in the same pass; Transform the time of the
	// ops applied to the decoded pixels after it (ColorJitter, Normalize).
	Queue, Read, Decode, Transform time.Duration
	// Wall is the batch's time from being queued to its last sample made.
	Wall time.Duration
}

// Sum is the stages' time together: the samples' time from being queued
// to being made, summed over the samples.
func (s StageTimes) Sum() time.Duration { return s.Queue + s.Read + s.Decode + s.Transform }

// add adds one sample's stage times.
func (s *StageTimes) add(queue, read, decode, transform time.Duration) {
	s.Queue += queue
	s.Read += read
	s.Decode += decode
	s.Transform += transform
}
