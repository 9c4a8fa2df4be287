// Package coord is stoker's coordinator: one job for one trainer's stream,
// from its epoch plans to the batches it hands out, in order and as the
// trainer's credits allow.
//
// What goes in: a Job (the plan of each epoch, the size of a batch), a
// Stream (where it starts, how many epochs, the credits granted up front,
// the stream's memory and, for a same-host trainer, its shared-memory
// ring), and an Env the server's coordinators share: the Makers, the
// metrics, the GPU's idle share and the Verifier of peers' batches.
//
// What comes out, on Out: an epoch's start (EpochStart: the server sends
// its JobInfo), its batches (by number, or as they are ready), its
// EpochEnd; then the next epoch. Batch k of an
// epoch is delivered exactly once whatever the makers do: a result for a
// lease that moved on, or for a batch already delivered, is dropped.
//
// In between, the coordinator leases batches to makers (the local
// executor, peers over Work streams) under a deadline, keeps a reorder
// buffer of made batches, collects failures and leases their batches again
// (a failed batch before any new one), quarantines a peer whose batch
// does not match, and runs the window controller (how many leases in
// flight) and the advisor (how many makers the trainer needs). It knows
// nothing of gRPC, the wire or the server (what it emits is its own
// types, status.go, which the server maps to the protocol's messages): its output is read by the Feed
// stream's send loop, its makers and verifier are the server's, and what
// it says to a maker is internal/lease's.
//
// Its shape: a loop (Run) around the lease table (table.go), a state
// machine of every batch's leases, failures and delivery that the loop
// steps with each event and whose decisions it carries out; decisions
// that are functions (choose, a route's Split); a lease given to a lessee,
// one maker or a batch in parts, the same way.
//
// Time is the clock's: tests run a coordinator inside a testing/synctest
// bubble, whose clock is fake, with makers that answer as the test says;
// the table alone has no clock, and FuzzExactlyOnce drives it.
package coord
