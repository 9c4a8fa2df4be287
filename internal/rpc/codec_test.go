package rpc

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestChunkField: the responses OutChunk and Received stand for carry their
// Chunk as field ChunkField, and Chunk is number 1, offset 2, data 3.
func TestChunkField(t *testing.T) {
	for _, m := range []proto.Message{&stokerv1.FeedResponse{}, &stokerv1.WorkResponse{}} {
		f := m.ProtoReflect().Descriptor().Fields().ByName("chunk")
		if f == nil || f.Number() != ChunkField || f.Message().FullName() != "stoker.v1.Chunk" {
			t.Errorf("%T.chunk: %v", m, f)
		}
	}
	c := (&stokerv1.Chunk{}).ProtoReflect().Descriptor().Fields()
	for name, num := range map[protoreflect.Name]protoreflect.FieldNumber{"number": 1, "offset": 2, "data": 3} {
		if f := c.ByName(name); f == nil || f.Number() != num {
			t.Errorf("Chunk.%s: %v, want field %d", name, f, num)
		}
	}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + 7)
	}
	return b
}

var chunkCases = []struct {
	name           string
	number, offset uint64
	size           int
}{
	{"empty", 0, 0, 0},
	{"zero fields", 0, 0, 4096},
	{"small, copied", 3, 9, 100},
	{"large varints", 1 << 40, 1<<63 + 5, 5000},
	{"a whole chunk", 17, 4 << 20, 4<<20 - 1<<10},
}

// TestOutChunkIsProtobuf: an OutChunk goes on the wire exactly as
// proto.Marshal writes the WorkResponse (and the FeedResponse) holding the
// chunk, so that any protobuf reader (an older coordinator, the Python
// client's parser) reads it.
func TestOutChunkIsProtobuf(t *testing.T) {
	for _, tc := range chunkCases {
		t.Run(tc.name, func(t *testing.T) {
			data := pattern(tc.size)
			pin := NewPin(func() {})
			out, err := Codec.Marshal(&OutChunk{Number: tc.number, Offset: tc.offset, Data: pin.Buffer(data)})
			if err != nil {
				t.Fatal(err)
			}
			got := out.Materialize()
			out.Free()
			pin.Done()
			c := &stokerv1.Chunk{Number: tc.number, Offset: tc.offset, Data: data}
			for _, m := range []proto.Message{
				&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Chunk{Chunk: c}},
				&stokerv1.FeedResponse{Msg: &stokerv1.FeedResponse_Chunk{Chunk: c}},
			} {
				want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%T: OutChunk marshals to %d bytes %x…, protobuf to %d bytes %x…", m, len(got), got[:min(len(got), 24)], len(want), want[:min(len(want), 24)])
				}
			}
		})
	}
}

// countingPool counts the buffers handed back: a stand-in for gRPC's pool
// that shows whether Received lets every buffer go.
type countingPool struct{ put atomic.Int64 }

func (p *countingPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (p *countingPool) Put(*[]byte)       { p.put.Add(1) }

// split cuts data into buffers of at most n bytes, each counted by pool
// when let go.
func split(data []byte, n int, pool mem.BufferPool) mem.BufferSlice {
	var s mem.BufferSlice
	for len(data) > 0 {
		k := min(n, len(data))
		b := append(make([]byte, 0, max(k, 2<<10)), data[:k]...) // above gRPC's threshold for counting references
		s = append(s, mem.NewBuffer(&b, pool))
		data = data[k:]
	}
	return s
}

// TestReceivedChunk: a chunk, however gRPC's frames cut it, is read as one
// without copying: its fields, and its pixels from any offset; it holds
// gRPC's buffers until Free.
func TestReceivedChunk(t *testing.T) {
	for _, tc := range chunkCases {
		for _, cut := range []int{1, 7, 16384, 1 << 30} {
			if cut < 100 && tc.size > 10000 {
				continue // millions of buffers
			}
			data := pattern(tc.size)
			wire, err := proto.Marshal(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Chunk{Chunk: &stokerv1.Chunk{Number: tc.number, Offset: tc.offset, Data: data}}})
			if err != nil {
				t.Fatal(err)
			}
			pool := &countingPool{}
			bufs := split(wire, cut, pool)
			r := Received{Msg: &stokerv1.WorkResponse{}}
			if err := Codec.Unmarshal(bufs, &r); err != nil {
				t.Fatal(err)
			}
			bufs.Free() // gRPC's reference, let go when Unmarshal returns
			if !r.Chunk || r.Number != tc.number || r.Offset != tc.offset || r.Len() != tc.size {
				t.Fatalf("%s, cut %d: chunk %v, number %d, offset %d, %d bytes", tc.name, cut, r.Chunk, r.Number, r.Offset, r.Len())
			}
			if tc.size > 0 && pool.put.Load() != 0 {
				t.Fatalf("%s, cut %d: gRPC's buffers let go while the chunk holds them", tc.name, cut)
			}
			for _, at := range []int{0, 1, tc.size / 3, tc.size - 1} {
				if at < 0 || at > tc.size {
					continue
				}
				dst := make([]byte, min(tc.size-at, 20000))
				r.CopyTo(dst, at)
				if !bytes.Equal(dst, data[at:at+len(dst)]) {
					t.Fatalf("%s, cut %d: CopyTo at %d differs", tc.name, cut, at)
				}
			}
			r.Free()
			if got, want := pool.put.Load(), int64(len(bufs)); got != want {
				t.Fatalf("%s, cut %d: %d of %d buffers let go after Free", tc.name, cut, got, want)
			}
		}
	}
}

// TestReceivedOther: what is not a chunk as protobuf writes one is parsed
// by protobuf into Msg, a chunk with a field Received does not know
// included.
func TestReceivedOther(t *testing.T) {
	done := &stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Done{Done: &stokerv1.LeaseDone{Lease: 4, Batch: &stokerv1.BatchHeader{Labels: []int64{1, 2}, DataBytes: 6}}}}
	chunk := &stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Chunk{Chunk: &stokerv1.Chunk{Number: 2, Data: []byte("pixels")}}}
	unknown, err := proto.Marshal(chunk)
	if err != nil {
		t.Fatal(err)
	}
	// Field 9 (varint 1) inside the chunk: a newer sender's.
	unknown = append([]byte{unknown[0], unknown[1] + 2}, append(unknown[2:], 9<<3, 1)...)
	for _, tc := range []struct {
		name string
		wire []byte
		want proto.Message
	}{
		{"lease done", must(proto.Marshal(done)), done},
		{"chunk with an unknown field", unknown, chunk},
		{"empty", nil, &stokerv1.WorkResponse{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Received{Msg: &stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Failed{}}} // reset first
			if err := Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.wire)}, &r); err != nil {
				t.Fatal(err)
			}
			got := r.Msg.(*stokerv1.WorkResponse)
			if c := got.GetChunk(); c != nil {
				got = &stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Chunk{Chunk: &stokerv1.Chunk{Number: c.Number, Offset: c.Offset, Data: c.Data}}} // its unknown field dropped
			}
			if r.Chunk || !proto.Equal(got, tc.want) {
				t.Errorf("chunk %v, msg %v; want %v", r.Chunk, r.Msg, tc.want)
			}
		})
	}
	r := Received{Msg: &stokerv1.WorkResponse{}}
	if err := Codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer{0x1a, 0x05, 0x08}}, &r); err == nil {
		t.Error("a truncated message parsed")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestPin: release comes once, after Done and after every piece is let
// go, whichever is last; a piece too small to count is a copy.
func TestPin(t *testing.T) {
	var released atomic.Int64
	p := NewPin(func() { released.Add(1) })
	data := pattern(10 << 10)
	a, b := p.Buffer(data[:4<<10]), p.Buffer(data[4<<10:])
	small := p.Buffer(data[:10])
	if &small.ReadOnlyData()[0] == &data[0] {
		t.Error("a small piece is not a copy")
	}
	if &a.ReadOnlyData()[0] != &data[0] {
		t.Error("a piece is a copy")
	}
	p.Done()
	a.Free()
	if released.Load() != 0 {
		t.Fatal("released while a piece is lent")
	}
	c := b.Slice(1, 100) // gRPC splits pieces into frames
	b.Free()
	if released.Load() != 0 {
		t.Fatal("released while a slice of a piece is lent")
	}
	c.Free()
	small.Free()
	if released.Load() != 1 {
		t.Fatalf("released %d times, want once", released.Load())
	}
}

// workerOf is a WorkService on loopback, under Codec, whose Work sends
// the chunks of data lent through a Pin (as server.Work does) and closes
// released when gRPC let go of them.
type workerOf struct {
	stokerv1.UnimplementedWorkServiceServer
	data     []byte
	released chan struct{}
}

func (w *workerOf) Work(stream stokerv1.WorkService_WorkServer) error {
	pin := NewPin(func() { close(w.released) })
	defer pin.Done()
	const chunk = 100 << 10
	for off := 0; off < len(w.data); off += chunk {
		c := &OutChunk{Number: 1, Offset: uint64(off), Data: pin.Buffer(w.data[off:min(off+chunk, len(w.data))])}
		if err := stream.SendMsg(c); err != nil {
			return err
		}
	}
	return nil
}

// TestCodecOverGRPC: a server under Codec sends lent pixels; a client
// under Codec (a coordinator) reads them through Received, one under
// gRPC's own codec (an older coordinator) as protobuf, the same bytes; and
// the pixels are let go.
func TestCodecOverGRPC(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ForceServerCodecV2(Codec))
	w := &workerOf{data: pattern(1<<20 + 333)}
	stokerv1.RegisterWorkServiceServer(gs, w)
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ours := range []bool{true, false} {
		w.released = make(chan struct{})
		var opts []grpc.CallOption
		if ours {
			opts = append(opts, grpc.ForceCodecV2(Codec))
		}
		stream, err := stokerv1.NewWorkServiceClient(conn).Work(ctx, opts...)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 0, len(w.data))
		for {
			if ours {
				r := Received{Msg: &stokerv1.WorkResponse{}}
				if err := stream.RecvMsg(&r); err != nil {
					break
				}
				if !r.Chunk || r.Offset != uint64(len(got)) {
					t.Fatalf("codec: chunk %v at %d, have %d bytes", r.Chunk, r.Offset, len(got))
				}
				n := len(got)
				got = got[:n+r.Len()]
				r.CopyTo(got[n:], 0)
				r.Free()
				continue
			}
			m, err := stream.Recv()
			if err != nil {
				break
			}
			if c := m.GetChunk(); c == nil || c.GetOffset() != uint64(len(got)) {
				t.Fatalf("protobuf: %v, have %d bytes", m, len(got))
			}
			got = append(got, m.GetChunk().GetData()...)
		}
		if !bytes.Equal(got, w.data) {
			t.Errorf("codec %v: %d bytes received, differing from the %d sent", ours, len(got), len(w.data))
		}
		select {
		case <-w.released:
		case <-ctx.Done():
			t.Fatal("the pixels lent to gRPC were never let go")
		}
	}
}
