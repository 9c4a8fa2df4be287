// Package peer is a coordinator's side of a worker's WorkService: a Peer
// keeps one Work stream open to the worker (reconnecting with back-off),
// registers jobs on it, sends leases (batch number and sample indices) and
// reassembles the batches that come back. It checks the framing of what
// the worker sends (sizes, offsets, counts); the content is checked by the
// coordinator, which alone knows the plan.
package peer
