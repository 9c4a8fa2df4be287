package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// goldenEpochs is the SHA-256 of goldenEpochJob's epochs 0 and 1 over
// testdata/photos, as hashEpoch hashes them, per decode path (Identity.Path:
// libjpeg-turbo and image/jpeg decode a JPEG to different pixels). They were
// computed with the code before the coordinator and Work protocol moved to
// their own packages (commit 92b9972), with this test's job and hash, and
// the code since gives the same. pipeline's golden values
// (golden_test.go, golden_cgo_test.go) pin single samples and batches made
// in-process; these pin whole epochs as a trainer gets them over Feed,
// made by the server itself or leased to peers. Like those, they must pass
// unchanged on every architecture, with or without fused multiply-adds
// (the Go path's resampling was imaging's float code, which a fusing build
// rounded differently, until OutputVersion 5); a change means the bytes a
// trainer gets changed, which needs raising pipeline.OutputVersion. These
// are the default's, decode exact: the libjpeg-turbo path's changed with
// OutputVersion 4 (its 32 px crops had been DCT-scaled); goldenEpochsFast
// are the same epochs with decode fast, the bytes of before. Both paths'
// changed with OutputVersion 5 (antialiased bilinear became torch's
// kernel).
var goldenEpochs = map[string]string{
	pipeline.PathTurbo: "18e6e120d1197bce321841856068987d02a0b43913734091169a40e4c11aa758",
	pipeline.PathGo:    "d6ed11517307c51933402d8f30c473ef42ac846f400d980a7c58040d03fa8b4d",
}

// goldenEpochsFast are goldenEpochs' epochs made with decode fast: the Go
// path never DCT-scales, so its hash is the exact one.
var goldenEpochsFast = map[string]string{
	pipeline.PathTurbo: "3965087ed38f53a3f35564f1f1cb9641cbb157f3b5b35cbe6f7183af20fbd78e",
	pipeline.PathGo:    "d6ed11517307c51933402d8f30c473ef42ac846f400d980a7c58040d03fa8b4d",
}

// goldenPhotos is how many photos testdata/photos holds.
const goldenPhotos = 42

// goldenEpochJob is a small job over testdata/photos: 32 px crops,
// flipped, shuffled, batches of 8.
func goldenEpochJob(epoch uint64) *pb.OpenJob {
	o := smallJob("tiny", 8)
	o.Epoch = epoch
	return o
}

// hashEpoch adds an epoch's batches to h, in order: each batch's epoch,
// number, shape, dtype, labels, indices and pixels.
func hashEpoch(h hash.Hash, ep epoch) {
	u := func(v uint64) { h.Write(binary.LittleEndian.AppendUint64(nil, v)) }
	for _, b := range ep.batches {
		u(b.hdr.GetEpoch())
		u(b.hdr.GetNumber())
		u(uint64(len(b.hdr.GetShape())))
		for _, s := range b.hdr.GetShape() {
			u(uint64(s))
		}
		u(uint64(b.hdr.GetDtype()))
		u(uint64(len(b.hdr.GetLabels())))
		for _, l := range b.hdr.GetLabels() {
			u(uint64(l))
		}
		u(uint64(len(b.hdr.GetIndices())))
		for _, i := range b.hdr.GetIndices() {
			u(uint64(i))
		}
		u(uint64(len(b.data)))
		h.Write(b.data)
	}
}

// TestGoldenEpochs checks that epochs 0 and 1 of a fixed job are the same
// bytes, pinned, whether the server makes them itself (0 peers) or a
// coordinator that makes nothing itself leases them to 1 or 3 peers; in
// both decode modes. Decode fast is asked for by the job (JobSpec.decode),
// or left to the server's default (--decode fast) on a coordinator whose
// peers' default is exact: the coordinator forwards the mode it resolved.
func TestGoldenEpochs(t *testing.T) {
	for _, c := range []struct {
		name       string
		job, serve string // JobSpec.decode, the coordinator's --decode
		golden     map[string]string
	}{
		{"exact", "", "", goldenEpochs},
		{"fast-job", "fast", "", goldenEpochsFast},
		{"fast-server", "", "fast", goldenEpochsFast},
	} {
		t.Run(c.name, func(t *testing.T) { testGoldenEpochs(t, c.job, c.serve, c.golden) })
	}
}

func testGoldenEpochs(t *testing.T, jobDecode, serveDecode string, golden map[string]string) {
	id := pipeline.LocalIdentity()
	want, ok := golden[id.Path]
	if !ok {
		t.Fatalf("no golden hash for decode path %q", id.Path)
	}
	const root = "../testdata/photos"
	for _, n := range []int{0, 1, 3} {
		var e *testEnv
		if n == 0 {
			e = startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2, Decode: serveDecode})
		} else {
			_, addrs := peers(t, root, n)
			e = startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addrs, Decode: serveDecode})
			waitPeers(t, e, n)
		}
		h := sha256.New()
		for k := range uint64(2) {
			job := goldenEpochJob(k)
			job.Job.Decode = map[string]pb.Decode{"": pb.Decode_DECODE_UNSPECIFIED, "fast": pb.Decode_DECODE_FAST}[jobDecode]
			ep := e.collect(t, job)
			wantDecode := pb.Decode_DECODE_EXACT
			if jobDecode == "fast" || serveDecode == "fast" {
				wantDecode = pb.Decode_DECODE_FAST
			}
			if got := ep.info.GetDecode(); got != wantDecode {
				t.Fatalf("%d peers: JobInfo.decode %s, want %s", n, got, wantDecode)
			}
			if ep.end.GetSamples() != goldenPhotos || ep.end.GetSampleErrors() != 0 {
				t.Fatalf("%d peers, epoch %d: %d samples, %d errors; want %d, 0", n, k, ep.end.GetSamples(), ep.end.GetSampleErrors(), goldenPhotos)
			}
			hashEpoch(h, ep)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			t.Errorf("%d peers, %s path: epochs 0 and 1 hash to %s, want %s", n, id.Path, got, want)
		}
		// With 3 peers the batches were leased in parts (cache
		// affinity), each sample made at its home peer, and assembled.
		home := testutil.ToFloat64(e.srv.m.coord.AffinitySamples.WithLabelValues("home"))
		if n == 3 && home == 0 {
			t.Errorf("3 peers: no sample made at its home peer (stoker_affinity_samples_total{made=\"home\"} 0): the batches were not leased in parts")
		}
		t.Logf("%d peers: %v samples made at home, %v away", n, home, testutil.ToFloat64(e.srv.m.coord.AffinitySamples.WithLabelValues("away")))
	}
}

// TestTracedEpochsAnyTopology: a job with ops after the geometry and
// traces is the same pixels and the same traces, sample for sample,
// whether the server makes it alone or leases it to 1 peer or in parts to
// 3 (cache affinity): a trace travels with its sample.
func TestTracedEpochsAnyTopology(t *testing.T) {
	const root = "../testdata/photos"
	job := goldenEpochJob(1)
	job.Job.Trace = true
	job.Job.Transform = &pb.TransformSpec{Ops: []*pb.Op{
		opspec.Wire("RandomResizedCrop", "size", 32, "interpolation", "bicubic"),
		opspec.Wire("RandomHorizontalFlip"),
		opspec.Wire("TrivialAugmentWide"),
		opspec.Wire("RandomErasing", "value", "random"),
	}}
	var want epoch
	for _, n := range []int{0, 1, 3} {
		var e *testEnv
		if n == 0 {
			e = startServer(t, Config{Datasets: map[string]string{"tiny": root}, Workers: 2})
		} else {
			_, addrs := peers(t, root, n)
			e = startServer(t, Config{Datasets: map[string]string{"tiny": root}, Peers: addrs})
			waitPeers(t, e, n)
		}
		ep := e.collect(t, job)
		for _, b := range ep.batches {
			if got, samples := len(b.hdr.GetTraces()), len(b.hdr.GetLabels()); got != samples {
				t.Fatalf("%d peers: batch %d has %d traces for %d samples", n, b.hdr.GetNumber(), got, samples)
			}
			if d := b.hdr.GetDecode(); d != pb.Decode_DECODE_EXACT {
				t.Fatalf("%d peers: batch %d's traces say decode %s, want the default, DECODE_EXACT", n, b.hdr.GetNumber(), d)
			}
		}
		if n == 0 {
			want = ep
			continue
		}
		if len(ep.batches) != len(want.batches) {
			t.Fatalf("%d peers: %d batches, want %d", n, len(ep.batches), len(want.batches))
		}
		for i, b := range ep.batches {
			w := want.batches[i]
			if !slices.Equal(b.hdr.GetTraces(), w.hdr.GetTraces()) || !bytes.Equal(b.data, w.data) {
				t.Errorf("%d peers: batch %d differs from the lone server's (traces equal: %v)", n, b.hdr.GetNumber(),
					slices.Equal(b.hdr.GetTraces(), w.hdr.GetTraces()))
			}
		}
	}
}
