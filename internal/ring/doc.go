// Package ring is the trainer's side of shared-memory delivery (Linux):
// the boot id a trainer proposes the ring with, the handshake on the
// server's abstract socket that hands over the ring's memfd, and the
// read-only mapping of its slots.
package ring
