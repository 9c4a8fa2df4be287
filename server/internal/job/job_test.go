package job

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/dataset"
	"github.com/stoker-dev/stoker/pipeline/transform"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// names is a dataset of n samples in two classes that has names, labels
// and a fingerprint, and no bytes: New reads none.
type names int

func (n names) Len() int                         { return int(n) }
func (n names) Label(i int) int64                { return int64(i % 2) }
func (n names) Classes() []string                { return []string{"a", "b"} }
func (n names) Read(int, []byte) ([]byte, error) { return nil, fmt.Errorf("no bytes") }
func (n names) Name(i int) string                { return fmt.Sprintf("%d.jpg", i) }
func (n names) Fingerprint() string              { return fmt.Sprintf("names-%d", int(n)) }
func (n names) Close() error                     { return nil }
func (n names) ShardStarts() []int               { return []int{0, int(n) / 2} }

// env is a server of one dataset, "tiny", of 64 samples in 2 shards.
func env() Env {
	return Env{Datasets: map[string]dataset.Dataset{"tiny": names(64)}, Names: []string{"tiny"}, MaxBatchBytes: 1 << 30}
}

// spec is a job of tiny under the block shuffle, as rank of world.
func spec(rank, world uint32) *pb.JobSpec {
	return &pb.JobSpec{Dataset: "tiny", BatchSize: 4, Rank: rank, WorldSize: world, Shuffle: true, ShuffleMode: pb.ShuffleMode_SHUFFLE_MODE_BLOCK,
		Transform: &pb.TransformSpec{Preset: "imagenet-eval"}}
}

// TestNewOrigin: a job's id and the world its epoch began with are New's
// to set, from the stream that opened it: a Feed stream's id is its
// dataset's name, rank and stream; a Work job keeps its coordinator's
// name; an epoch resumed with consumed positions keeps the block
// shuffle's spans of the world it began with.
func TestNewOrigin(t *testing.T) {
	for _, tc := range []struct {
		o    Origin
		want string
	}{
		{Origin{Stream: "7"}, "tiny-r1-7"},
		{Origin{ID: "coord-a/3"}, "coord-a/3"},
		{Origin{}, ""},
	} {
		j, err := New(spec(1, 2), env(), tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if j.ID() != tc.want {
			t.Errorf("origin %+v: id %q, want %q", tc.o, j.ID(), tc.want)
		}
	}
	resumed := func(epochWorld int) []int64 {
		j, err := New(spec(0, 2), env(), Origin{EpochWorld: epochWorld})
		if err != nil {
			t.Fatal(err)
		}
		return j.EpochPlan(0, 8).Batch(0)
	}
	if a, b := resumed(0), resumed(4); fmt.Sprint(a) == fmt.Sprint(b) {
		t.Errorf("a resumed epoch's first batch is %v whether it began with 2 ranks or 4: the epoch world is not in the plan", a)
	}
}

// TestNewRefused: what New refuses is a status naming what was asked and
// what is allowed.
func TestNewRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*pb.JobSpec)
		code codes.Code
		want string
	}{
		{"unknown dataset", func(s *pb.JobSpec) { s.Dataset = "huge" }, codes.NotFound, `unknown dataset "huge"; known: tiny`},
		{"rank past the world", func(s *pb.JobSpec) { s.Rank = 2 }, codes.InvalidArgument, "rank 2: want 0..1 for world_size 2"},
		{"batch too large", func(s *pb.JobSpec) { s.BatchSize = maxBatchSize + 1 }, codes.InvalidArgument, "batch_size 65537"},
		{"another dataset", func(s *pb.JobSpec) { s.Fingerprint = "other" }, codes.FailedPrecondition, "differs"},
		{"negative cpu weight", func(s *pb.JobSpec) { s.CpuWeight = -1 }, codes.InvalidArgument, "cpu_weight -1: want a finite number > 0"},
		{"NaN cpu weight", func(s *pb.JobSpec) { s.CpuWeight = math.NaN() }, codes.InvalidArgument, "cpu_weight NaN"},
		{"unknown decode", func(s *pb.JobSpec) { s.Decode = 7 }, codes.InvalidArgument, "unknown decode 7: want DECODE_EXACT"},
		{"batch_tokens without vision tokens", func(s *pb.JobSpec) { s.BatchTokens = 16384 }, codes.InvalidArgument, "batch_tokens 16384: unsupported: transform: batch_tokens wants a SmartResize, NaFlexResize, TileResize or AnyResResize geometry"},
	} {
		s := spec(0, 2)
		tc.edit(s)
		_, err := New(s, env(), Origin{})
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.code, tc.want)
		}
	}
}

// TestCPUWeight: a job's cpu_weight (0: 1) is clamped to what the
// server's --max-cpu-weight allows: by default a client cannot raise or
// lower its share.
func TestCPUWeight(t *testing.T) {
	for _, tc := range []struct{ asked, most, want float64 }{
		{0, 0, 1}, {4, 0, 1}, {0.25, 1, 1}, {4, 8, 4}, {100, 8, 8}, {0.01, 8, 0.125}, {0, 8, 1},
	} {
		e := env()
		e.MaxCPUWeight = tc.most
		s := spec(0, 2)
		s.CpuWeight = tc.asked
		j, err := New(s, e, Origin{})
		if err != nil {
			t.Fatal(err)
		}
		if got := j.CPUWeight(); got != tc.want {
			t.Errorf("cpu_weight %v under --max-cpu-weight %v: %v, want %v", tc.asked, tc.most, got, tc.want)
		}
	}
}

// TestNewDecode: a job's decode is its own where it says, else the
// server's default, written into the spec it forwards; the transform
// decodes that way.
func TestNewDecode(t *testing.T) {
	for _, tc := range []struct {
		job  pb.Decode
		def  transform.DecodeMode
		want pb.Decode
	}{
		{pb.Decode_DECODE_UNSPECIFIED, transform.DecodeExact, pb.Decode_DECODE_EXACT},
		{pb.Decode_DECODE_UNSPECIFIED, transform.DecodeFast, pb.Decode_DECODE_FAST},
		{pb.Decode_DECODE_EXACT, transform.DecodeFast, pb.Decode_DECODE_EXACT},
		{pb.Decode_DECODE_FAST, transform.DecodeExact, pb.Decode_DECODE_FAST},
	} {
		s := spec(0, 1)
		s.Decode = tc.job
		e := env()
		e.Decode = tc.def
		j, err := New(s, e, Origin{})
		if err != nil {
			t.Fatal(err)
		}
		if got := j.ForwardSpec().GetDecode(); got != tc.want {
			t.Errorf("job %s, server default %s: forwarded %s, want %s", tc.job, tc.def, got, tc.want)
		}
		if got := j.Transform().DecodeMode(); got != DecodeMode(tc.want) {
			t.Errorf("job %s, server default %s: the transform decodes %s", tc.job, tc.def, got)
		}
		if got := j.Info(0, j.EpochPlan(0, 0)).GetDecode(); got != tc.want {
			t.Errorf("job %s, server default %s: JobInfo.decode %s, want %s", tc.job, tc.def, got, tc.want)
		}
		if s.GetDecode() != tc.job {
			t.Errorf("New wrote the caller's spec: decode %s, was %s", s.GetDecode(), tc.job)
		}
	}
}
