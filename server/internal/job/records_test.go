package job

import (
	"fmt"
	"slices"
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
func (g *grouped) Fingerprint() string              { return "grouped" }
func (g *grouped) Name(i int) string                { return fmt.Sprintf("r%d-%d.jpg", g.rec[i], i-g.first[g.rec[i]]) }
func (g *grouped) Read(int, []byte) ([]byte, error) { return nil, fmt.Errorf("no bytes") }

// ShardStarts: a shard every 7 records, as a WebDataset's shards start
// at a sample (a record) of their own.
func (g *grouped) ShardStarts() []int {
	var starts []int
	for r := 0; r < g.Records(); r += 7 {
		starts = append(starts, g.first[r])
	}
	return starts
}

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

// TestRecordsMixRepeatsBlock: a mix with a dataset of records of several
// images (its shares in records, mix_samples counting records), repeats
// and the block shuffle (its shards as records) plan records too: each
// batch holds whole records, in order; every record of the one dataset
// at least once an epoch across the ranks (repeats: as often as RASampler
// repeats it), the mix's records drawn from both parts in proportion.
func TestRecordsMixRepeatsBlock(t *testing.T) {
	g := newGrouped(300)
	env := Env{Datasets: map[string]dataset.Dataset{"sft": g, "cls": names(200)}, Names: []string{"cls", "sft"}, MaxBatchBytes: 1 << 30}
	for _, c := range []struct {
		name  string
		edit  func(*pb.JobSpec)
		world uint32
		every int // each record of sft served at least this often across the ranks (0: the mix's draw; -1: RASampler's)
	}{
		{"repeats", func(s *pb.JobSpec) { s.Repeats = 3 }, 2, -1},
		{"block", func(s *pb.JobSpec) { s.ShuffleMode, s.ShuffleWindow = pb.ShuffleMode_SHUFFLE_MODE_BLOCK, 3 }, 2, 1},
		{"mix", func(s *pb.JobSpec) {
			s.Dataset, s.Mix = "", []*pb.MixPart{{Dataset: "sft", Weight: 3}, {Dataset: "cls", Weight: 1}}
		}, 2, 0},
		{"mix block", func(s *pb.JobSpec) {
			s.Dataset, s.Mix = "", []*pb.MixPart{{Dataset: "sft", Weight: 1}, {Dataset: "cls", Weight: 1}}
			s.ShuffleMode, s.ShuffleWindow = pb.ShuffleMode_SHUFFLE_MODE_BLOCK, 2
		}, 1, 0},
	} {
		seen, sft, images := map[int]int{}, 0, 0
		for rank := range c.world {
			s := &pb.JobSpec{Dataset: "sft", BatchSize: 5, Rank: rank, WorldSize: c.world, Shuffle: true, Seed: 3,
				Transform: &pb.TransformSpec{Preset: "imagenet-eval"}}
			c.edit(s)
			j, err := New(s, env, Origin{})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if j.groups == nil || j.MaxSamples() != 15 || j.Policy() != pipeline.Drop {
				t.Fatalf("%s: a plan of samples (MaxSamples %d); want one of records, 15 images a batch at most", c.name, j.MaxSamples())
			}
			p := j.EpochPlan(1, 0)
			for k := range p.Batches() {
				b := p.Batch(k)
				recs := 0
				for i := 0; i < len(b); {
					r := j.groups.RecordOf(int(b[i]))
					first, cnt := j.groups.Record(r)
					for x := range cnt {
						if i+x >= len(b) || b[i+x] != int64(first+x) {
							t.Fatalf("%s: rank %d batch %d: %v does not hold record %d (images %d..%d) whole and in order", c.name, rank, k, b, r, first, first+cnt-1)
						}
					}
					seen[r]++
					recs++
					if cnt > 1 || strings.HasPrefix(j.ds.Name(first), "sft:") || j.mix == nil {
						sft++
					}
					images += cnt
					i += cnt
				}
				if recs > 5 {
					t.Fatalf("%s: batch %d holds %d records; want at most 5", c.name, k, recs)
				}
			}
		}
		twice := 0
		for _, n := range seen {
			twice += min(n-1, 1)
		}
		if c.every < 0 { // RASampler: floor(300 // 256 * 256 / 2) records a rank, the copies of each on several ranks
			if n := sumOf(seen); n != 256 || twice == 0 {
				t.Errorf("%s: %d records served, %d of them more than once; want 256, some repeated", c.name, n, twice)
			}
		} else if c.every > 0 {
			for r := range g.Records() {
				if seen[r] < c.every {
					t.Errorf("%s: record %d served %d times; want at least %d", c.name, r, seen[r], c.every)
				}
			}
		} else if all := len(seen); sft == 0 || sft == images || all < 100 {
			t.Errorf("%s: %d records drawn, %d of them sft's of %d images: want both parts drawn", c.name, all, sft, images)
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
		{"too many images a batch", func(s *pb.JobSpec) { s.BatchSize = maxBatchSize/3 + 1 }, codes.InvalidArgument, "over the limit of 65536"},
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

func sumOf(m map[int]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestSeveralImagesViews: a view group made only for images of records of
// several (ViewGroup.several_images) is left out of a job over single
// images and kept over records of several; a transform of such groups
// alone over single images is refused, and one_image's groups alone over
// records of several (not over records of one image each).
func TestSeveralImagesViews(t *testing.T) {
	views := func(several ...bool) *pb.TransformSpec {
		ts := &pb.TransformSpec{}
		for i, s := range several {
			ts.Views = append(ts.Views, &pb.ViewGroup{Name: fmt.Sprintf("v%d", i), Count: 1, SeveralImages: s,
				Transform: &pb.TransformSpec{Preset: "imagenet-eval"}})
		}
		return ts
	}
	env := Env{Datasets: map[string]dataset.Dataset{"sft": newGrouped(30), "cls": names(30), "ones": newGrouped(1)},
		Names: []string{"cls", "ones", "sft"}, MaxBatchBytes: 1 << 30}
	for _, c := range []struct {
		ds      string
		several []bool
		views   int
	}{{"cls", []bool{false, false, true}, 2}, {"sft", []bool{false, false, true}, 3}, {"cls", []bool{false, true, false}, 2}, {"sft", []bool{true, false}, 2}} {
		j, err := New(&pb.JobSpec{Dataset: c.ds, BatchSize: 4, Transform: views(c.several...)}, env, Origin{})
		if err != nil {
			t.Fatalf("%s %v: %v", c.ds, c.several, err)
		}
		if fw := len(j.ForwardSpec().GetTransform().GetViews()); j.t.Views() != c.views || fw != c.views {
			t.Errorf("%s %v: %d views, %d forwarded to peers; want %d", c.ds, c.several, j.t.Views(), fw, c.views)
		}
	}
	_, err := New(&pb.JobSpec{Dataset: "cls", BatchSize: 4, Transform: views(true, true)}, env, Origin{})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "several_images") {
		t.Errorf("groups all several_images over single images: %v; want InvalidArgument naming several_images", err)
	}
	// Over records of one image and of several, each kind needs a view.
	ts := views(false, false)
	for _, g := range ts.Views {
		g.OneImage = true
	}
	_, err = New(&pb.JobSpec{Dataset: "sft", BatchSize: 4, Transform: ts}, env, Origin{})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "records of several images, whose images would get no view") {
		t.Errorf("groups all one_image over records of several: %v; want InvalidArgument", err)
	}
	if _, err = New(&pb.JobSpec{Dataset: "ones", BatchSize: 1, Transform: ts}, env, Origin{}); err != nil {
		t.Errorf("groups all one_image over records of one image each: %v; want accepted", err)
	}
	j, err := New(&pb.JobSpec{Dataset: "sft", BatchSize: 4, Transform: views(true, false)}, env, Origin{})
	if err != nil {
		t.Fatal(err)
	}
	if one, several := j.t.SkipViews(false), j.t.SkipViews(true); !slices.Equal(one, []bool{true, false}) || several != nil {
		t.Errorf("SkipViews: a record of one %v, of several %v; want [true false] (the square skipped), nil (the other group any image's)", one, several)
	}
}

// sized is names whose images' sizes are known (a manifest's): image i
// is 640 x 480, or 480 x 640 for odd i.
type sized struct{ names }

func (s sized) KnowsImageSizes() bool { return true }
func (s sized) ImageSize(i int) (w, h int, ok bool) {
	if i%2 == 1 {
		return 480, 640, true
	}
	return 640, 480, true
}

// TestBoundByData: a vision-language geometry over data of known sizes
// takes its data's largest sample as its bound (max_size, forwarded to
// peers), not its own (AnyRes's largest pinpoint, 2304 x 2304): the
// canvas of a 640 x 480 or 480 x 640 image is 768 x 768
// (select_best_resolution), so a slot is 768 x 768 (and its size, 16
// bytes); a max_size the trainer gives, and data of unknown sizes, keep
// theirs.
func TestBoundByData(t *testing.T) {
	var pins []float64
	for h := 384; h <= 2304; h += 384 {
		for w := 384; w <= 2304; w += 384 {
			pins = append(pins, float64(h), float64(w))
		}
	}
	anyres := func(maxSize ...uint32) *pb.TransformSpec {
		return &pb.TransformSpec{MaxSize: maxSize, Ops: []*pb.Op{{Op: &pb.Op_Named{Named: &pb.NamedOp{Name: "AnyResResize", Args: []*pb.NamedArg{
			{Name: "grid_pinpoints", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: pins}}}}}}}}}
	}
	env := Env{Datasets: map[string]dataset.Dataset{"known": sized{names(10)}, "unknown": names(10)}, Names: []string{"known", "unknown"}, MaxBatchBytes: 1 << 30}
	for _, c := range []struct {
		ds    string
		tf    *pb.TransformSpec
		bytes int
		fwd   []uint32
	}{
		{"known", anyres(), 3*768*768 + 16, []uint32{768, 768}},
		{"unknown", anyres(), 3*2304*2304 + 16, nil},
		{"known", anyres(2000, 2000), 3*2000*2000 + 16, []uint32{2000, 2000}},
	} {
		j, err := New(&pb.JobSpec{Dataset: c.ds, BatchSize: 4, Transform: c.tf}, env, Origin{})
		if err != nil {
			t.Fatalf("%s %v: %v", c.ds, c.tf.GetMaxSize(), err)
		}
		if got, fwd := j.t.SampleBytes(), j.ForwardSpec().GetTransform().GetMaxSize(); got != c.bytes || !slices.Equal(fwd, c.fwd) {
			t.Errorf("%s %v: a slot of %d bytes, max_size %v forwarded; want %d, %v", c.ds, c.tf.GetMaxSize(), got, fwd, c.bytes, c.fwd)
		}
	}
}
