package batch

import "time"

// Batch is samples packed back to back: Data holds N samples of the
// transform's SampleBytes each, in the transform's layout.
type Batch struct {
	N       int
	Data    []byte
	Labels  []int64
	Indices []int64
	Errors  []SampleError
	// Times is where making the batch took its time, by stage, on an
	// Executor that times its stages; a peer's batch carries what its
	// worker reported. Zero when not timed.
	Times StageTimes
	// Trace asks Fill for each sample's trace (what its ops drew, as JSON:
	// Decoder.AppendTrace) in Traces, in batch order; a failed sample's is
	// empty, and a sample padded in its place carries the trace of the
	// sample it copies. Traces' buffers are reused.
	Trace  bool
	Traces [][]byte
	// Copies, when set, is which copy of its sample each of Fill's
	// indices is (repeated augmentation: each copy its own draw, Key.Copy),
	// one per index; Fill reads it and leaves it as it is. Its samples'
	// files are admitted to the coefficient cache on their first decode,
	// for the copies that follow.
	Copies []uint32
	// FieldSet asks Fill for each sample's fields (FieldSet.Names) in
	// Fields, sample by sample in batch order: sample i's field f is
	// Fields[i*FieldSet.Len()+f] (SampleFields). A failed sample's are
	// empty, and a sample padded in its place carries the fields of the
	// sample it copies. Fields' buffers are reused.
	FieldSet FieldSpec
	Fields   []Field
	// Packed holds the ragged arrays of the samples' targets (a field of
	// Fields) as the header sent to a trainer or a coordinator carries
	// them, made from Fields as the header is (its buffer reused).
	Packed []byte
}

// SampleError reports a sample that could not be made. pipeline cuts
// Name and Reason to at most pipeline.MaxSampleErrorText bytes each:
// names come from outside input (a store's keys, a manifest's strings),
// and a batch carries up to one per sample.
type SampleError struct {
	Index  int64  // dataset index of the sample
	Name   string // its file, relative to the dataset root
	Reason string
	// Err wraps pipeline's ErrCorrupt, ErrTooLarge or ErrUnsupported (or
	// an I/O error); nil in a batch a peer sent, which carries the Reason
	// only.
	Err error
}

// StageTimes is where the time of making one batch went: each stage's
// time summed over the batch's samples, and the batch's own wall time. An
// Executor that times its stages (pipeline.WithStageObserver) fills a
// Batch's Times; a batch made without timing has zero Times.
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

// Add adds one sample's stage times (the wall time is the batch's, not
// added).
func (s *StageTimes) Add(t StageTimes) {
	s.Queue += t.Queue
	s.Read += t.Read
	s.Decode += t.Decode
	s.Transform += t.Transform
}
