package work

import (
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Lease is one batch a coordinator asks a maker for: the local executor,
// or a worker over a Work stream. The same type goes to every maker and,
// on a worker, from the Work stream to its executor.
type Lease struct {
	Epoch  uint64
	Number int
	// Indices are the batch's samples, as the plan has them; shared, not
	// to be modified.
	Indices []int64
	// Demand is the job's input stall and its trainer's GPU seconds per
	// sample when leased (0: unknown), as its coordinator measured them.
	// A worker serving several coordinators divides a coordinator's part
	// of its cores among that coordinator's jobs by them, believing no
	// more stall than it measured of each (the stall schedule).
	Demand pipeline.JobDemand
	// Keep names the slots of the batch (places in it, ascending: pad
	// copies are slots of their own) a peer's batch is verified by, byte
	// for byte: a Peer copies their pixels aside as they arrive, into
	// Kept[i] for Keep[i] (nil for a slot the batch does not have), out of
	// reach of the trainer whose ring slot the batch may be made in.
	// Makers on the coordinator's own server ignore them.
	Keep []int
	Kept [][]byte
	// Place, when set, is where each of the lease's samples goes in the
	// batch buffer a Peer is given (Place[i] for Indices[i], in samples):
	// a part of a batch leased by cache affinity is copied from gRPC's
	// receive buffers straight to its places in the whole batch, whose
	// Data is the whole batch's (its length kept). The batch's other
	// fields are the lease's own. Makers on the coordinator's own server
	// are not given it.
	Place []int
}

// Job is a job as a coordinator registers it on its peers' Work streams.
type Job struct {
	// Spec is the trainer's spec with the dataset's fingerprint set, so
	// that a worker with other data refuses it. A Peer registers each
	// distinct *Job once per stream.
	Spec *stokerv1.JobSpec
	// SampleBytes is one sample's size: a batch may not be larger than
	// its lease's samples.
	SampleBytes int
}
