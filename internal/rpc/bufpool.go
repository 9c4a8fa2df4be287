package rpc

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
)

// BufferPool is the gRPC buffer pool stoker's clients and servers use: one
// sync.Pool per power of two from 256 B to 8 MiB. Unlike gRPC's default
// pools it does not zero a buffer it hands out again: gRPC reads a message
// into the whole buffer, or marshals into the whole of it, before anything
// looks at it. Zeroing every 4 MiB chunk buffer cost the coordinator
// relaying batches from peers about a seventh of its CPU.
var BufferPool = newBufferPool()

const (
	minPoolShift = 8
	maxPoolShift = 23
)

type bufferPool struct {
	classes [maxPoolShift - minPoolShift + 1]sync.Pool
}

func newBufferPool() *bufferPool { return &bufferPool{} }

// class is the index of the smallest class holding n bytes, or -1.
func class(n int) int {
	if n <= 1<<minPoolShift {
		return 0
	}
	shift := bits.Len(uint(n - 1))
	if shift > maxPoolShift {
		return -1
	}
	return shift - minPoolShift
}

// Get returns a buffer of length n, from the pool when it has one.
func (p *bufferPool) Get(n int) *[]byte {
	c := class(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(c+minPoolShift))
	return &b
}

// Put returns a buffer got from Get.
func (p *bufferPool) Put(b *[]byte) {
	c := class(cap(*b))
	if c < 0 || cap(*b) != 1<<(c+minPoolShift) {
		return // not one of ours
	}
	*b = (*b)[:0]
	p.classes[c].Put(b)
}

// transportBuffer is the size of a connection's read and write buffers: a
// 4 MiB chunk takes 16 system calls instead of gRPC's default 128.
const transportBuffer = 256 << 10

// DialBuffers are the dial options for the pool and the buffer sizes.
func DialBuffers() []grpc.DialOption {
	return []grpc.DialOption{
		experimental.WithBufferPool(BufferPool),
		grpc.WithReadBufferSize(transportBuffer),
		grpc.WithWriteBufferSize(transportBuffer),
	}
}

// ServerBuffers are the server options for the pool and the buffer sizes.
func ServerBuffers() []grpc.ServerOption {
	return []grpc.ServerOption{
		experimental.BufferPool(BufferPool),
		grpc.ReadBufferSize(transportBuffer),
		grpc.WriteBufferSize(transportBuffer),
	}
}
