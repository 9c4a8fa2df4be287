// Package client is the Go side of stoker's wire: a trainer's Loader over
// FeedService, and the coordinator's side of a peer's WorkService (Peer:
// leases out, batches in, failure detection).
//
// Batches are uint8 (or float32 after Normalize) pixels, NCHW by default,
// with int64 labels and dataset indices, exactly as the server made them:
// batch k of epoch e of a job is the same bytes whichever server, peer or
// local executor made it.
package client
