package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// viewsSpec is a transform of 5 views in 2 groups unlike in size, filter
// and ops: 2 "global" 32 px crops, 3 "local" 16 px ones.
func viewsSpec() *pb.TransformSpec {
	global := &pb.TransformSpec{Ops: []*pb.Op{
		opspec.Wire("RandomResizedCrop", "size", 32, "scale", []float64{0.4, 1}, "interpolation", "bicubic"),
		flipOp(nil),
		opspec.Wire("RandomApply", "transforms", []*pb.Op{opspec.Wire("ColorJitter", "brightness", 0.4, "contrast", 0.4, "saturation", 0.2, "hue", 0.1)}),
	}}
	local := &pb.TransformSpec{Ops: []*pb.Op{
		opspec.Wire("RandomResizedCrop", "size", 16, "scale", []float64{0.05, 0.4}),
		opspec.Wire("RandomGrayscale"),
	}}
	return &pb.TransformSpec{Views: []*pb.ViewGroup{
		{Name: "global", Count: 2, Transform: global},
		{Name: "local", Count: 3, Transform: local},
	}}
}

// goldenViewEpochs is the SHA-256 of viewsJob's epochs 0 and 1 over
// testdata/photos, as hashEpoch hashes them (each batch's views back to
// back), per decode path, as goldenEpochs.
var goldenViewEpochs = map[string]string{
	pipeline.PathTurbo: "17bc8434a5667e2a43bc0bf68bf4a2aff6f07be9102a1142cb518d728e540e25",
	pipeline.PathGo:    "6f148509958118dae48581f2ec728cece937ffad879f16680ffed3823688a44b",
}

var goldenViewEpochsFast = map[string]string{
	pipeline.PathTurbo: "de466484aa4fb0f2e91a9009acfa13d460cb447816d862bcee23d333f2c05a6b",
	pipeline.PathGo:    "6f148509958118dae48581f2ec728cece937ffad879f16680ffed3823688a44b",
}

// viewsJob is goldenEpochJob with viewsSpec's views and traces.
func viewsJob(epoch uint64) *pb.OpenJob {
	o := goldenEpochJob(epoch)
	o.Job.Transform = viewsSpec()
	o.Job.Trace = true
	return o
}

// TestViewEpochsAnyTopology: a job of several views is the same bytes,
// headers and traces (one per sample per view) whether the server makes
// it alone, leases it to 1 peer, or in parts to 3 (cache affinity), and
// those bytes are pinned: the views travel with their samples through
// every maker, the relay and the parts' assembly.
func TestViewEpochsAnyTopology(t *testing.T) {
	id := pipeline.LocalIdentity()
	const root = "../testdata/photos"
	var want []epoch
	for _, n := range []int{0, 1, 3} {
		var e *testEnv
		if n == 0 {
			e = startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
		} else {
			_, addrs := peers(t, root, n)
			e = startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addrs})
			waitPeers(t, e, n)
		}
		h := sha256.New()
		var eps []epoch
		for k := range uint64(2) {
			ep := e.collect(t, viewsJob(k))
			if ep.end.GetSamples() != goldenPhotos || ep.end.GetSampleErrors() != 0 {
				t.Fatalf("%d peers, epoch %d: %d samples, %d errors", n, k, ep.end.GetSamples(), ep.end.GetSampleErrors())
			}
			checkViews(t, ep)
			hashEpoch(h, ep)
			eps = append(eps, ep)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != goldenViewEpochs[id.Path] {
			t.Errorf("%d peers, %s path: epochs 0 and 1 of views hash to %s, want %s", n, id.Path, got, goldenViewEpochs[id.Path])
		}
		if n == 0 {
			want = eps
			fast := sha256.New()
			for k := range uint64(2) {
				o := viewsJob(k)
				o.Job.Decode = pb.Decode_DECODE_FAST
				hashEpoch(fast, e.collect(t, o))
			}
			if got := hex.EncodeToString(fast.Sum(nil)); got != goldenViewEpochsFast[id.Path] {
				t.Errorf("decode fast, %s path: epochs 0 and 1 of views hash to %s, want %s", id.Path, got, goldenViewEpochsFast[id.Path])
			}
			continue
		}
		for k := range eps {
			sameBatches(t, "views", want[k].batches, eps[k].batches)
		}
		if home := testutil.ToFloat64(e.srv.m.coord.AffinitySamples.WithLabelValues("home")); n == 3 && home == 0 {
			t.Errorf("3 peers: no sample made at its home peer: the batches were not leased in parts")
		}
	}
}

// checkViews checks an epoch of viewsSpec's views: JobInfo's views, each
// batch's views' shapes and bytes, and a trace of 5 views per sample.
func checkViews(t *testing.T, ep epoch) {
	t.Helper()
	wantInfo := "global [3 32 32], global [3 32 32], local [3 16 16], local [3 16 16], local [3 16 16]"
	var info []string
	for _, v := range ep.info.GetViews() {
		info = append(info, fmt.Sprint(v.GetName(), " ", v.GetSampleShape()))
	}
	if strings.Join(info, ", ") != wantInfo || !slices.Equal(ep.info.GetSampleShape(), []uint32{3, 32, 32}) {
		t.Fatalf("JobInfo views %v sample shape %v, want %v", info, ep.info.GetSampleShape(), wantInfo)
	}
	for _, b := range ep.batches {
		n := uint32(len(b.hdr.GetLabels()))
		if vs := b.hdr.GetViews(); len(vs) != 5 || !slices.Equal(vs[0].GetDims(), []uint32{n, 3, 32, 32}) || !slices.Equal(vs[4].GetDims(), []uint32{n, 3, 16, 16}) {
			t.Fatalf("batch %d: views %v", b.hdr.GetNumber(), vs)
		}
		if want := int(n) * 3 * (2*32*32 + 3*16*16); len(b.data) != want {
			t.Fatalf("batch %d: %d bytes, want %d", b.hdr.GetNumber(), len(b.data), want)
		}
		for i, tr := range b.hdr.GetTraces() {
			var views [][]json.RawMessage
			if err := json.Unmarshal([]byte(tr), &views); err != nil || len(views) != 5 {
				t.Fatalf("batch %d sample %d: trace %s: %v", b.hdr.GetNumber(), i, tr, err)
			}
		}
		if len(b.hdr.GetTraces()) != int(n) {
			t.Fatalf("batch %d: %d traces for %d samples", b.hdr.GetNumber(), len(b.hdr.GetTraces()), n)
		}
	}
}

// TestLyingPeerViews: a peer that alters a later view's pixels (the last
// byte of each chunk it sends: the last view's) is caught by verification,
// which compares every view of a sample, and quarantined; the trainer gets
// the epoch a server alone makes.
func TestLyingPeerViews(t *testing.T) {
	root := makeDataset(t, []string{"a", "b", "c"}, 7, false)
	job := func() *pb.OpenJob {
		o := smallJob("tiny", 4)
		o.Job.Transform = viewsSpec()
		return o
	}
	alone := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
	want := alone.collect(t, job())
	liar := lyingWorker(t, root, func(r *pb.WorkResponse) {
		if c := r.GetChunk(); c != nil && len(c.Data) > 0 {
			c.Data[len(c.Data)-1] ^= 0x40
		}
	})
	_, honest := peers(t, root, 1)
	coord := startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: liar.addr + "," + honest, VerifyFraction: 1})
	waitPeers(t, coord, 2)
	got := coord.collect(t, job())
	sameBatches(t, "views with a lying peer", want.batches, got.batches)
	if why := coord.srv.verify.Why(quarantinedMaker(t, coord, liar.addr)); why == nil {
		t.Error("the peer that lied about a view is not quarantined")
	} else {
		t.Logf("quarantined: %v", why)
	}
}

// TestViewsRefused: bad views are refused before anything is made, with
// INVALID_ARGUMENT naming what is wrong, and views over the batch limit
// with RESOURCE_EXHAUSTED saying the limit.
func TestViewsRefused(t *testing.T) {
	e := startServer(t, Config{Datasets: map[string]string{"tiny": "../testdata/photos"}, MaxBatchBytes: 1 << 20})
	crop := &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32)}}
	big := &pb.TransformSpec{Ops: []*pb.Op{rrcOp(224)}}
	for _, c := range []struct {
		name  string
		views []*pb.ViewGroup
		code  codes.Code
		want  string
	}{
		{"zero", []*pb.ViewGroup{{Count: 0, Transform: crop}}, codes.InvalidArgument, "view group 0: count 0: want at least 1"},
		{"no geometry", []*pb.ViewGroup{{Count: 1, Transform: crop}, {Name: "local", Count: 2, Transform: &pb.TransformSpec{Ops: []*pb.Op{flipOp(nil)}}}},
			codes.InvalidArgument, `view group 1 ("local"): op 0 is RandomHorizontalFlip: the first op must be the geometry`},
		{"too many", []*pb.ViewGroup{{Count: 1 << 30, Transform: crop}}, codes.InvalidArgument, "33 views or more: the limit is 32"},
		{"nested", []*pb.ViewGroup{{Count: 1, Transform: &pb.TransformSpec{Views: []*pb.ViewGroup{{Count: 1, Transform: crop}}}}}, codes.InvalidArgument, "views inside a view"},
		{"preset of views", []*pb.ViewGroup{{Count: 1, Transform: &pb.TransformSpec{Preset: "dino"}}}, codes.InvalidArgument, `transform preset "dino" makes several views`},
		{"over the budget", []*pb.ViewGroup{{Count: 10, Transform: big}}, codes.ResourceExhausted, "(10 views of each) is 12042240 bytes, over this server's limit of 1048576 bytes (--max-batch-bytes): at most 0 samples a batch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := smallJob("tiny", 8)
			o.Job.Transform = &pb.TransformSpec{Views: c.views}
			_, err := readEpoch(e.feedStream(t, context.Background(), o))
			if status.Code(err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v, want %v saying %q", err, c.code, c.want)
			}
		})
	}
}
