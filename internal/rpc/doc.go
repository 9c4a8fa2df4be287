// Package rpc is the gRPC plumbing stoker's trainers, coordinators and
// workers share: the buffer pool and transport buffer sizes, keepalive,
// bearer-token credentials that refuse plaintext to remote hosts, and the
// codec that sends and receives batches' pixels without protobuf's copies
// (protobuf's bytes on the wire all the same).
package rpc
