// Package rpc is the gRPC plumbing stoker's trainers, coordinators and
// workers share: the buffer pool and transport buffer sizes, keepalive,
// and bearer-token credentials that refuse plaintext to remote hosts.
package rpc
