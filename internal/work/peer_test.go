package work

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// scriptedWorker is a WorkService on loopback that records every request
// and answers leases as answer says: the protocol's other side, scripted,
// so that a test can see exactly what a Peer sends (the real worker,
// Worker, is tested against Peer in worker_test.go, and in package
// server with a real executor).
type scriptedWorker struct {
	stokerv1.UnimplementedWorkServiceServer
	info *stokerv1.WorkerInfo
	// answer answers lease l: nil to stay silent, or the response.
	answer func(l *stokerv1.Lease) *stokerv1.WorkResponse
	// chunkBytes cuts a batch's pixels (pixel(i) at byte i) into chunks of
	// that many bytes; 0: one chunk.
	chunkBytes int
	// drains: each stream ends cleanly right after the first request, as
	// a draining worker's does.
	drains bool

	mu      sync.Mutex
	streams int
	reqs    []*stokerv1.WorkRequest
	changed chan struct{} // closed and replaced at every request
}

const sampleBytes = 3

// hangGuard is how long a test waits for what is bound to happen before
// it calls the wait a hang: only ever a hang turned into a failure, never
// a bound on speed.
const hangGuard = 2 * time.Minute

// within returns what ch gives, failing the test if it gives nothing
// within hangGuard.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("no %s after %v", what, hangGuard)
		var none T
		return none
	}
}

// deadline is a lease's context whose deadline passes when the test says
// (pass), not after a guess at how long the lease takes to reach the
// worker: Err is then context.DeadlineExceeded, as a timer's would be.
type deadline struct {
	context.Context
	passed chan struct{}
	once   sync.Once
}

func newDeadline() *deadline {
	return &deadline{Context: context.Background(), passed: make(chan struct{})}
}

func (d *deadline) pass()                 { d.once.Do(func() { close(d.passed) }) }
func (d *deadline) Done() <-chan struct{} { return d.passed }
func (d *deadline) Err() error {
	select {
	case <-d.passed:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func startWorker(t *testing.T, w *scriptedWorker) string {
	t.Helper()
	if w.info == nil {
		w.info = &stokerv1.WorkerInfo{Workers: 1, MaxLeases: 8, Decoder: IdentityProto(pipeline.LocalIdentity())}
	}
	if w.answer == nil {
		w.answer = made
	}
	w.changed = make(chan struct{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	stokerv1.RegisterWorkServiceServer(gs, w)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// made answers a lease with its batch: labels 7, sampleBytes bytes of 9
// per sample.
func made(l *stokerv1.Lease) *stokerv1.WorkResponse {
	n := len(l.GetIndices())
	return &stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Done{Done: &stokerv1.LeaseDone{Lease: l.GetId(), Batch: &stokerv1.BatchHeader{
		Number: l.GetNumber(), Labels: make([]int64, n), Indices: l.GetIndices(), DataBytes: uint64(n * sampleBytes),
	}}}}
}

func (w *scriptedWorker) Work(stream stokerv1.WorkService_WorkServer) error {
	w.mu.Lock()
	w.streams++
	w.mu.Unlock()
	if err := stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Worker{Worker: w.info}}); err != nil {
		return err
	}
	if w.drains {
		_, err := stream.Recv() // the coordinator's first request: the stream is up
		return err
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		w.mu.Lock()
		w.reqs = append(w.reqs, req)
		close(w.changed)
		w.changed = make(chan struct{})
		w.mu.Unlock()
		l := req.GetLease()
		if l == nil {
			continue
		}
		resp := w.answer(l)
		if resp == nil {
			continue
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
		if d := resp.GetDone(); d != nil && d.GetBatch().GetDataBytes() > 0 {
			data := make([]byte, d.GetBatch().GetDataBytes())
			for i := range data {
				data[i] = pixel(i)
			}
			size := w.chunkBytes
			if size == 0 {
				size = len(data)
			}
			for off := 0; off < len(data); off += size {
				c := &stokerv1.Chunk{Number: l.GetId(), Offset: uint64(off), Data: data[off:min(off+size, len(data))]}
				if err := stream.Send(&stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Chunk{Chunk: c}}); err != nil {
					return err
				}
			}
		}
	}
}

func pixel(i int) byte { return byte(i*31 + 7) }

// waitFor waits until the requests received satisfy ok, and returns them.
func (w *scriptedWorker) waitFor(t *testing.T, what string, ok func([]*stokerv1.WorkRequest) bool) []*stokerv1.WorkRequest {
	t.Helper()
	timeout := time.After(hangGuard)
	for {
		w.mu.Lock()
		reqs, changed := append([]*stokerv1.WorkRequest(nil), w.reqs...), w.changed
		w.mu.Unlock()
		if ok(reqs) {
			return reqs
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("after %v, no %s; requests: %v", hangGuard, what, reqs)
		}
	}
}

func (w *scriptedWorker) streamsOpened() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streams
}

// dialReady dials addr and waits until the peer is Ready.
func dialReady(t *testing.T, addr string, opts ...Option) *Peer {
	t.Helper()
	ready := make(chan struct{}, 1)
	p, err := Dial(addr, func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	timeout := time.After(hangGuard)
	for !p.Ready() {
		select {
		case <-ready:
		case <-timeout:
			t.Fatalf("peer not ready after %v: %v", hangGuard, p.LastError())
		}
	}
	return p
}

// job is spec as a coordinator registers it, with samples of sampleBytes.
func job(spec *stokerv1.JobSpec) *Job { return &Job{Spec: spec, SampleBytes: sampleBytes} }

func leaseK(k int) *lease.Lease {
	return &lease.Lease{Number: k, Indices: []int64{int64(2 * k), int64(2*k + 1)}}
}

func kinds(reqs []*stokerv1.WorkRequest) string {
	var s []string
	for _, r := range reqs {
		switch m := r.GetMsg().(type) {
		case *stokerv1.WorkRequest_Ping:
			s = append(s, "ping")
		case *stokerv1.WorkRequest_Job:
			s = append(s, "job")
		case *stokerv1.WorkRequest_Lease:
			s = append(s, "lease")
		case *stokerv1.WorkRequest_Cancel:
			s = append(s, "cancel")
		case *stokerv1.WorkRequest_End:
			s = append(s, "end")
		default:
			s = append(s, fmt.Sprintf("%T", m))
		}
	}
	return strings.Join(s, " ")
}

// TestLateLeaseCancelsItself: a lease the worker never answers fails at
// its deadline with a CancelLease sent, and the stream goes on: the next
// lease on it is made, and no second stream is opened. The deadline
// passes once the worker holds the lease (a timer might pass before the
// lease was even sent, and then there is nothing to cancel).
func TestLateLeaseCancelsItself(t *testing.T) {
	ctx := newDeadline()
	w := &scriptedWorker{answer: func(l *stokerv1.Lease) *stokerv1.WorkResponse {
		if l.GetNumber() == 0 {
			ctx.pass()
			return nil // hung
		}
		return made(l)
	}}
	p := dialReady(t, startWorker(t, w))
	j := job(&stokerv1.JobSpec{Dataset: "d"})
	var b pipeline.Batch
	if _, err := p.Make(ctx, j, leaseK(0), &b); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung lease: %v, want its deadline", err)
	}
	reqs := w.waitFor(t, "CancelLease", func(r []*stokerv1.WorkRequest) bool { return strings.HasSuffix(kinds(r), "cancel") })
	if got, want := kinds(reqs), "ping job lease cancel"; got != want {
		t.Errorf("requests %q, want %q", got, want)
	}
	if c, l := reqs[3].GetCancel(), reqs[2].GetLease(); c.GetId() != l.GetId() {
		t.Errorf("cancel of lease %d, the late lease is %d", c.GetId(), l.GetId())
	}
	if _, err := p.Make(context.Background(), j, leaseK(1), &b); err != nil || b.N != 2 || len(b.Data) != 2*sampleBytes {
		t.Fatalf("next lease: %v, batch of %d samples and %d bytes", err, b.N, len(b.Data))
	}
	if n := w.streamsOpened(); n != 1 || !p.Ready() {
		t.Errorf("%d streams opened, ready %v: the late lease ended the stream", n, p.Ready())
	}
	if p.InFlight() != 0 {
		t.Errorf("%d leases in flight", p.InFlight())
	}
}

// oneLeaseMade is a scripted worker, a peer dialed to it, and a job whose
// first lease (leaseK(0)) the peer has made.
func oneLeaseMade(t *testing.T) (*scriptedWorker, *Peer, *Job) {
	t.Helper()
	w := &scriptedWorker{}
	p := dialReady(t, startWorker(t, w))
	j := job(&stokerv1.JobSpec{Dataset: "d"})
	var b pipeline.Batch
	if _, err := p.Make(context.Background(), j, leaseK(0), &b); err != nil {
		t.Fatal(err)
	}
	return w, p, j
}

// TestForgetEndsJob: Forget sends JobEnd for the job's id after its
// requests; the job's next lease registers it again under a new, larger id.
func TestForgetEndsJob(t *testing.T) {
	w, p, j := oneLeaseMade(t)
	var b pipeline.Batch
	p.Forget(j)
	p.Forget(j) // once is enough: nothing more is sent
	if _, err := p.Make(context.Background(), j, leaseK(1), &b); err != nil {
		t.Fatal(err)
	}
	reqs := w.waitFor(t, "the second lease", func(r []*stokerv1.WorkRequest) bool { return len(r) >= 6 })
	if got, want := kinds(reqs), "ping job lease end job lease"; got != want {
		t.Fatalf("requests %q, want %q", got, want)
	}
	first, end, again := reqs[1].GetJob().GetId(), reqs[3].GetEnd().GetId(), reqs[4].GetJob().GetId()
	if end != first || again <= reqs[2].GetLease().GetId() || reqs[5].GetLease().GetJob() != again {
		t.Errorf("job %d ended as %d, registered again as %d, leased as %d", first, end, again, reqs[5].GetLease().GetJob())
	}
}

// TestAbortedRegistersAgain: a lease the worker answers with ABORTED (it
// ended the job: no lease for a while) is no failure (lease.ErrBusy), and the
// job's next lease registers it again.
func TestAbortedRegistersAgain(t *testing.T) {
	var once sync.Once
	w := &scriptedWorker{}
	w.answer = func(l *stokerv1.Lease) *stokerv1.WorkResponse {
		var resp *stokerv1.WorkResponse
		once.Do(func() {
			resp = &stokerv1.WorkResponse{Msg: &stokerv1.WorkResponse_Failed{Failed: &stokerv1.LeaseFailed{
				Lease: l.GetId(), Code: uint32(codes.Aborted), Message: "job ended here: register it again",
			}}}
		})
		if resp == nil {
			resp = made(l)
		}
		return resp
	}
	p := dialReady(t, startWorker(t, w))
	j := job(&stokerv1.JobSpec{Dataset: "d"})
	var b pipeline.Batch
	if _, err := p.Make(context.Background(), j, leaseK(0), &b); !errors.Is(err, lease.ErrBusy) {
		t.Fatalf("aborted lease: %v, want lease.ErrBusy", err)
	}
	if _, err := p.Make(context.Background(), j, leaseK(0), &b); err != nil {
		t.Fatal(err)
	}
	reqs := w.waitFor(t, "the second lease", func(r []*stokerv1.WorkRequest) bool { return len(r) >= 5 })
	if got, want := kinds(reqs), "ping job lease job lease"; got != want {
		t.Errorf("requests %q, want %q", got, want)
	}
}

// TestPingsWhileIdle: a peer pings at once, and then within a third of the
// worker's idle timeout while it has nothing else to send.
func TestPingsWhileIdle(t *testing.T) {
	w := &scriptedWorker{info: &stokerv1.WorkerInfo{Workers: 1, MaxLeases: 8, Decoder: IdentityProto(pipeline.LocalIdentity()), IdleTimeoutMs: 150}}
	dialReady(t, startWorker(t, w))
	reqs := w.waitFor(t, "four pings", func(r []*stokerv1.WorkRequest) bool { return len(r) >= 4 })
	if got := kinds(reqs[:4]); got != "ping ping ping ping" {
		t.Errorf("requests %q, want pings only", got)
	}
}

// TestDecoderRefused: a worker whose decoder would make other bytes is
// refused at handshake: never Ready, LastError naming both identities, the
// refusal reported; a worker of another stoker version with the same
// output is taken.
func TestDecoderRefused(t *testing.T) {
	ours := pipeline.LocalIdentity()
	theirs := ours
	theirs.Output++
	w := &scriptedWorker{info: &stokerv1.WorkerInfo{Workers: 1, MaxLeases: 8, Decoder: IdentityProto(theirs)}}
	refused := make(chan error, 16)
	p, err := Dial(startWorker(t, w), nil, WithMaxBackoff(50*time.Millisecond), WithDecoderRefused(func(err error) {
		select {
		case refused <- err:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	got := within(t, "refusal", refused)
	if !errors.Is(got, ErrDecoder) || !strings.Contains(got.Error(), ours.String()) || !strings.Contains(got.Error(), theirs.String()) {
		t.Errorf("refusal %v: want ErrDecoder naming %v and %v", got, ours, theirs)
	}
	within(t, "second refusal", refused) // a second attempt: the first's LastError is set by now
	if p.Ready() || !errors.Is(p.LastError(), ErrDecoder) || !strings.HasPrefix(p.LastError().Error(), "decoder differs: output version") {
		t.Errorf("ready %v, last error %v", p.Ready(), p.LastError())
	}
	if _, err := p.Make(context.Background(), job(&stokerv1.JobSpec{}), leaseK(0), &pipeline.Batch{}); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Make: %v, want ErrNotConnected", err)
	}
	p.Close()
	w.mu.Lock()
	n := len(w.reqs)
	w.mu.Unlock()
	if n != 0 {
		t.Errorf("the refused worker got %d requests", n)
	}

	other := ours
	other.Version = "v0.0.0-another"
	w2 := &scriptedWorker{info: &stokerv1.WorkerInfo{Workers: 1, MaxLeases: 8, Decoder: IdentityProto(other)}}
	if p := dialReady(t, startWorker(t, w2)); p.LastError() != nil {
		t.Errorf("ready with last error %v", p.LastError())
	}

	old := &scriptedWorker{info: &stokerv1.WorkerInfo{Workers: 1, MaxLeases: 8}}
	oldRefused := make(chan error, 1)
	p3, err := Dial(startWorker(t, old), nil, WithDecoderRefused(func(err error) {
		select {
		case oldRefused <- err:
		default:
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer p3.Close()
	if got := within(t, "refusal of the older worker", oldRefused); !errors.Is(got, ErrDecoder) || !strings.Contains(got.Error(), "older") {
		t.Errorf("a worker that says nothing of its decoder: %v", got)
	}
}

// TestChunksLandInPlace: a batch's chunks are copied straight into the
// buffer Make is given (a ring slot, on a coordinator whose trainer is on
// shared memory), and the slots Keep names are copied aside as they
// pass, a chunk boundary inside them or not; one not in the batch is not.
func TestChunksLandInPlace(t *testing.T) {
	w := &scriptedWorker{chunkBytes: 2} // samples of 3 bytes: most cross a chunk boundary
	p := dialReady(t, startWorker(t, w))
	j := job(&stokerv1.JobSpec{Dataset: "d"})
	l := &lease.Lease{Indices: []int64{10, 11, 12, 13}, Keep: []int{0, 2, 9}}
	slot := make([]byte, 0, 4*sampleBytes)
	b := pipeline.Batch{Data: slot}
	made, err := p.Make(context.Background(), j, l, &b)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Data) != 4*sampleBytes || &b.Data[0] != &slot[:1][0] {
		t.Fatalf("batch of %d bytes, in its buffer: %v", len(b.Data), len(b.Data) > 0 && &b.Data[0] == &slot[:1][0])
	}
	for i, v := range b.Data {
		if v != pixel(i) {
			t.Fatalf("byte %d: %d, want %d", i, v, pixel(i))
		}
	}
	for i, slot := range []int{0, 2} {
		if got, want := made.Kept[i], b.Data[slot*sampleBytes:(slot+1)*sampleBytes]; !bytes.Equal(got, want) {
			t.Errorf("kept slot %d: %v, want %v", slot, got, want)
		}
	}
	if len(made.Kept) != 3 || made.Kept[2] != nil {
		t.Errorf("kept %v, want slots 0 and 2 only", made.Kept)
	}
}

// TestChunksLandAtPlaces: a part of a batch (Lease.Place) has each sample
// copied to its place in the whole batch's buffer, a chunk boundary inside
// it or not, the buffer's other bytes untouched and its length kept; the
// slots Keep names (the part's own) are copied aside from the stream.
func TestChunksLandAtPlaces(t *testing.T) {
	w := &scriptedWorker{chunkBytes: 2} // samples of 3 bytes: most cross a chunk boundary
	p := dialReady(t, startWorker(t, w))
	j := job(&stokerv1.JobSpec{Dataset: "d"})
	place := []int{4, 1, 2}
	l := &lease.Lease{Indices: []int64{10, 11, 12}, Keep: []int{1}, Place: place}
	whole := bytes.Repeat([]byte{0xee}, 6*sampleBytes)
	b := pipeline.Batch{Data: whole}
	made, err := p.Make(context.Background(), j, l, &b)
	if err != nil {
		t.Fatal(err)
	}
	if b.N != 3 || len(b.Data) != len(whole) || &b.Data[0] != &whole[0] {
		t.Fatalf("a part of %d samples in %d bytes (the whole buffer: %v)", b.N, len(b.Data), &b.Data[0] == &whole[0])
	}
	want := bytes.Repeat([]byte{0xee}, 6*sampleBytes)
	for s, at := range place {
		for i := range sampleBytes {
			want[at*sampleBytes+i] = pixel(s*sampleBytes + i)
		}
	}
	if !bytes.Equal(whole, want) {
		t.Errorf("the batch's buffer:\n%v, want\n%v", whole, want)
	}
	if got := made.Kept[0]; !bytes.Equal(got, want[place[1]*sampleBytes:(place[1]+1)*sampleBytes]) {
		t.Errorf("kept slot 1: %v, want the part's second sample %v", got, want[place[1]*sampleBytes:(place[1]+1)*sampleBytes])
	}

	// A place past the buffer ends the stream as a protocol error, not
	// a write out of bounds.
	bad := &lease.Lease{Indices: []int64{10}, Place: []int{6}}
	if _, err := p.Make(context.Background(), j, bad, &pipeline.Batch{Data: make([]byte, 6*sampleBytes)}); err == nil {
		t.Error("a place past the buffer: no error")
	}
}

// TestRetiredTurnsLeasesAway: once Retire has begun, a Make (as one the
// coordinator started just before it removed the peer) is turned away as
// draining, before anything is sent, and Retire does not wait for it: the
// lease is made elsewhere and none fails on a stream Retire closes.
func TestRetiredTurnsLeasesAway(t *testing.T) {
	w, p, j := oneLeaseMade(t)
	var b pipeline.Batch
	if n := p.Retire(time.Minute, nil); n != 0 {
		t.Fatalf("Retire with no lease in flight: %d unfinished", n)
	}
	_, err := p.Make(context.Background(), j, leaseK(1), &b)
	if !errors.Is(err, lease.ErrDraining) {
		t.Fatalf("Make on a retired peer: %v, want lease.ErrDraining", err)
	}
	if n := p.InFlight(); n != 0 {
		t.Errorf("%d leases in flight after a turned-away Make", n)
	}
	for _, r := range w.waitFor(t, "the first lease", func(r []*stokerv1.WorkRequest) bool { return len(r) >= 3 }) {
		if l := r.GetLease(); l != nil && l.GetNumber() == 1 {
			t.Errorf("the turned-away lease was sent: %v", l)
		}
	}
}

// TestDrainedPeerTurnsLeasesAway: a lease the coordinator chose for a peer
// just before its worker drained (the stream ended, cleanly) is turned
// away as draining, as one chosen a moment earlier would have been, not
// as a peer that is not connected: no one's failure
// (cmd/stoker's TestDrainWorker saw one counted as an error).
func TestDrainedPeerTurnsLeasesAway(t *testing.T) {
	changed := make(chan struct{}, 1)
	p, err := Dial(startWorker(t, &scriptedWorker{drains: true}), func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}, WithMaxBackoff(time.Hour)) // no second stream while the test looks
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for {
		p.mu.Lock()
		ended := p.st == nil && p.streams.Load() >= 1
		p.mu.Unlock()
		if ended {
			break
		}
		within(t, "the stream's end", changed)
	}
	if _, err := p.Make(context.Background(), job(&stokerv1.JobSpec{}), leaseK(0), &pipeline.Batch{}); !errors.Is(err, lease.ErrDraining) {
		t.Errorf("Make after the worker drained: %v, want lease.ErrDraining", err)
	}
	if p.Ready() || !errors.Is(p.LastError(), lease.ErrDraining) {
		t.Errorf("ready %v, last error %v: want not ready, draining", p.Ready(), p.LastError())
	}
}
