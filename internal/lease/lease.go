// Package lease is what a coordinator and its makers say to each other
// about one batch: the Lease asked for, what a maker answers beside the
// batch (Made), and the errors by which a maker turns a lease away without
// failing it. It imports nothing but the standard library, so that the
// coordinator and the makers share it without sharing their transports:
// the local executor and the Work protocol's Peer (internal/work) both
// take a Lease, the coordinator (server/internal/coord) knows no gRPC.
package lease

import "errors"

// Lease is one batch a coordinator asks a maker for: the local executor,
// or a worker over a Work stream. The same type goes to every maker and,
// on a worker, from the Work stream to its executor.
type Lease struct {
	Epoch  uint64
	Number int
	// Indices are the batch's samples, as the plan has them; shared, not
	// to be modified.
	Indices []int64
	// Copies, under repeated augmentation, is which copy of its sample
	// each of Indices is (each copy its own draw); nil without it.
	// Shared, not to be modified.
	Copies []uint32
	// Demand is the job's demand when leased, as its coordinator measured
	// it: a worker serving several coordinators divides a coordinator's
	// part of its cores among that coordinator's jobs by it (the stall
	// schedule).
	Demand Demand
	// Keep names the slots of the batch (places in it, ascending: pad
	// copies are slots of their own) a peer's batch is verified by, byte
	// for byte: a Peer copies their pixels aside as they arrive, out of
	// reach of the trainer whose ring slot the batch may be made in, and
	// answers them in Made.Kept. Makers on the coordinator's own server
	// ignore it.
	Keep []int
	// Place, when set, is where each of the lease's samples goes in the
	// batch buffer the maker is given (Place[i] for Indices[i], in
	// samples): a part of a batch leased by cache affinity, made straight
	// into its places in the whole batch, whose Data is the whole batch's
	// (its length kept). The batch's other fields (N, Labels, Indices,
	// Errors) are the lease's own, in the lease's order. Every maker
	// honours it.
	Place []int
	// Counted, when set, is for a maker whose Free counts its leases in
	// flight (a Peer): it calls it once its count holds the lease, before
	// its Make returns, and not for a lease it turns away as busy. Until
	// then the coordinator counts the lease against the maker's room
	// itself; it stops at Counted, or as Make returns. A maker whose Free
	// counts no leases calls it at once. Calling it again does nothing.
	// Call it through Count.
	Counted func()
}

// Count says that the maker's Free now counts l (Counted), if anyone
// asked to know.
func (l *Lease) Count() {
	if l.Counted != nil {
		l.Counted()
	}
}

// Demand is what a lease says of its job's need: its input stall and its
// trainer's GPU seconds per sample.
type Demand struct {
	// Stall is the fraction of the job's recent wall time its trainer
	// waited for input, 0..1.
	Stall float64
	// Work is the GPU seconds the trainer spends per sample; 0: unknown.
	Work float64
}

// Made is what a maker answers of a lease beside the batch itself.
type Made struct {
	// Kept are the pixels of the lease's Keep slots as they arrived
	// (Kept[i] for Keep[i]; nil for a slot the batch does not have): a
	// Peer's, for the coordinator's verifier. Nil from a maker on the
	// coordinator's own server.
	Kept [][]byte
}

// ErrRefused marks a maker's refusal of a job: unknown dataset, another
// fingerprint, a spec or batch it will not make. Asking it again for the
// same job gets the same answer.
var ErrRefused = errors.New("job refused")

// ErrBusy marks a lease turned away because the maker has as many leases
// in flight as it takes (from all of its jobs): not a failure, the batch
// is simply to be leased again, here later or elsewhere.
var ErrBusy = errors.New("peer busy")

// ErrDraining marks a lease turned away, or ended, because the maker is
// shutting down (it finishes the leases in flight and takes no new one):
// not a failure, the batch is to be leased elsewhere.
var ErrDraining = errors.New("peer draining")

// ErrJobFailed marks a maker's failure that ends the job at once rather
// than the batch's lease being tried again: what any try would find
// again (the job's samples measured past the server's bound on their
// CPU). The error that carries it is what the trainer is told.
var ErrJobFailed = errors.New("job failed")
