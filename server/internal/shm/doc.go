// Package shm is same-host delivery's shared memory: the hub that hands a
// ring's memfd to the trainer that holds its token, on an abstract Unix
// socket, without letting a neighbor deny it (Hub, Linux only; elsewhere
// NewHub says why there is none), and a stream's ring of batch-sized
// slots in a sealed memfd with its bookkeeping (Ring, a coord.Ring: free,
// filling, sent), RingSlots sizing it. The server's Feed handler makes the
// offer and the handshake; the coordinator's buffer pool fills the slots.
package shm
