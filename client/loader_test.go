package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/opspec"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// The test dataset: classes a, b, c with 13 JPEGs each, 39 samples.
const dsSize = 39

// makeDataset writes an ImageFolder of small JPEGs into a temporary folder:
// per class, n images of 64..95 px with distinct content (as the server's
// tests make it, without the bad file).
func makeDataset(t testing.TB, classes []string, perClass int) string {
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
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("img%02d.jpg", i)), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// env is a real server.Server behind a real gRPC server on 127.0.0.1:0.
type env struct {
	addr string
	reg  *prometheus.Registry
	mu   sync.Mutex
	auth []string // authorization metadata of the calls seen
}

var (
	datasetOnce sync.Once
	datasetDir  string
)

// startServer starts a server with 2 workers over the test dataset.
func startServer(t *testing.T) *env {
	t.Helper()
	datasetOnce.Do(func() {
		dir, err := os.MkdirTemp("", "stoker-client-test-")
		if err != nil {
			t.Fatal(err)
		}
		datasetDir = dir
		src := makeDataset(t, []string{"a", "b", "c"}, 13)
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
	})
	e := &env{reg: prometheus.NewRegistry()}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(server.Config{Datasets: map[string]string{"tiny": datasetDir}, Workers: 2, Shm: true}, log, e.reg)
	if err != nil {
		t.Fatal(err)
	}
	record := func(ctx context.Context) {
		md, _ := metadata.FromIncomingContext(ctx)
		e.mu.Lock()
		e.auth = append(e.auth, md.Get("authorization")...)
		e.mu.Unlock()
	}
	gs, _, err := srv.GRPCServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			record(ctx)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			record(ss.Context())
			return h(srv, ss)
		}))
	if err != nil {
		t.Fatal(err)
	}
	e.addr = serve(t, gs)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// serve runs a gRPC server on 127.0.0.1:0 until the test ends.
func serve(t *testing.T, gs *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if datasetDir != "" {
		os.RemoveAll(datasetDir)
	}
	os.Exit(code)
}

func newClient(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// spec is a fast shuffled job with random augmentations, so that epochs
// differ.
func spec(batchSize uint32) *pb.JobSpec {
	return &pb.JobSpec{
		Dataset: "tiny",
		Transform: &pb.TransformSpec{Ops: []*pb.Op{
			opspec.Wire("RandomResizedCrop", "size", 32),
			opspec.Wire("RandomHorizontalFlip"),
		}},
		BatchSize: batchSize,
		Seed:      7,
		Shuffle:   true,
	}
}

// sampleBytes is one sample of spec's: 3×32×32 uint8.
const sampleBytes = 3 * 32 * 32

// drain runs l to io.EOF and returns its batches; its deadline only turns
// a hang into a failure.
func drain(t *testing.T, l *client.Loader) []*client.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []*client.Batch
	for {
		b, err := l.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next after %d batches: %v", len(out), err)
		}
		out = append(out, b)
	}
}

func sameBatch(t *testing.T, what string, got, want *client.Batch) {
	t.Helper()
	if got.Epoch != want.Epoch || got.Number != want.Number || !slices.Equal(got.Shape, want.Shape) || got.Dtype != want.Dtype ||
		!slices.Equal(got.Labels, want.Labels) || !slices.Equal(got.Indices, want.Indices) || !bytes.Equal(got.Data, want.Data) {
		t.Errorf("%s: batch %d/%d shape %v, %d bytes, indices %v; want %d/%d shape %v, %d bytes, indices %v",
			what, got.Epoch, got.Number, got.Shape, len(got.Data), got.Indices, want.Epoch, want.Number, want.Shape, len(want.Data), want.Indices)
	}
}

// TestLoaderEpochs: two epochs on one stream are, byte for byte, what two
// one-epoch streams give, and every index comes once per epoch.
func TestLoaderEpochs(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr)
	const bs = 8
	l := c.Loader(spec(bs), client.WithEpochs(2), client.WithPrefetch(3))
	defer l.Close()
	both := drain(t, l)
	if _, err := l.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Errorf("Next after the end: %v, want io.EOF", err)
	}
	ends := l.EpochEnds()
	if len(ends) != 2 || ends[0].GetEpoch() != 0 || ends[1].GetEpoch() != 1 || ends[0].GetBatches() != 5 || ends[1].GetSamples() != dsSize {
		t.Errorf("EpochEnds %v, want epochs 0 and 1 of 5 batches and %d samples", ends, dsSize)
	}
	if info := l.Info(); info.GetEpoch() != 1 || info.GetBatches() != 5 || info.GetDatasetSize() != dsSize {
		t.Errorf("Info %v, want epoch 1's", info)
	}
	if l.Waited() <= 0 {
		t.Errorf("Waited %v, want > 0", l.Waited())
	}

	var one []*client.Batch
	for epoch := range uint64(2) {
		l := c.Loader(spec(bs), client.WithEpoch(epoch), client.WithEpochs(1))
		one = append(one, drain(t, l)...)
		l.Close()
	}
	if len(both) != 10 || len(one) != 10 {
		t.Fatalf("%d batches on one stream, %d on two; want 10", len(both), len(one))
	}
	for i := range both {
		sameBatch(t, fmt.Sprintf("batch %d", i), both[i], one[i])
		b := both[i]
		if b.Epoch != uint64(i/5) || b.Number != uint64(i%5) {
			t.Errorf("batch %d is %d/%d, want in order", i, b.Epoch, b.Number)
		}
		n := min(bs, dsSize-int(b.Number)*bs)
		if !slices.Equal(b.Shape, []uint32{uint32(n), 3, 32, 32}) || len(b.Data) != n*sampleBytes || b.Dtype != pb.Dtype_DTYPE_UINT8 {
			t.Errorf("batch %d: shape %v, %d bytes, %v", i, b.Shape, len(b.Data), b.Dtype)
		}
	}
	for epoch := range 2 {
		seen := make(map[int64]int)
		for _, b := range both[epoch*5 : epoch*5+5] {
			for _, idx := range b.Indices {
				seen[idx]++
			}
		}
		for idx := range int64(dsSize) {
			if seen[idx] != 1 {
				t.Errorf("epoch %d: index %d delivered %d times", epoch, idx, seen[idx])
			}
		}
	}
	if bytes.Equal(both[0].Data, both[5].Data) {
		t.Error("epochs 0 and 1 have the same first batch: no reshuffle or augmentation")
	}
	for _, b := range both {
		b.Release()
		b.Release()
	}
}

// TestLoaderSharedMemory: batches through the server's ring are those of
// the chunks, their slots given back as they are copied out.
func TestLoaderSharedMemory(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr)
	want := drain(t, c.Loader(spec(2), client.WithEpochs(2)))
	l := c.Loader(spec(2), client.WithEpochs(2), client.WithPrefetch(1), client.WithSharedMemory(true))
	defer l.Close()
	got := drain(t, l)
	if tr, why := l.Transport(); tr != "shm" {
		t.Fatalf("transport %s (%s), want shm", tr, why)
	}
	if len(got) != len(want) || len(got) != 40 {
		t.Fatalf("%d batches, want %d (40)", len(got), len(want))
	}
	for i := range got {
		sameBatch(t, fmt.Sprintf("batch %d", i), want[i], got[i])
	}
	// 40 batches through a ring of 4 slots: each slot given back and
	// filled again, none sent in chunks.
	if n := e.sumCounter(t, "stoker_shm_batches_total", "via", "slot"); n != 40 {
		t.Errorf("%v batches through slots, want 40", n)
	}
	if tr, _ := c.Loader(spec(2)).Transport(); tr != "grpc" {
		t.Errorf("a loader without SharedMemory: transport %s", tr)
	}
}

// TestLoaderResume: Resume's start, skip and consumed give the batches of
// the full epoch they say.
func TestLoaderResume(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr)
	const bs = 8
	full := drain(t, c.Loader(spec(bs), client.WithEpochs(1)))

	got := drain(t, c.Loader(spec(bs), client.WithEpochs(1), client.WithResume(2, nil, 0)))
	if len(got) != 3 {
		t.Fatalf("start 2: %d batches, want 3", len(got))
	}
	for i, b := range got {
		sameBatch(t, "start 2", b, full[2+i])
	}

	l := c.Loader(spec(bs), client.WithEpochs(1), client.WithAsReady(true), client.WithResume(1, []uint64{3}, 0))
	got = drain(t, l)
	slices.SortFunc(got, func(a, b *client.Batch) int { return int(a.Number) - int(b.Number) })
	if len(got) != 3 || got[0].Number != 1 || got[1].Number != 2 || got[2].Number != 4 {
		t.Fatalf("start 1 skip 3: %d batches", len(got))
	}
	for _, b := range got {
		sameBatch(t, "start 1 skip 3", b, full[b.Number])
	}
	if ends := l.EpochEnds(); len(ends) != 1 || ends[0].GetBatches() != 3 {
		t.Errorf("EpochEnds %v, want one of 3 batches", ends)
	}

	// Resumed at the end of an epoch, or past all of it: the epoch is
	// empty, and the next one comes whole.
	next := drain(t, c.Loader(spec(bs), client.WithEpoch(1), client.WithEpochs(1)))
	for _, resume := range []client.LoaderOption{client.WithResume(5, nil, 0), client.WithResume(0, nil, 100), client.WithResume(4, []uint64{4}, 0)} {
		l := c.Loader(spec(bs), client.WithEpochs(2), resume)
		got := drain(t, l)
		if len(got) != len(next) {
			t.Fatalf("an empty first epoch, then epoch 1: %d batches, want %d", len(got), len(next))
		}
		for i := range got {
			sameBatch(t, "after an empty epoch", got[i], next[i])
		}
		if ends := l.EpochEnds(); len(ends) != 2 || ends[0].GetBatches() != 0 || ends[1].GetBatches() != 5 {
			t.Errorf("EpochEnds %v, want 0 then 5 batches", ends)
		}
	}

	// Elastic: the plan is cut from the positions after consumed, and a
	// sample's pixels depend on (seed, epoch, index) only.
	const consumed = 16
	got = drain(t, c.Loader(spec(bs), client.WithEpochs(1), client.WithResume(0, nil, consumed)))
	type sample struct {
		idx  int64
		data []byte
	}
	flat := func(bs []*client.Batch) []sample {
		var out []sample
		for _, b := range bs {
			for i, idx := range b.Indices {
				out = append(out, sample{idx, b.Data[i*sampleBytes : (i+1)*sampleBytes]})
			}
		}
		return out
	}
	want, have := flat(full)[consumed:], flat(got)
	if len(have) != len(want) {
		t.Fatalf("consumed %d: %d samples, want %d", consumed, len(have), len(want))
	}
	for i := range want {
		if have[i].idx != want[i].idx || !bytes.Equal(have[i].data, want[i].data) {
			t.Errorf("consumed %d: position %d is index %d, want %d (or other pixels)", consumed, i, have[i].idx, want[i].idx)
		}
	}
}

// TestLoaderAsReady: as-ready batches, sorted, are the in-order ones.
func TestLoaderAsReady(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr)
	inOrder := drain(t, c.Loader(spec(4), client.WithEpochs(1)))
	got := drain(t, c.Loader(spec(4), client.WithEpochs(1), client.WithAsReady(true), client.WithPrefetch(16)))
	slices.SortFunc(got, func(a, b *client.Batch) int { return int(a.Number) - int(b.Number) })
	if len(got) != len(inOrder) || len(got) != 10 {
		t.Fatalf("%d batches as ready, %d in order; want 10", len(got), len(inOrder))
	}
	for i := range got {
		sameBatch(t, "as ready", got[i], inOrder[i])
	}
}

// TestDescribe: Describe and ListDatasets answer what the stream says.
func TestDescribe(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr)
	ctx := context.Background()
	ds, err := c.ListDatasets(ctx)
	if err != nil || len(ds) != 1 || ds[0].GetName() != "tiny" || ds[0].GetSize() != dsSize {
		t.Fatalf("ListDatasets: %v, %v", ds, err)
	}
	l := c.Loader(spec(8), client.WithEpoch(3), client.WithEpochs(1))
	drain(t, l)
	info, err := c.Describe(ctx, spec(8), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(info, l.Info()) || info.GetBatches() != 5 || info.GetFingerprint() != ds[0].GetFingerprint() {
		t.Errorf("Describe %v, the stream said %v", info, l.Info())
	}
	if info, err := c.Describe(ctx, spec(8), 0, 30); err != nil || info.GetSamples() != dsSize-30 || info.GetBatches() != 2 {
		t.Errorf("Describe consumed 30: %v, %v; want 9 samples in 2 batches", info, err)
	}
	bad := spec(8)
	bad.Dataset = "nope"
	if _, err := c.Describe(ctx, bad, 0, 0); status.Code(err) != codes.NotFound {
		t.Errorf("Describe of an unknown dataset: %v, want NotFound", err)
	}
	// The server's status errors come through Next as they are.
	l = c.Loader(bad)
	if _, err := l.Next(ctx); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Next of an unknown dataset: %v, want NotFound naming it", err)
	}
	if _, err := l.Next(ctx); status.Code(err) != codes.NotFound {
		t.Errorf("Next again: %v, want the same error", err)
	}
}

// TestToken: a bearer token goes to loopback in plaintext, and is refused
// in plaintext elsewhere unless WithInsecureToken.
func TestToken(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr, client.WithToken("s3cret"))
	if _, err := c.ListDatasets(context.Background()); err != nil {
		t.Fatal(err)
	}
	drain(t, c.Loader(spec(39), client.WithEpochs(1)))
	e.mu.Lock()
	auth := slices.Clone(e.auth)
	e.mu.Unlock()
	if len(auth) != 2 || auth[0] != "Bearer s3cret" || auth[1] != "Bearer s3cret" {
		t.Errorf("the server saw authorization %q, want the bearer token on both calls", auth)
	}

	for _, target := range []string{"localhost:1", "127.0.0.1:1", "[::1]:1", "dns:///127.0.0.1:1", "dns:///localhost:1", "unix:///tmp/stoker.sock"} {
		c, err := client.New(target, client.WithToken("x"))
		if err != nil {
			t.Errorf("New(%q) with a token: %v, want ok (loopback)", target, err)
			continue
		}
		c.Close()
	}
	for _, target := range []string{"10.0.0.1:7070", "stoker.example:7070", "dns:///stoker.example:7070", "[2001:db8::1]:7070"} {
		_, err := client.New(target, client.WithToken("x"))
		if err == nil || !strings.Contains(err.Error(), "plaintext") || !strings.Contains(err.Error(), "WithInsecureToken") {
			t.Errorf("New(%q) with a token in plaintext: %v, want a refusal that says why", target, err)
		}
		c, err := client.New(target, client.WithToken("x"), client.WithInsecureToken())
		if err != nil {
			t.Errorf("New(%q) with WithInsecureToken: %v", target, err)
			continue
		}
		c.Close()
	}

	// Dial options may bring TLS, so New lets them through; the call then
	// checks the transport it got. A name that is not loopback, dialed to
	// the loopback server:
	dialer := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", e.addr)
	})
	c = newClient(t, "passthrough:///stoker.example:7070", client.WithToken("x"), client.WithDialOptions(dialer))
	_, err := c.ListDatasets(context.Background())
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "plaintext") {
		t.Errorf("a call with a token over plaintext to a remote name: %v, want Unauthenticated", err)
	}
	l := c.Loader(spec(8))
	defer l.Close()
	if _, err = l.Next(context.Background()); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Next with a token over plaintext to a remote name: %v, want Unauthenticated", err)
	}
	e.mu.Lock()
	if len(e.auth) != 2 {
		t.Errorf("the server saw %d tokens, want still 2", len(e.auth))
	}
	e.mu.Unlock()

	if _, err := client.New("127.0.0.1:1", client.WithTLS(filepath.Join(t.TempDir(), "missing.pem"), "", "")); err == nil {
		t.Error("WithTLS with a missing CA file: no error")
	}
}

// streamsActive is the server's stoker_streams_active.
func (e *env) streamsActive(t *testing.T) float64 {
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "stoker_streams_active" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no stoker_streams_active")
	return 0
}

// sumCounter sums the server's counter name over the series whose label
// is value.
func (e *env) sumCounter(t *testing.T, name, label, value string) float64 {
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == name && l.GetName() == label && l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// TestLoaderClose: Close mid-epoch returns at once, a Next blocked in
// another goroutine returns ErrClosed, the server's stream ends and no
// goroutine is left behind.
func TestLoaderClose(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr)
	ctx := context.Background()
	if _, err := c.ListDatasets(ctx); err != nil { // the connection's goroutines
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()

	l := c.Loader(spec(2), client.WithPrefetch(1)) // epochs until closed
	for range 3 {
		if _, err := l.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if e.streamsActive(t) != 1 {
		t.Errorf("streams active %v, want 1", e.streamsActive(t))
	}
	// The other goroutine asks batch after batch (each Next grants the
	// server another), so once it has had one it spends its time in Next
	// until Close ends it.
	errc := make(chan error, 1)
	asking := make(chan struct{})
	go func() {
		for n := 0; ; n++ {
			if n == 1 {
				close(asking)
			}
			if _, err := l.Next(ctx); err != nil {
				errc <- err
				return
			}
		}
	}()
	<-asking
	// Hang guards only: Close and the blocked Next end at once; a slow
	// machine may take seconds, a hang takes forever.
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close still running after a minute: it hangs")
	}
	select {
	case err := <-errc:
		if !errors.Is(err, client.ErrClosed) {
			t.Errorf("Next during Close: %v, want ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Next still blocked a minute after Close")
	}
	if _, err := l.Next(ctx); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
	l.Close()

	// The server's stream and the loader's goroutines end after Close
	// returns, not with it: poll for that, a minute at most.
	deadline := time.Now().Add(time.Minute)
	for e.streamsActive(t) != 0 || runtime.NumGoroutine() > base+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("a minute after Close: %v streams active, %d goroutines (%d before the loader)\n%s",
				e.streamsActive(t), runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A loader closed before its first Next never opens a stream.
	l = c.Loader(spec(2))
	l.Close()
	if _, err := l.Next(ctx); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Next after Close before any: %v, want ErrClosed", err)
	}
}

// fakeFeed is a FeedService whose Feed the test writes.
type fakeFeed struct {
	pb.UnimplementedFeedServiceServer
	feed func(pb.FeedService_FeedServer) error
}

func (f *fakeFeed) Feed(s pb.FeedService_FeedServer) error { return f.feed(s) }

func startFake(t *testing.T, feed func(pb.FeedService_FeedServer) error) *client.Client {
	t.Helper()
	gs := grpc.NewServer()
	pb.RegisterFeedServiceServer(gs, &fakeFeed{feed: feed})
	addr := serve(t, gs)
	return newClient(t, addr)
}

// startFakeInBubble is startFake for a testing/synctest bubble: the real
// gRPC server and client talk over an in-memory bufconn made in the bubble
// (a loopback socket's reads are not durable blocking, so the bubble's
// clock would never move while one waits), and the client dials it by a
// passthrough target (no DNS lookup leaves the bubble). Time in the test
// and in the loader is then the bubble's fake clock: durations are exact.
func startFakeInBubble(t *testing.T, feed func(pb.FeedService_FeedServer) error) *client.Client {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	pb.RegisterFeedServiceServer(gs, &fakeFeed{feed: feed})
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	// Cleanups run last-registered first: the client closes before the
	// server stops, and the bubble ends with every goroutine gone.
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return newClient(t, "passthrough:///bufconn", client.WithDialOptions(
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })))
}

// Messages of a fake stream: samples of [3, 2, 2] uint8 (12 bytes), batches
// of 2.
func jobMsg(epoch, batches uint64) *pb.FeedResponse {
	return &pb.FeedResponse{Msg: &pb.FeedResponse_Job{Job: &pb.JobInfo{
		Epoch: epoch, Batches: batches, SampleShape: []uint32{3, 2, 2}, Dtype: pb.Dtype_DTYPE_UINT8, MaxChunkBytes: 16,
	}}}
}

func headerMsg(epoch, k uint64, n uint32, dataBytes uint64) *pb.FeedResponse {
	idx := make([]int64, n)
	return &pb.FeedResponse{Msg: &pb.FeedResponse_Batch{Batch: &pb.BatchHeader{
		Epoch: epoch, Number: k, Shape: []uint32{n, 3, 2, 2}, Dtype: pb.Dtype_DTYPE_UINT8,
		Labels: idx, Indices: idx, DataBytes: dataBytes,
	}}}
}

func chunkMsg(k, off uint64, n int) *pb.FeedResponse {
	return &pb.FeedResponse{Msg: &pb.FeedResponse_Chunk{Chunk: &pb.Chunk{Number: k, Offset: off, Data: bytes.Repeat([]byte{byte(k)}, n)}}}
}

func endMsg(epoch, batches uint64) *pb.FeedResponse {
	return &pb.FeedResponse{Msg: &pb.FeedResponse_End{End: &pb.EpochEnd{Epoch: epoch, Batches: batches}}}
}

// TestLoaderMalformed: a stream that breaks the framing is an ErrProtocol
// error from Next, never a panic; a well-formed one ends in io.EOF.
func TestLoaderMalformed(t *testing.T) {
	good := []*pb.FeedResponse{jobMsg(0, 2), headerMsg(0, 0, 2, 24), chunkMsg(0, 0, 16), chunkMsg(0, 16, 8),
		headerMsg(0, 1, 1, 12), chunkMsg(1, 0, 12), endMsg(0, 2)}
	cases := map[string][]*pb.FeedResponse{
		"good":                 good,
		"header first":         {headerMsg(0, 0, 2, 24)},
		"chunk first":          {jobMsg(0, 2), chunkMsg(0, 0, 16)},
		"other epoch's info":   {jobMsg(1, 2)},
		"no shape":             {{Msg: &pb.FeedResponse_Job{Job: &pb.JobInfo{Batches: 1, Dtype: pb.Dtype_DTYPE_UINT8}}}},
		"no dtype":             {{Msg: &pb.FeedResponse_Job{Job: &pb.JobInfo{Batches: 1, SampleShape: []uint32{3, 2, 2}}}}},
		"huge sample":          {{Msg: &pb.FeedResponse_Job{Job: &pb.JobInfo{Batches: 1, SampleShape: []uint32{1 << 31, 1 << 31, 1 << 31}, Dtype: pb.Dtype_DTYPE_UINT8}}}},
		"bytes off shape":      {jobMsg(0, 2), headerMsg(0, 0, 2, 1<<50)},
		"too many samples":     {jobMsg(0, 2), headerMsg(0, 0, 3, 36)},
		"number past epoch":    {jobMsg(0, 2), headerMsg(0, 2, 1, 12)},
		"batch of other epoch": {jobMsg(0, 2), headerMsg(1, 0, 1, 12)},
		"chunk gap":            {jobMsg(0, 2), headerMsg(0, 0, 2, 24), chunkMsg(0, 0, 8), chunkMsg(0, 12, 8)},
		"chunk overflow":       {jobMsg(0, 2), headerMsg(0, 0, 2, 24), chunkMsg(0, 0, 16), chunkMsg(0, 16, 16)},
		"chunk of other batch": {jobMsg(0, 2), headerMsg(0, 0, 2, 24), chunkMsg(1, 0, 8)},
		"empty chunk":          {jobMsg(0, 2), headerMsg(0, 0, 2, 24), chunkMsg(0, 0, 0)},
		"header mid-batch":     {jobMsg(0, 2), headerMsg(0, 0, 2, 24), chunkMsg(0, 0, 8), headerMsg(0, 1, 1, 12)},
		"end mid-batch":        {jobMsg(0, 2), headerMsg(0, 0, 2, 24), chunkMsg(0, 0, 8), endMsg(0, 1)},
		"same batch twice":     {jobMsg(0, 2), headerMsg(0, 0, 1, 12), chunkMsg(0, 0, 12), headerMsg(0, 0, 1, 12)},
		"end miscounts":        {jobMsg(0, 2), headerMsg(0, 0, 1, 12), chunkMsg(0, 0, 12), endMsg(0, 2)},
		"info inside epoch":    {jobMsg(0, 2), jobMsg(0, 2)},
		"closed before end":    {jobMsg(0, 2), headerMsg(0, 0, 1, 12), chunkMsg(0, 0, 12)},
		"more after the last":  append(slices.Clone(good), jobMsg(1, 2)),
	}
	for name, msgs := range cases {
		t.Run(name, func(t *testing.T) {
			c := startFake(t, func(s pb.FeedService_FeedServer) error {
				if _, err := s.Recv(); err != nil {
					return err
				}
				for _, m := range msgs {
					if err := s.Send(m); err != nil {
						return err
					}
				}
				return nil
			})
			l := c.Loader(spec(2), client.WithEpochs(1), client.WithPrefetch(8))
			defer l.Close()
			var n int
			var err error
			for err == nil {
				var b *client.Batch
				b, err = l.Next(context.Background())
				if err == nil {
					n++
					if want := bytes.Repeat([]byte{byte(b.Number)}, int(b.Shape[0])*12); !bytes.Equal(b.Data, want) {
						t.Errorf("batch %d: data %v", b.Number, b.Data)
					}
				}
			}
			if name == "good" {
				if !errors.Is(err, io.EOF) || n != 2 {
					t.Errorf("%d batches, then %v; want 2, then io.EOF", n, err)
				}
				return
			}
			if !errors.Is(err, client.ErrProtocol) {
				t.Errorf("after %d batches: %v, want ErrProtocol", n, err)
			}
		})
	}
}

// TestLoaderCredits: the first Next opens with Prefetch credits; each later
// one grants one and reports how long the previous one blocked, and how
// long the trainer worked between them, each apart. It runs in a synctest
// bubble: the server's hold and the trainer's step are fake time, so the
// loader's reports are checked exactly, however loaded the machine.
func TestLoaderCredits(t *testing.T) {
	const (
		hold = 150 * time.Millisecond // the server holds batches 1 and 2: the trainer blocks
		step = 50 * time.Millisecond  // the trainer's work between Nexts: not waiting
	)
	synctest.Test(t, func(t *testing.T) {
		var (
			mu      sync.Mutex
			open    *pb.OpenJob
			credits []*pb.Credit
		)
		c := startFakeInBubble(t, func(s pb.FeedService_FeedServer) error {
			req, err := s.Recv()
			if err != nil {
				return err
			}
			mu.Lock()
			open = req.GetOpen()
			mu.Unlock()
			send := func(ms ...*pb.FeedResponse) error {
				for _, m := range ms {
					if err := s.Send(m); err != nil {
						return err
					}
				}
				return nil
			}
			if err := send(jobMsg(0, 3), headerMsg(0, 0, 1, 12), chunkMsg(0, 0, 12)); err != nil {
				return err
			}
			for k := uint64(1); k < 3; k++ {
				req, err := s.Recv()
				if err != nil {
					return err
				}
				mu.Lock()
				credits = append(credits, req.GetCredit())
				mu.Unlock()
				time.Sleep(hold)
				if err := send(headerMsg(0, k, 1, 12), chunkMsg(k, 0, 12)); err != nil {
					return err
				}
			}
			if err := send(endMsg(0, 3)); err != nil {
				return err
			}
			s.Recv() // the last batch's credit
			return nil
		})
		l := c.Loader(spec(2), client.WithEpochs(1), client.WithPrefetch(1))
		defer l.Close()
		ctx := context.Background()
		for k := range 3 {
			b, err := l.Next(ctx)
			if err != nil || b.Number != uint64(k) {
				t.Fatalf("Next %d: %v, %v", k, b, err)
			}
			time.Sleep(step)
		}
		if _, err := l.Next(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("the end: %v, want io.EOF", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if open.GetCredits() != 1 || open.GetEpochs() != 1 || open.GetJob().GetBatchSize() != 2 {
			t.Errorf("OpenJob %v", open)
		}
		if len(credits) != 2 {
			t.Fatalf("%d credits before the last batch, want 2", len(credits))
		}
		seconds := func(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
		for i, cr := range credits {
			if cr.GetCredits() != 1 || cr.GetBatches() != 1 {
				t.Errorf("credit %d: %v, want 1 credit for 1 batch", i, cr)
			}
			if got := seconds(cr.GetStepSeconds()); got != step {
				t.Errorf("credit %d: the trainer's step reported as %v, want %v", i, got, step)
			}
		}
		if got := seconds(credits[0].GetWaitSeconds()); got != 0 {
			t.Errorf("the first Next's wait reported as %v; it got its batch at once", got)
		}
		if got := seconds(credits[1].GetWaitSeconds()); got != hold {
			t.Errorf("the second Next's wait reported as %v, want the server's hold, %v (not the trainer's step)", got, hold)
		}
		if w := l.Waited(); w != 2*hold {
			t.Errorf("Waited %v, want the two holds, %v", w, 2*hold)
		}
	})
}

// TestLoaderTimeout: a silent server fails Next with DeadlineExceeded after
// Timeout of silence; a cancelled ctx returns at once and leaves the stream
// usable. In a synctest bubble, so that "after Timeout" is checked exactly.
func TestLoaderTimeout(t *testing.T) {
	synctest.Test(t, testLoaderTimeout)
}

func testLoaderTimeout(t *testing.T) {
	// silent starts a server that answers one batch once release is closed.
	silent := func() (*client.Client, chan struct{}) {
		release := make(chan struct{})
		c := startFakeInBubble(t, func(s pb.FeedService_FeedServer) error {
			if _, err := s.Recv(); err != nil {
				return err
			}
			select {
			case <-release:
			case <-s.Context().Done():
				return s.Context().Err()
			}
			for _, m := range []*pb.FeedResponse{jobMsg(0, 1), headerMsg(0, 0, 1, 12), chunkMsg(0, 0, 12), endMsg(0, 1)} {
				if err := s.Send(m); err != nil {
					return err
				}
			}
			return nil
		})
		return c, release
	}
	const limit = 300 * time.Millisecond
	c, _ := silent()
	l := c.Loader(spec(2), client.WithEpochs(1), client.WithTimeout(limit))
	defer l.Close()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with a short ctx: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(began); took != 50*time.Millisecond {
		t.Errorf("Next with a 50 ms ctx returned after %v", took)
	}
	began = time.Now()
	_, err := l.Next(context.Background())
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Next from a silent server: %v, want DeadlineExceeded", err)
	}
	// The silence is counted from the later of the last message and this
	// call's start.
	if took := time.Since(began); took != limit {
		t.Errorf("the timeout came %v after Next asked, want %v", took, limit)
	}

	// A server that answers late: the ctx's end is not sticky.
	c, release := silent()
	l = c.Loader(spec(2), client.WithEpochs(1), client.WithTimeout(5*time.Second))
	defer l.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := l.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with a short ctx: %v", err)
	}
	close(release)
	if b, err := l.Next(context.Background()); err != nil || b.Number != 0 {
		t.Fatalf("Next after a cancelled one: %v, %v", b, err)
	}
	if _, err := l.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("the end: %v, want io.EOF", err)
	}
}

// TestLoaderTrace: with JobSpec.Trace, every batch carries each sample's
// trace, which Batch.Trace parses: the geometry first, in torchvision's
// functional names; without it, none.
func TestLoaderTrace(t *testing.T) {
	e := startServer(t)
	c := newClient(t, e.addr)
	s := spec(4)
	s.Trace = true
	s.Transform = &pb.TransformSpec{Ops: []*pb.Op{
		opspec.Wire("RandomResizedCrop", "size", 32),
		opspec.Wire("RandomRotation", "degrees", []float64{-10, 10}),
	}}
	l := c.Loader(s, client.WithEpochs(1))
	defer l.Close()
	batches := drain(t, l)
	if len(batches) == 0 {
		t.Fatal("no batches")
	}
	for _, b := range batches {
		if len(b.Traces) != len(b.Labels) {
			t.Fatalf("batch %d: %d traces for %d samples", b.Number, len(b.Traces), len(b.Labels))
		}
		for i := range b.Traces {
			ops, err := b.Trace(i)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != 2 || ops[0].Op != "resized_crop" || ops[1].Op != "rotate" || ops[1].Args["interpolation"] != "nearest" {
				t.Fatalf("batch %d sample %d: trace %+v, want resized_crop then rotate (nearest, RandomRotation's default)", b.Number, i, ops)
			}
			if a := ops[1].Args["angle"].(float64); a < -10 || a > 10 {
				t.Errorf("angle %v outside the degrees asked", a)
			}
		}
	}
	plain := drain(t, c.Loader(spec(4), client.WithEpochs(1)))
	if len(plain[0].Traces) != 0 {
		t.Errorf("an untraced job's batch has %d traces", len(plain[0].Traces))
	}
	if _, err := plain[0].Trace(0); err == nil {
		t.Errorf("Trace of an untraced batch: no error")
	}
}
