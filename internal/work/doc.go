// Package work is both ends of the Work protocol, by which a coordinator
// leases batches to other stoker servers (workers) over one bidirectional
// gRPC stream per worker.
//
// The coordinator's side is Peer: it keeps one Work stream open to a
// worker (reconnecting with back-off), registers jobs on it, sends leases
// (batch number and sample indices), and reassembles the batches that
// come back. It checks the framing of what the worker sends (sizes,
// offsets, counts); the content is checked by the coordinator, which alone
// knows the plan.
//
// The worker's side is Worker: it serves Work streams, makes each lease
// on its server's executor (through Host) and sends the batch back as a
// LeaseDone header and chunks, or a LeaseFailed whose status code says
// whether the job is refused, the worker busy or draining.
//
// A lease is internal/lease's Lease, the one lease type, from a
// coordinator to any maker and from a Work stream to the executor;
// leaseErrors is the one table from a LeaseFailed's code to the sentinel
// errors (internal/lease's) that Make returns.
package work
