// Package client is what a Go trainer imports: New connects to a stoker
// server, Client.Loader opens a job's Feed stream, and Loader.Next returns
// its batches. Options are functional (With…), each naming its default.
//
// Batches are uint8 (or float32 after Normalize) pixels, NCHW by default,
// with int64 labels and dataset indices, exactly as the server made them:
// batch k of epoch e of a job is the same bytes whichever server, peer or
// local executor made it.
//
// The Work protocol between servers (internal/work), the GPU monitor
// (internal/gpu), the gRPC buffer pool and token credentials
// (internal/rpc) and the shared-memory ring handshake (internal/ring) are
// not for trainers and live under internal/.
package client
