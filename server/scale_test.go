package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/work"
	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/plan"
)

// peers starts n worker servers over root and returns them and their
// addresses joined for Config.Peers.
func peers(t *testing.T, root string, n int) ([]*testEnv, string) {
	t.Helper()
	var envs []*testEnv
	var addrs []string
	for range n {
		e := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 1})
		envs = append(envs, e)
		addrs = append(addrs, e.addr)
	}
	return envs, strings.Join(addrs, ",")
}

// checkOnce checks that an epoch has batch numbers 0..n-1 in order and
// every planned index exactly once.
func checkOnce(t *testing.T, ep epoch, plan plan.Plan) {
	t.Helper()
	if len(ep.batches) != plan.Batches() || ep.end == nil || ep.end.GetBatches() != uint64(plan.Batches()) {
		t.Fatalf("%d batches, EpochEnd %v; want %d", len(ep.batches), ep.end, plan.Batches())
	}
	for k, b := range ep.batches {
		if b.hdr.GetNumber() != uint64(k) {
			t.Fatalf("batch %d has number %d", k, b.hdr.GetNumber())
		}
		want := plan.Batch(k)
		got := b.hdr.GetIndices()
		// The bad sample is padded with a good one of its batch.
		for i := range want {
			if want[i] != got[i] && want[i] != badIndex {
				t.Fatalf("batch %d: indices %v, plan %v", k, got, want)
			}
		}
	}
}

func TestPeersSameBytes(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	alone := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
	ws, addrs := peers(t, root, 3)
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addrs})
	waitPeers(t, coord, 3) // the work can be spread only over peers connected
	open := smallJob("tiny", 4)
	want := alone.collect(t, open)
	got := coord.collect(t, open)
	checkOnce(t, got, plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 4}))
	sameBatches(t, "3 peers vs one server", want.batches, got.batches)
	used := 0
	for _, w := range ws {
		if testutil.ToFloat64(w.srv.m.work.Leases.WithLabelValues("done")) > 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("%d of 3 peers made batches, want the work spread", used)
	}
}

// TestLocalAndPeersSameBytes: a coordinator that decodes too (--workers 2)
// leases each batch in parts (cache affinity) to its own executor and two
// peers: the local part is made in a buffer of its own and copied into the
// batch, the peers' go straight to their places. The batches are the very
// bytes one server makes alone.
func TestLocalAndPeersSameBytes(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	alone := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
	_, addrs := peers(t, root, 2)
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2, Peers: addrs})
	waitPeers(t, coord, 2)
	open := smallJob("tiny", 8)
	want := alone.collect(t, open)
	got := coord.collect(t, open)
	checkOnce(t, got, plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 8}))
	sameBatches(t, "the local executor and 2 peers vs one server", want.batches, got.batches)
	if n := testutil.ToFloat64(coord.srv.m.coord.Leases.WithLabelValues("local")); n == 0 {
		t.Error("the coordinator's own executor made no part")
	}
	if home := testutil.ToFloat64(coord.srv.m.coord.AffinitySamples.WithLabelValues("home")); home == 0 {
		t.Error("no sample made at its home: the batches were not leased in parts")
	}
}

// waitPeers waits until e has n peers ready.
func waitPeers(t testing.TB, e *testEnv, n int) {
	t.Helper()
	waitUntilState(t, fmt.Sprintf("%d peers ready", n), func() string {
		return fmt.Sprintf("%v ready", testutil.ToFloat64(e.srv.m.peersReady))
	}, func() bool { return testutil.ToFloat64(e.srv.m.peersReady) >= float64(n) })
}

// slowCollect reads a one-epoch stream granting one credit per batch, and
// calls after(k) once batch k has been read.
func slowCollect(t *testing.T, e *testEnv, open *pb.OpenJob, after func(k int)) epoch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open.Credits = 1
	stream := e.feedStream(t, ctx, open)
	var ep epoch
	m, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	ep.info = m.GetJob()
	for {
		b, end, err := readBatch(stream, MaxChunkBytes)
		if err != nil {
			t.Fatal(err)
		}
		if end != nil {
			ep.end = end
			break
		}
		ep.batches = append(ep.batches, b)
		after(len(ep.batches) - 1)
		// io.EOF: the server has sent everything and closed the stream.
		if err := stream.Send(&pb.FeedRequest{Msg: &pb.FeedRequest_Credit{Credit: &pb.Credit{Credits: 1}}}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after EpochEnd: %v", err)
	}
	return ep
}

func TestPeerDiesMidEpoch(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	ws, addrs := peers(t, root, 2)
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addrs, LeaseTimeout: 2 * time.Second})
	plan := plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 2})
	ep := slowCollect(t, coord, smallJob("tiny", 2), func(k int) {
		time.Sleep(20 * time.Millisecond) // a trainer's step
		if k == 5 {
			ws[0].stop()
		}
	})
	checkOnce(t, ep, plan)
	dead := ws[0].addr
	if testutil.ToFloat64(coord.srv.m.coord.Leases.WithLabelValues(dead)) == 0 {
		t.Error("the peer that died never had a lease")
	}
}

// hungWorker is a WorkService that says hello and then never answers a
// lease: a peer that accepts and hangs.
type hungWorker struct {
	pb.UnimplementedWorkServiceServer
}

func (hungWorker) Work(stream pb.WorkService_WorkServer) error {
	if err := stream.Send(&pb.WorkResponse{Msg: &pb.WorkResponse_Worker{Worker: &pb.WorkerInfo{
		Workers: 1, MaxLeases: 4, Decoder: work.IdentityProto(pipeline.LocalIdentity()),
	}}}); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return nil
		}
	}
}

func TestPeerHung(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterWorkServiceServer(gs, hungWorker{})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	_, good := peers(t, root, 1)
	const timeout = 500 * time.Millisecond
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: lis.Addr().String() + "," + good, LeaseTimeout: timeout})
	waitPeers(t, coord, 2)
	start := time.Now()
	ep := coord.collect(t, smallJob("tiny", 4))
	checkOnce(t, ep, plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 4}))
	// Its leases time out, or are outrun by their hedges first.
	failures := coord.srv.m.coord.LeaseFailures
	timedOut := testutil.ToFloat64(failures.WithLabelValues(lis.Addr().String(), "timeout"))
	outrun := testutil.ToFloat64(failures.WithLabelValues(lis.Addr().String(), "slow"))
	if timedOut+outrun == 0 {
		t.Error("no lease of the hung peer timed out or was outrun by its hedge")
	}
	t.Logf("the hung peer's leases: %v timed out, %v outrun by their hedges", timedOut, outrun)
	t.Logf("epoch with a hung peer: %v", time.Since(start))
}

func TestPeerRefused(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 13, true)
	other := makeDataset(t, []string{"a", "b", "c"}, 12, true)
	stranger := startServer(t, Config{Datasets: map[string]string{"tiny": other}, Workers: 1})
	_, good := peers(t, root, 1)
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: stranger.addr + "," + good})
	// Static peers connect one after another: a job begun before the
	// stranger is ready could be made without ever asking it.
	waitPeers(t, coord, 2)
	ep := coord.collect(t, smallJob("tiny", 4))
	checkOnce(t, ep, plan.New(plan.Spec{Size: dsSize, Seed: 42, Shuffle: true, World: 1, BatchSize: 4}))
	if got := testutil.ToFloat64(coord.srv.m.coord.LeaseFailures.WithLabelValues(stranger.addr, "refused")); got == 0 {
		t.Error("the peer with other data was not counted as refusing")
	}

	// With only the stranger, the job fails and says why.
	alone := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: stranger.addr})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := readEpoch(alone.feedStream(t, ctx, smallJob("tiny", 4)))
	st := status.Convert(err)
	fpOurs := alone.srv.datasets["tiny"].Fingerprint()
	fpTheirs := stranger.srv.datasets["tiny"].Fingerprint()
	if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), fpOurs) || !strings.Contains(st.Message(), fpTheirs) {
		t.Errorf("got %v; want FailedPrecondition naming fingerprints %s and %s", err, fpOurs, fpTheirs)
	}
}

func TestWorkProtocolErrors(t *testing.T) {
	e := newEnv(t, Config{Workers: 1})
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	work := pb.NewWorkServiceClient(conn)

	// A job that does not exist here is refused per lease, naming it.
	stream, err := work.Work(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetWorker().GetMaxLeases() == 0 {
		t.Fatalf("hello: %v, %v", m, err)
	}
	spec := smallJob("imagenet", 4).GetJob()
	stream.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 1, Spec: spec}}})
	stream.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 7, Job: 1, Indices: []int64{0, 1}}}})
	m, err := stream.Recv()
	if f := m.GetFailed(); err != nil || f.GetLease() != 7 || codes.Code(f.GetCode()) != codes.NotFound || !strings.Contains(f.GetMessage(), `"imagenet"`) {
		t.Errorf("got %v, %v; want LeaseFailed NotFound for lease 7", m, err)
	}
	// A lease of an index out of the dataset fails; the stream goes on.
	good := smallJob("tiny", 4).GetJob()
	stream.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Job{Job: &pb.WorkJob{Id: 2, Spec: good}}})
	stream.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 8, Job: 2, Indices: []int64{0, 1000}}}})
	m, err = stream.Recv()
	if f := m.GetFailed(); err != nil || f.GetLease() != 8 || codes.Code(f.GetCode()) != codes.InvalidArgument {
		t.Errorf("got %v, %v; want LeaseFailed InvalidArgument for lease 8", m, err)
	}
	stream.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 9, Job: 2, Number: 3, Indices: []int64{0, 1}}}})
	m, err = stream.Recv()
	if d := m.GetDone(); err != nil || d.GetLease() != 9 || d.GetBatch().GetNumber() != 3 || !slices.Equal(d.GetBatch().GetIndices(), []int64{0, 1}) {
		t.Errorf("got %v, %v; want LeaseDone for lease 9", m, err)
	}
	// A lease naming an unregistered job breaks the protocol: the stream ends.
	stream.Send(&pb.WorkRequest{Msg: &pb.WorkRequest_Lease{Lease: &pb.Lease{Id: 10, Job: 99, Indices: []int64{0}}}})
	for err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "job 99") {
		t.Errorf("got %v; want InvalidArgument naming job 99", err)
	}
}

func TestFeedEpochsOnOneStream(t *testing.T) {
	e := newEnv(t, Config{})
	open := smallJob("tiny", 8)
	open.Epochs = 3
	open.Epoch = 2
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	stream := e.feedStream(t, ctx, open)
	for ep := uint64(2); ep < 5; ep++ {
		m, err := stream.Recv()
		if err != nil || m.GetJob().GetEpoch() != ep {
			t.Fatalf("epoch %d: opened with %v, %v", ep, m, err)
		}
		var got []gotBatch
		for {
			b, end, err := readBatch(stream, MaxChunkBytes)
			if err != nil {
				t.Fatal(err)
			}
			if end != nil {
				if end.GetEpoch() != ep {
					t.Errorf("EpochEnd says %d, want %d", end.GetEpoch(), ep)
				}
				break
			}
			got = append(got, b)
		}
		one := smallJob("tiny", 8)
		one.Epoch = ep
		sameBatches(t, "epoch on a long stream vs alone", e.collect(t, one).batches, got)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last epoch: %v, want EOF", err)
	}
}

func TestFeedResumeSkip(t *testing.T) {
	e := newEnv(t, Config{})
	full := e.collect(t, smallJob("tiny", 4))
	open := smallJob("tiny", 4)
	open.AsReady = true
	open.StartBatch = 2
	open.SkipBatches = []uint64{3, 5, 9}
	got := e.collect(t, open)
	var nums []uint64
	for _, b := range got.batches {
		nums = append(nums, b.hdr.GetNumber())
		if !slices.Equal(b.data, full.batches[b.hdr.GetNumber()].data) {
			t.Errorf("batch %d differs from the full epoch's", b.hdr.GetNumber())
		}
	}
	slices.Sort(nums)
	if want := []uint64{2, 4, 6, 7, 8}; !slices.Equal(nums, want) {
		t.Errorf("batches %v, want %v", nums, want)
	}
}

func TestDescribeJob(t *testing.T) {
	e := newEnv(t, Config{})
	resp, err := e.client.DescribeJob(context.Background(), &pb.DescribeJobRequest{Job: smallJob("tiny", 8).GetJob(), Epoch: 3, Consumed: 17})
	if err != nil {
		t.Fatal(err)
	}
	if i := resp.GetInfo(); i.GetEpoch() != 3 || i.GetSamples() != dsSize-17 || i.GetBatches() != 3 {
		t.Errorf("info %v; want epoch 3, %d samples in 3 batches", i, dsSize-17)
	}
	if got := testutil.ToFloat64(e.srv.m.streamsActive); got != 0 {
		t.Errorf("DescribeJob opened a stream")
	}
	if _, err := e.client.DescribeJob(context.Background(), &pb.DescribeJobRequest{Job: smallJob("nope", 8).GetJob()}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown dataset: %v", err)
	}
}
