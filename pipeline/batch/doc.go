// Package batch is what a made batch is: samples packed back to back,
// with their labels and dataset indices, the samples that failed, and
// where the making took its time.
//
// What goes in and out: a Batch's Data holds N samples of the job's
// sample size each, in its transform's layout (uint8 or float32, CHW or
// HWC), as pipeline's Executor fills it, a peer's worker sends it, or a
// batch in parts is put together.
//
// It imports only the standard library, so that what holds batches
// without making them (the coordinator, server/internal/coord) links no
// decoder, no object-store client and no RPC. pipeline re-exports its
// types under their old names (pipeline.Batch is batch.Batch).
package batch
