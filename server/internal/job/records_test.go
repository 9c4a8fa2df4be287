package job

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// grouped is names as records of 1, 2 or 3 images (record r has 1 + r%3),
// as a conversation file's records of several images are.
type grouped struct {
	names
	first []int
	rec   []int
}

func newGrouped(records int) *grouped {
	g := &grouped{}
	for r := range records {
		g.first = append(g.first, len(g.rec))
		for range 1 + r%3 {
			g.rec = append(g.rec, r)
		}
	}
	g.first = append(g.first, len(g.rec))
	g.names = names(len(g.rec))
	return g
}

func (g *grouped) Records() int                     { return len(g.first) - 1 }
func (g *grouped) Record(r int) (int, int)          { return g.first[r], g.first[r+1] - g.first[r] }
func (g *grouped) RecordOf(i int) int               { return g.rec[i] }
func (g *grouped) MostImages() int                  { return 3 }
func (g *grouped) ShardStarts() []int               { return []int{0} }
func (g *grouped) Fingerprint() string              { return "grouped" }
func (g *grouped) Name(i int) string                { return fmt.Sprintf("r%d-%d.jpg", g.rec[i], i-g.first[g.rec[i]]) }
func (g *grouped) Read(int, []byte) ([]byte, error) { return nil, fmt.Errorf("no bytes") }

func groupedEnv(g *grouped) Env {
	return Env{Datasets: map[string]dataset.Dataset{"sft": g}, Names: []string{"sft"}, MaxBatchBytes: 1 << 30}
}

// TestRecordPlans: a job over records of several images plans records:
// every record once an epoch on one rank (and on the ranks together),
// each whole in one batch, its images consecutive and in order, at most
// batch_size records a batch; MaxSamples bounds a batch's images by the
// largest record; the fail policy is drop.
func TestRecordPlans(t *testing.T) {
	g := newGrouped(25)
	for _, world := range []uint32{1, 2, 3} {
		seen := map[int]int{}
		for rank := range world {
			s := &pb.JobSpec{Dataset: "sft", BatchSize: 4, Rank: rank, WorldSize: world, Shuffle: true, Seed: 7,
				Transform: &pb.TransformSpec{Preset: "imagenet-eval"}}
			j, err := New(s, groupedEnv(g), Origin{})
			if err != nil {
				t.Fatal(err)
			}
			if j.MaxSamples() != 12 || j.Policy() != pipeline.Drop {
				t.Fatalf("MaxSamples %d, policy %v; want 12 (4 records of up to 3), drop", j.MaxSamples(), j.Policy())
			}
			p := j.EpochPlan(3, 0)
			n := 0
			for k := range p.Batches() {
				b := p.Batch(k)
				n += len(b)
				recs := 0
				for i := 0; i < len(b); {
					r := g.RecordOf(int(b[i]))
					first, cnt := g.Record(r)
					for x := range cnt {
						if i+x >= len(b) || b[i+x] != int64(first+x) {
							t.Fatalf("world %d rank %d batch %d: %v does not hold record %d (images %d..%d) whole and in order", world, rank, k, b, r, first, first+cnt-1)
						}
					}
					seen[r]++
					recs++
					i += cnt
				}
				if recs > 4 || len(b) > j.MaxSamples() {
					t.Fatalf("batch %d: %d records, %d images; want at most 4 and %d", k, recs, len(b), j.MaxSamples())
				}
			}
			if n != p.Samples() {
				t.Errorf("world %d rank %d: Samples %d, the batches hold %d", world, rank, p.Samples(), n)
			}
			if info := j.Info(3, p); info.GetDatasetSize() != 25 {
				t.Errorf("dataset_size %d; want 25 records", info.GetDatasetSize())
			}
		}
		for r := range g.Records() {
			if seen[r] < 1 || (world == 1 && seen[r] != 1) {
				t.Errorf("world %d: record %d served %d times", world, r, seen[r])
			}
		}
	}
}

// TestRecordsRefused: what a job over records of several images cannot
// be is refused saying why.
func TestRecordsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*pb.JobSpec)
		code codes.Code
		want string
	}{
		{"pad", func(s *pb.JobSpec) { s.FailPolicy = pb.FailPolicy_FAIL_POLICY_PAD }, codes.InvalidArgument, "no other image may take the place"},
		{"repeats", func(s *pb.JobSpec) { s.Repeats = 2 }, codes.Unimplemented, "records of several images"},
		{"too many images a batch", func(s *pb.JobSpec) { s.BatchSize = maxBatchSize/3 + 1 }, codes.InvalidArgument, "over the limit of 65536"},
		{"mix", func(s *pb.JobSpec) { s.Dataset, s.Mix = "", []*pb.MixPart{{Dataset: "sft", Weight: 1}} }, codes.Unimplemented, "a mix of it is not served"},
	} {
		s := &pb.JobSpec{Dataset: "sft", BatchSize: 4, Shuffle: true, Transform: &pb.TransformSpec{Preset: "imagenet-eval"}}
		tc.edit(s)
		_, err := New(s, groupedEnv(newGrouped(300)), Origin{})
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.code, tc.want)
		}
	}
}

// TestRecordsHeader: BatchHeader.records is each image's record, -1 for
// a record not whole: one of its images failed (dropped: its others are
// marked), or its images are not all there in order.
func TestRecordsHeader(t *testing.T) {
	g := newGrouped(6) // records 0:[0] 1:[1 2] 2:[3 4 5] 3:[6] 4:[7 8] 5:[9 10 11]
	for _, c := range []struct {
		indices []int64
		failed  []int64
		want    string
	}{
		{[]int64{3, 4, 5, 0, 1, 2}, nil, "[2 2 2 0 1 1]"},
		{[]int64{3, 5, 0}, []int64{4}, "[-1 -1 0]"},
		{[]int64{1, 2, 6}, []int64{99}, "[1 1 3]"},
		{[]int64{2, 1, 7, 8}, nil, "[-1 -1 4 4]"},
		{[]int64{9, 10}, nil, "[-1 -1]"},
		{[]int64{0, 0}, nil, "[0 0]"},
		{[]int64{-1, 12}, nil, "[-1 -1]"},
	} {
		var errs []pipeline.SampleError
		for _, f := range c.failed {
			errs = append(errs, pipeline.SampleError{Index: f})
		}
		if got := fmt.Sprint(recordsHeader(g, g.Len(), c.indices, errs)); got != c.want {
			t.Errorf("%v, failed %v: %s; want %s", c.indices, c.failed, got, c.want)
		}
	}
}
