// Package server is stoker's gRPC side: the FeedService that trainers open
// jobs on, and the WorkService other servers' coordinators lease batches
// on, over the datasets of a Config. Each Feed stream's job is run by a
// coordinator (server/internal/coord) whose makers are this server's
// executor and its peers (internal/work); the server validates requests,
// bounds what clients may take, and adapts the coordinator's output to the
// stream.
//
// FeedService. What goes in: a Config naming datasets (name → path or
// object-storage URL, with an optional manifest; clients only ever see
// names), and per Feed stream an OpenJob: dataset, transform (a preset or
// an op list), batch size, seed, shuffle (global or block), epoch, rank and
// world size, drop_last, layout, fail policy, credits and start_batch.
//
// What comes out, per stream: a JobInfo; then for each batch number
// start_batch..batches-1 (in order, or as ready when as_ready) a
// BatchHeader — shape [N, 3, H, W] (NCHW, the default) or [N, H, W, 3],
// dtype uint8 (float32 little-endian after Normalize), labels and dataset
// indices int64, the samples that failed with their reasons — followed by
// its pixels in Chunks of at most MaxChunkBytes, or, for a trainer on this
// machine that took a shared-memory ring, naming the ring slot its pixels
// are in (the coordinator's buffer pool picks it); then an EpochEnd that counts what this stream sent (batches,
// samples, sample errors); then the stream closes with OK.
//
// Batch k of an epoch is a pure function of (job, epoch, k): the sample
// list comes from plan.Plan, every random choice from pipeline's counter-based
// RNG keyed by (seed, epoch, index). A resumed stream (start_batch > 0)
// sends the same bytes the full epoch would have from there on, whichever
// makers made them.
//
// Flow control: the server sends a batch only while the trainer's credits
// (OpenJob.credits plus every Credit.credits since) exceed the batches sent.
// A stream has at most its window of leases in flight (Config.Window, or
// the controller's between 1 and four per ready maker) and holds
// window + min(initial credits, window) batch buffers, reused, and past
// them one per hedge in flight (at most 8) and one for the batch delivery
// waits on when made batches hold all the others; the controller gives
// the extra ones back once they are free.
//
// WorkService. A coordinator (another stoker serve with --peers) opens one
// Work stream, registers its jobs on it and sends leases (a batch's number
// and sample indices); the server makes each on its executor and sends it
// back as a LeaseDone header and chunks, or a LeaseFailed whose code says
// whether the job is refused, the worker busy or draining. Its WorkerInfo
// names its decoder, which a coordinator compares with its own. Work
// streams are counted and bounded apart from Feed streams, and refused
// with --accept-work=false (the default with --peers) or --workers 0.
//
// A sample that cannot be made is listed in its batch's errors and padded
// from the batch's good samples (or dropped, by fail policy); a batch whose
// every sample failed goes out with N = 0, unless the store did not answer
// (storedown.go): then the batch fails, and the job with UNAVAILABLE once
// it failed on every try. Request errors are status codes:
// NotFound for an unknown dataset, InvalidArgument for a bad request,
// ResourceExhausted for limits; pipeline and coordinator errors map through
// one table (errors.go).
package server
