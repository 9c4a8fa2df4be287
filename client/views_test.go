package client_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/opspec"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// TestLoaderViews: a job of several views comes as each view's samples
// back to back, view after view, with each view's name, shape and place
// and a trace per view per sample; the same bytes through the server's
// ring as in chunks.
func TestLoaderViews(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr)
	s := spec(4)
	s.Trace = true
	crop := func(side uint32) *pb.TransformSpec {
		return &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("RandomResizedCrop", "size", int(side))}}
	}
	s.Transform = &pb.TransformSpec{Views: []*pb.ViewGroup{{Name: "global", Count: 2, Transform: crop(32)}, {Count: 1, Transform: crop(8)}}}
	chunks := drain(t, c.Loader(s, client.WithEpochs(1)))
	l := c.Loader(s, client.WithEpochs(1), client.WithSharedMemory(true))
	defer l.Close()
	ring := drain(t, l)
	if tr, why := l.Transport(); tr != "shm" {
		t.Fatalf("transport %s (%s), want shm", tr, why)
	}
	if len(chunks) == 0 || len(chunks) != len(ring) {
		t.Fatalf("%d batches in chunks, %d through the ring", len(chunks), len(ring))
	}
	for i, b := range chunks {
		sameBatch(t, fmt.Sprintf("batch %d", i), b, ring[i])
		n := uint32(len(b.Labels))
		if len(b.Views) != 3 || b.Views[0].Name != "global" || b.Views[2].Name != "" ||
			!slices.Equal(b.Views[1].Shape, []uint32{n, 3, 32, 32}) || !slices.Equal(b.Views[2].Shape, []uint32{n, 3, 8, 8}) {
			t.Fatalf("batch %d: views %+v", i, b.Views)
		}
		if off := b.Views[2].Offset; off != uint64(2*n*3*32*32) || len(b.ViewData(2)) != int(n*3*8*8) || b.Views[2].Offset+b.Views[2].Bytes != uint64(len(b.Data)) {
			t.Fatalf("batch %d: view 2 at %d, %d bytes of %d", i, off, len(b.ViewData(2)), len(b.Data))
		}
		for k := range b.Labels {
			ops, err := b.ViewTrace(k, 2)
			if err != nil || len(ops) != 1 || ops[0].Op != "resized_crop" || ops[0].Args["size"].([]any)[0] != 8.0 {
				t.Fatalf("batch %d sample %d view 2: %+v, %v", i, k, ops, err)
			}
		}
		if _, err := b.Trace(0); err == nil {
			t.Errorf("Trace of a batch of views: no error (ViewTrace)")
		}
	}
}
