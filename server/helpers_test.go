package server

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stoker-dev/stoker/internal/ragged"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// makeDataset writes an ImageFolder of small JPEGs into a temporary folder:
// per class, n images of 64..95 px with distinct content, plus, when bad,
// one zero-byte "bad.jpg" in the last class.
func makeDataset(t testing.TB, classes []string, perClass int, bad bool) string {
	t.Helper()
	root := t.TempDir()
	for ci, class := range classes {
		dir := filepath.Join(root, class)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range perClass {
			w, h := 64+(i*7)%32, 64+(i*13)%32
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			for y := range h {
				for x := range w {
					img.Set(x, y, color.RGBA{uint8(x*4 + i*9), uint8(y*4 + ci*80), uint8((x*y + i*31) % 256), 255})
				}
			}
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("img%02d.jpg", i)))
			if err != nil {
				t.Fatal(err)
			}
			if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 90}); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if bad && ci == len(classes)-1 {
			if err := os.WriteFile(filepath.Join(dir, "bad.jpg"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// hangGuard is how long a test waits for something that is bound to
// happen (a server settling, a peer connecting) before it calls the wait
// a hang: long enough for a loaded machine under the race detector, so
// that it only ever turns a hang into a failure, never measures speed.
const hangGuard = 2 * time.Minute

// testEnv is a real Server behind a real gRPC server on 127.0.0.1:0.
type testEnv struct {
	srv    *Server
	reg    *prometheus.Registry
	client pb.FeedServiceClient
	addr   string
	stop   func() // stops the gRPC server at once (a dead peer)
}

func startServer(t testing.TB, cfg Config, opts ...grpc.ServerOption) *testEnv {
	t.Helper()
	return startServerOn(t, cfg, "127.0.0.1:0", opts...)
}

// startServerOn is startServer listening on addr.
func startServerOn(t testing.TB, cfg Config, addr string, opts ...grpc.ServerOption) *testEnv {
	t.Helper()
	if cfg.Workers == 0 && cfg.Peers == "" {
		cfg.Workers = 2 // a coordinator with peers makes nothing itself
	}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := New(cfg, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	gs, _, err := srv.GRPCServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	// Default call options: chunks must fit gRPC's default 4 MiB limit.
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &testEnv{srv: srv, reg: reg, client: pb.NewFeedServiceClient(conn), addr: lis.Addr().String(), stop: gs.Stop}
}

// gotBatch is a batch as the client reassembled it.
type gotBatch struct {
	hdr  *pb.BatchHeader
	data []byte
}

// epoch is a whole Feed stream as received.
type epoch struct {
	info    *pb.JobInfo
	batches []gotBatch
	end     *pb.EpochEnd
}

// feedStream opens a Feed stream and sends open.
func (e *testEnv) feedStream(t testing.TB, ctx context.Context, open *pb.OpenJob) pb.FeedService_FeedClient {
	t.Helper()
	stream, err := e.client.Feed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// io.EOF: the server ended the stream first (a stream over a limit is
	// refused before its OpenJob is read); Recv returns its status.
	if err := stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Open{Open: open}}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return stream
}

// collect runs a whole Feed stream for open (give it enough credits) and
// checks the framing: JobInfo first, each header followed by exactly its
// chunks in order, EpochEnd last, then a clean close.
func (e *testEnv) collect(t testing.TB, open *pb.OpenJob) epoch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	ep, err := readEpoch(e.feedStream(t, ctx, open))
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// readEpoch reads a stream of one epoch: readStreamEpoch, then the
// stream's end.
func readEpoch(stream pb.FeedService_FeedClient) (epoch, error) {
	ep, err := readStreamEpoch(stream)
	if err != nil {
		return ep, err
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		return ep, fmt.Errorf("after EpochEnd: %v, want EOF", err)
	}
	return ep, nil
}

// readStreamEpoch reads one epoch of a stream of one or several: its
// JobInfo, its batches, its EpochEnd.
func readStreamEpoch(stream pb.FeedService_FeedClient) (epoch, error) {
	var ep epoch
	first, err := stream.Recv()
	if err != nil {
		return ep, err
	}
	if ep.info = first.GetJob(); ep.info == nil {
		return ep, fmt.Errorf("first message is %T, want JobInfo", first.GetMsg())
	}
	for {
		b, end, err := readBatch(stream, ep.info.GetMaxChunkBytes())
		if err != nil {
			return ep, err
		}
		if end != nil {
			ep.end = end
			return ep, nil
		}
		ep.batches = append(ep.batches, b)
	}
}

// readBatch reads one header and its chunks, or an EpochEnd.
func readBatch(stream pb.FeedService_FeedClient, maxChunk uint32) (gotBatch, *pb.EpochEnd, error) {
	msg, err := stream.Recv()
	if err != nil {
		return gotBatch{}, nil, err
	}
	if end := msg.GetEnd(); end != nil {
		return gotBatch{}, end, nil
	}
	hdr := msg.GetBatch()
	if hdr == nil {
		return gotBatch{}, nil, fmt.Errorf("got %T, want BatchHeader or EpochEnd", msg.GetMsg())
	}
	b, err := readChunks(stream, hdr, maxChunk)
	return b, nil, err
}

// readChunks reads the chunks of the batch hdr heads, checking that they
// come in order, numbered, and of at most maxChunk bytes.
func readChunks(stream pb.FeedService_FeedClient, hdr *pb.BatchHeader, maxChunk uint32) (gotBatch, error) {
	if err := targetsAsField(hdr); err != nil {
		return gotBatch{hdr: hdr}, err
	}
	b := gotBatch{hdr: hdr, data: make([]byte, 0, hdr.GetDataBytes())}
	for uint64(len(b.data)) < hdr.GetDataBytes() {
		msg, err := stream.Recv()
		if err != nil {
			return b, err
		}
		c := msg.GetChunk()
		switch {
		case c == nil:
			return b, fmt.Errorf("batch %d: got %T, want Chunk", hdr.GetNumber(), msg.GetMsg())
		case c.GetNumber() != hdr.GetNumber() || c.GetOffset() != uint64(len(b.data)):
			return b, fmt.Errorf("chunk of batch %d at %d, want batch %d at %d", c.GetNumber(), c.GetOffset(), hdr.GetNumber(), len(b.data))
		case len(c.GetData()) == 0 || len(c.GetData()) > int(maxChunk):
			return b, fmt.Errorf("chunk of %d bytes, max %d", len(c.GetData()), maxChunk)
		}
		b.data = append(b.data, c.GetData()...)
	}
	if uint64(len(b.data)) != hdr.GetDataBytes() {
		return b, fmt.Errorf("batch %d: %d bytes, header says %d", hdr.GetNumber(), len(b.data), hdr.GetDataBytes())
	}
	return b, nil
}

// smallJob is a fast job over the test dataset: RandomResizedCrop 32 and a
// flip, everything granted up front, one epoch.
func smallJob(dataset string, batchSize uint32) *pb.OpenJob {
	return &pb.OpenJob{
		Job: &pb.JobSpec{
			Dataset:   dataset,
			Transform: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), flipOp(nil)}},
			BatchSize: batchSize,
			Seed:      42,
			Shuffle:   true,
		},
		Credits: 1000,
		Epochs:  1,
	}
}

// targetsAsField unpacks a header's targets (its ragged arrays) into the
// field "targets", last, each sample's bytes as the pipeline encodes them
// (targets.AppendTargets), what the tests read; the header's targets are
// then nil.
func targetsAsField(h *pb.BatchHeader) error {
	bt := h.GetTargets()
	if bt == nil {
		return nil
	}
	n := len(h.GetIndices())
	fv := &pb.FieldValues{Name: "targets", Values: make([][]byte, n)}
	if err := ragged.Unpack(bt, n, bt.GetMasks(), overlapOf(bt), 1<<30, func(int) []byte { return nil }, func(i int, v []byte) { fv.Values[i] = v }); err != nil {
		return fmt.Errorf("batch %d: %v", h.GetNumber(), err)
	}
	h.Fields, h.Targets = append(h.Fields, fv), nil
	return nil
}

// overlapOf is the mask a batch's targets say they carry (the tests trust
// their own server's).
func overlapOf(bt *pb.BatchTargets) ragged.Overlap {
	if !bt.GetOverlapMask() {
		return ragged.Overlap{}
	}
	return ragged.Overlap{Ratio: int(bt.GetMaskRatio()), Instances: bt.MaskOverlap != nil && !*bt.MaskOverlap}
}
