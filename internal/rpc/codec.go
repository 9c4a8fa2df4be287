package rpc

import (
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Codec is protobuf, as gRPC's own codec is, but for the messages that
// carry pixels: an OutChunk is framed here and its pixels handed to gRPC
// where they lie (no copy into a marshalled message), and a Received keeps
// a received chunk's pixels in gRPC's receive buffers for the caller to
// copy once, to where they go. The bytes on the wire are protobuf's own, so
// that peers and trainers using gRPC's codec (older stoker, the Python
// client's zero-copy parser) read and write the same messages. Servers run
// under it (grpc.ForceServerCodecV2), a coordinator's Work streams too
// (grpc.ForceCodecV2); its name is "proto", the content-subtype gRPC's codec
// goes by.
var Codec encoding.CodecV2 = codec{base: encoding.GetCodecV2(grpcproto.Name)}

// ChunkField is the field number of the chunk in the responses that carry
// pixels: FeedResponse.chunk and WorkResponse.chunk.
const ChunkField = 3

type codec struct{ base encoding.CodecV2 }

func (codec) Name() string { return grpcproto.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if o, ok := v.(*OutChunk); ok {
		return o.marshal(), nil
	}
	return c.base.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*Received)
	if !ok {
		return noteTooDeep(v, v, c.base.Unmarshal(data, v))
	}
	r.Free()
	r.Chunk, r.Number, r.Offset = false, 0, 0
	if r.parseChunk(data) {
		data.Ref() // gRPC frees its own reference when Unmarshal returns
		r.data, r.Chunk = data, true
		return nil
	}
	if r.Msg == nil {
		return errors.New("rpc.Received: no Msg to parse a response into")
	}
	proto.Reset(r.Msg)
	return noteTooDeep(r, r.Msg, c.base.Unmarshal(data, r.Msg))
}

// OutChunk is a Chunk sent as field ChunkField of its stream's response,
// its Data not copied: Marshal hands Data's reference to gRPC, which frees
// it once the bytes are in the connection's write buffer (or the stream is
// gone). Send it with the stream's SendMsg.
type OutChunk struct {
	Number, Offset uint64
	Data           mem.Buffer
}

// marshal is protobuf's encoding of the response holding the chunk (fields
// in number order, zero values left out, as proto.Marshal writes them),
// with Data as the last buffer.
func (o *OutChunk) marshal() mem.BufferSlice {
	n := o.Data.Len()
	inner := 0
	if o.Number != 0 {
		inner += 1 + protowire.SizeVarint(o.Number)
	}
	if o.Offset != 0 {
		inner += 1 + protowire.SizeVarint(o.Offset)
	}
	if n > 0 {
		inner += 1 + protowire.SizeBytes(n)
	}
	h := make([]byte, 0, 1+protowire.SizeVarint(uint64(inner))+inner-n)
	h = protowire.AppendTag(h, ChunkField, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(inner))
	if o.Number != 0 {
		h = protowire.AppendTag(h, 1, protowire.VarintType)
		h = protowire.AppendVarint(h, o.Number)
	}
	if o.Offset != 0 {
		h = protowire.AppendTag(h, 2, protowire.VarintType)
		h = protowire.AppendVarint(h, o.Offset)
	}
	if n == 0 {
		o.Data.Free()
		return mem.BufferSlice{mem.SliceBuffer(h)}
	}
	h = protowire.AppendTag(h, 3, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(n))
	return mem.BufferSlice{mem.SliceBuffer(h), o.Data}
}

// Received is a response read through Codec (RecvMsg(&r)). A chunk (field
// ChunkField, a Chunk message) is not parsed into Msg: Chunk is set, Number
// and Offset are read, and its pixels stay in gRPC's receive buffers,
// referenced until Free, for CopyTo. Anything else, and a chunk encoded
// other than as protobuf writes it (an unknown field in it), is parsed into
// Msg by protobuf. A Received may be reused; reading into it frees what it
// held.
type Received struct {
	// Msg is the stream's response type, reset and filled when the message
	// is not taken as a chunk.
	Msg            proto.Message
	Chunk          bool
	Number, Offset uint64

	data     mem.BufferSlice // the whole message, referenced
	off, len int             // the pixels in data
}

// Len is the size of a chunk's pixels.
func (r *Received) Len() int { return r.len }

// CopyTo copies the chunk's pixels from at, len(dst) of them, into dst.
func (r *Received) CopyTo(dst []byte, at int) {
	if at < 0 || at+len(dst) > r.len {
		panic(fmt.Sprintf("rpc.Received: copy of [%d, %d) from a chunk of %d bytes", at, at+len(dst), r.len))
	}
	skip := r.off + at
	for _, b := range r.data {
		if len(dst) == 0 {
			return
		}
		d := b.ReadOnlyData()
		if skip >= len(d) {
			skip -= len(d)
			continue
		}
		n := copy(dst, d[skip:])
		dst, skip = dst[n:], 0
	}
}

// Free lets gRPC's buffers go.
func (r *Received) Free() {
	if r.data != nil {
		r.data.Free()
		r.data, r.off, r.len = nil, 0, 0
	}
}

// parseChunk reads a message that is one field ChunkField holding a Chunk
// (number 1, offset 2, data 3), locating its data without copying it. false
// for anything else: protobuf parses it.
func (r *Received) parseChunk(data mem.BufferSlice) bool {
	c := cursor{bufs: data}
	total := data.Len()
	tag, ok := c.varint()
	if !ok || tag != uint64(ChunkField)<<3|uint64(protowire.BytesType) {
		return false
	}
	size, ok := c.varint()
	if !ok || uint64(c.pos)+size != uint64(total) {
		return false
	}
	var number, offset uint64
	off, n := c.pos, 0
	for c.pos < total {
		tag, ok := c.varint()
		if !ok {
			return false
		}
		switch tag {
		case 1<<3 | uint64(protowire.VarintType):
			number, ok = c.varint()
		case 2<<3 | uint64(protowire.VarintType):
			offset, ok = c.varint()
		case 3<<3 | uint64(protowire.BytesType):
			var l uint64
			if l, ok = c.varint(); ok && l <= uint64(total-c.pos) {
				off, n = c.pos, int(l) // a repeated field: the last wins, as in protobuf
				ok = c.skip(int(l))
			} else {
				ok = false
			}
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	r.Number, r.Offset, r.off, r.len = number, offset, off, n
	return true
}

// cursor reads a BufferSlice from its start without copying it.
type cursor struct {
	bufs mem.BufferSlice
	i    int    // the buffer being read
	cur  []byte // what is left of it
	pos  int    // bytes read in all
}

func (c *cursor) byte() (byte, bool) {
	for len(c.cur) == 0 {
		if c.i >= len(c.bufs) {
			return 0, false
		}
		c.cur = c.bufs[c.i].ReadOnlyData()
		c.i++
	}
	b := c.cur[0]
	c.cur = c.cur[1:]
	c.pos++
	return b, true
}

func (c *cursor) varint() (uint64, bool) {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		b, ok := c.byte()
		if !ok {
			return 0, false
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, true
		}
	}
	return 0, false
}

func (c *cursor) skip(n int) bool {
	for n > 0 {
		if len(c.cur) == 0 {
			if c.i >= len(c.bufs) {
				return false
			}
			c.cur = c.bufs[c.i].ReadOnlyData()
			c.i++
			continue
		}
		k := min(n, len(c.cur))
		c.cur, c.pos, n = c.cur[k:], c.pos+k, n-k
	}
	return true
}

// A Pin lends one buffer to gRPC in pieces (the Data of OutChunks) and
// calls its release once gRPC has let go of every piece and the lender
// called Done: only then may the buffer be written again. gRPC lets go of
// a piece once it is in the connection's write buffer, before the bytes
// leave, or when the stream is gone; a piece still queued on a connection
// that broke may never be let go, so release must not be needed for
// anything but reusing the buffer.
type Pin struct {
	refs    atomic.Int64
	release func()
}

// NewPin returns a Pin that calls release (from whichever goroutine lets
// go last: it must not block) once Done was called and every piece is let
// go.
func NewPin(release func()) *Pin {
	p := &Pin{release: release}
	p.refs.Store(1)
	return p
}

// Buffer lends data (a reference, not a copy) for an OutChunk. A piece
// too small for gRPC to count its references is copied instead.
func (p *Pin) Buffer(data []byte) mem.Buffer {
	if mem.IsBelowBufferPoolingThreshold(len(data)) {
		return mem.SliceBuffer(append([]byte(nil), data...))
	}
	p.refs.Add(1)
	s := data[:len(data):len(data)]
	return mem.NewBuffer(&s, pinPool{p})
}

// Done drops the lender's own reference: the pieces lent are all there will be.
func (p *Pin) Done() { p.unref() }

func (p *Pin) unref() {
	switch n := p.refs.Add(-1); {
	case n == 0:
		p.release()
	case n < 0:
		panic("rpc.Pin: released more often than lent")
	}
}

// pinPool is the mem.BufferPool of a Pin's pieces: gRPC "puts back" a
// piece when it lets go of it.
type pinPool struct{ p *Pin }

func (pp pinPool) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (pp pinPool) Put(*[]byte) { pp.p.unref() }
