// Package server is stoker's gRPC side: the FeedService that trainers open
// jobs on, with the coordinator and the local executor behind it.
//
// What goes in: a Config naming datasets (name → path or object-storage
// URL, with an optional manifest; clients only ever see names), and per Feed stream an OpenJob: dataset, transform (a preset
// or an op list), batch size, seed, shuffle, epoch, rank and world size,
// drop_last, layout, fail policy, credits and start_batch.
//
// What comes out, per stream: a JobInfo; then for each batch number
// start_batch..batches-1 (in order, or as ready when as_ready) a
// BatchHeader — shape [N, 3, H, W] (NCHW, the default) or [N, H, W, 3],
// dtype uint8 (float32 little-endian after Normalize), labels and dataset
// indices int64, the samples that failed with their reasons — followed by
// its pixels in Chunks of at most MaxChunkBytes; then an EpochEnd that
// counts what this stream sent (batches, samples, sample errors); then the
// stream closes with OK.
//
// Batch k of an epoch is a pure function of (job, epoch, k): the sample
// list comes from Plan, every random choice from pipeline's counter-based
// RNG keyed by (seed, epoch, index). A resumed stream (start_batch > 0)
// sends the same bytes the full epoch would have from there on.
//
// Flow control: the server sends a batch only while the trainer's credits
// (OpenJob.credits plus every Credit.credits since) exceed the batches sent.
// A stream makes at most Config.Window batches at once and holds at most
// Window + min(initial credits, Window) batch buffers, reused.
//
// A sample that cannot be made is listed in its batch's errors and padded
// from the batch's good samples (or dropped, by fail policy); a batch whose
// every sample failed goes out with N = 0, unless the store did not answer
// (storedown.go): then the batch fails, and the job with UNAVAILABLE once
// it failed on every try. Request errors are status codes:
// NotFound for an unknown dataset, InvalidArgument for a bad request,
// ResourceExhausted for limits; pipeline errors map through one table
// (errors.go).
package server
