package server

import (
	"context"
	"fmt"
	"image/jpeg"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	"github.com/stoker-dev/stoker/pipeline/codec"
	"github.com/stoker-dev/stoker/pipeline/dataset"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/coord"
	jobpkg "github.com/stoker-dev/stoker/server/internal/job"
)

// gauge is the value of the gauge name in reg (-1 when it is not there).
func gauge(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// scratchJobs are jobs whose samples need the counted scratch: masks
// rotated (then resized; the image whole, first) and through a
// perspective, a Mosaic with the overlap mask (with and without the partner
// cache), the YOLO geometry's kernels.
func scratchJobs(t *testing.T) []struct {
	name string
	cfg  Config
	job  *pb.OpenJob
} {
	ann, _ := photosMasks(t)
	images, yaml := photosSegments(t)
	masks := smallJob("det", 4)
	masks.Job.Targets = true
	masks.Job.TargetFields = []string{"boxes", "labels", "masks"}
	masks.Job.Transform.Ops = append(masks.Job.Transform.Ops,
		opspec.Wire("RandomRotation", "degrees", []float64{-30, 30}, "expand", true),
		opspec.Wire("Resize", "size", []int{40, 40}))
	persp := smallJob("det", 4)
	persp.Job.Targets = true
	persp.Job.TargetFields = []string{"boxes", "labels", "masks"}
	one := 1.0
	persp.Job.Transform.Ops = append(persp.Job.Transform.Ops,
		opspec.Wire("RandomPerspective", "p", one))
	first := smallJob("det", 4)
	first.Job.Targets = true
	first.Job.TargetFields = []string{"boxes", "labels", "masks"}
	first.Job.Transform.Ops = []*pb.Op{rotFirst, opspec.Wire("Resize", "size", []int{40, 40})}
	mosaic := smallJob("seg", 4)
	mosaic.Job.Targets = true
	mosaic.Job.TargetFields = []string{"boxes", "labels", "overlap_mask"}
	mosaic.Job.Transform.Ops = []*pb.Op{namedOp("YOLOMosaic", numArg("imgsz", 96), numArg("p", 1)),
		namedOp("YOLORandomPerspective", &pb.NamedArg{Name: "size", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: []float64{96, 96}}}}),
		namedOp("YOLOMixUp", numArg("p", 1))}
	yolo := smallJob("seg", 4)
	yolo.Job.Transform.Ops = []*pb.Op{namedOp("YOLOLoadImage", numArg("imgsz", 160)),
		namedOp("YOLOLetterBox", &pb.NamedArg{Name: "new_shape", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: []float64{128, 160}}}})}
	det := Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 2, MemoryBudget: 256 << 20}
	seg := Config{Datasets: map[string]string{"seg": images}, Annotations: map[string]string{"seg": yaml}, Workers: 2, MemoryBudget: 256 << 20}
	cached := seg
	cached.PartnerBudget = 32 << 20
	noCache := seg
	noCache.PartnerBudget = -1
	return []struct {
		name string
		cfg  Config
		job  *pb.OpenJob
	}{{"masks", det, masks}, {"masks-perspective", det, persp}, {"masks-rotate-first", det, first}, {"mosaic", noCache, mosaic}, {"mosaic-cached", cached, mosaic}, {"yolo", seg, yolo}}
}

// TestScratchInBudget: a job whose samples need the workers' scratch for
// masks, a Mosaic (and MixUp) or the YOLO kernels has it reserved in the
// memory budget while it runs: after its first batch the scratch gauge
// (stoker_sample_scratch_bytes) is above zero and within the budget's in
// use (stoker_memory_budget_in_use_bytes); no sample kept more than its
// bound from its header reserved; once the stream has ended both are
// back to zero.
func TestScratchInBudget(t *testing.T) {
	for _, c := range scratchJobs(t) {
		t.Run(c.name, func(t *testing.T) {
			e := startServer(t, c.cfg)
			base := e.srv.budget.InUse() // the annotations, for good
			job := c.job
			job.Credits, job.Epochs = 1, 0 // epoch after epoch: the job runs until the stream ends
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			stream := e.feedStream(t, ctx, job)
			first, err := stream.Recv()
			if err != nil || first.GetJob() == nil {
				t.Fatalf("first message %v, %v; want JobInfo", first, err)
			}
			b, end, err := readBatch(stream, first.GetJob().GetMaxChunkBytes())
			if err != nil || end != nil {
				t.Fatalf("first batch: %v (end %v)", err, end)
			}
			if errs := b.hdr.GetErrors(); len(errs) != 0 {
				t.Fatalf("sample errors %v", errs)
			}
			// The job is open (its stream is): its workers keep their
			// scratch, reserved. (The two gauges are read apart: while
			// workers make the window's next batches one may move
			// between the reads, so they are read again until the workers
			// rest.)
			waitUntilState(t, "the job's scratch above 0 and within the budget in use", func() string {
				return fmt.Sprintf("scratch gauge %v, budget in use %v (%d of it the annotations'), %d samples running", gauge(t, e.reg, "stoker_sample_scratch_bytes"),
					gauge(t, e.reg, "stoker_memory_budget_in_use_bytes"), base, e.srv.exec.Running())
			}, func() bool {
				scratch := gauge(t, e.reg, "stoker_sample_scratch_bytes")
				return scratch > 0 && gauge(t, e.reg, "stoker_memory_budget_in_use_bytes") >= scratch+float64(base)
			})
			cancel()
			waitUntilState(t, "the scratch and the budget back to zero", func() string {
				return fmt.Sprintf("scratch %v, in use %v (%d of it the annotations')", gauge(t, e.reg, "stoker_sample_scratch_bytes"), gauge(t, e.reg, "stoker_memory_budget_in_use_bytes"), base)
			}, func() bool {
				return gauge(t, e.reg, "stoker_sample_scratch_bytes") == 0 && e.srv.budget.InUse() == base
			})
			if n := e.srv.scratch.over.Load(); n != 0 {
				t.Errorf("%d samples kept more scratch than their bound reserved", n)
			}
		})
	}
}

// budgetFor is a --memory-budget whose batch budget has room of free
// bytes beside the annotations of cfg's datasets and the two batch
// buffers job reserves when it opens, sized on a probe server of cfg
// (the job's sizes as that server compiles them); need is what one of
// its samples needs of worker scratch for images of w x h
// (pipeline.SampleScratch).
func budgetFor(t *testing.T, cfg Config, job *pb.OpenJob, w, h int, room func(need int64) int64) (budget, need int64) {
	t.Helper()
	probe := startServer(t, cfg)
	j, err := probe.srv.newJob(job.Job, jobpkg.Origin{Stream: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	need, _, _ = probe.srv.scratchNeed(j, w, h) // checkScratch's bound
	b := probe.srv.budget.InUse() + coord.ReservedBytes(j.BatchBytes()) + room(need)
	return (b/3 + 1) * 4, need // the batch budget is 3/4 of it (no caches at this size)
}

// TestScratchRefusedAtOpen: a job one of whose samples needs more scratch
// than the batch budget has beside its batch buffers is refused when it
// opens, RESOURCE_EXHAUSTED, naming the sizes and --memory-budget: a
// Mosaic of imgsz 640 (its canvas and images, about 10 MB, whatever its
// images), and masks on a COCO set whose annotations give its images'
// sizes (its largest's source mask, which the output's 32x32 alone would
// not need); the budget has half of what the sample needs. The budget is
// back to what it held before after.
func TestScratchRefusedAtOpen(t *testing.T) {
	images, yaml := photosSegments(t)
	ann, _ := photosMasks(t)
	mosaic := smallJob("seg", 1)
	mosaic.Job.Transform.Ops = []*pb.Op{namedOp("YOLOMosaic", numArg("imgsz", 640), numArg("p", 1)),
		namedOp("YOLORandomPerspective", &pb.NamedArg{Name: "size", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: []float64{640, 640}}}})}
	masks := smallJob("det", 4)
	masks.Job.Targets = true
	masks.Job.TargetFields = []string{"boxes", "labels", "masks"}
	masks.Job.Transform.Ops = append(masks.Job.Transform.Ops,
		opspec.Wire("RandomRotation", "degrees", []float64{-30, 30}))
	for _, c := range []struct {
		name string
		cfg  Config
		job  *pb.OpenJob
		w, h int // the largest image, as the annotations say (0: they do not)
		says string
	}{
		{"mosaic", Config{Datasets: map[string]string{"seg": images}, Annotations: map[string]string{"seg": yaml}, Workers: 2, PartnerBudget: -1},
			mosaic, 0, 0, "at the output's size"},
		{"coco-masks", Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 2},
			masks, 478, 466, "for images of up to 478x466, as its dataset's annotations give them"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			var need int64
			cfg.MemoryBudget, need = budgetFor(t, cfg, c.job, c.w, c.h, func(need int64) int64 { return need / 2 })
			if floor, _ := budgetFor(t, cfg, c.job, 0, 0, func(need int64) int64 { return need }); c.w > 0 && floor >= cfg.MemoryBudget {
				t.Fatalf("the output's scratch alone (a budget of %d) does not fit %d: the test is not of the images' sizes", floor, cfg.MemoryBudget)
			}
			e := startServer(t, cfg)
			base := e.srv.budget.InUse() // the annotations, for good
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			_, err := e.feedStream(t, ctx, c.job).Recv()
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("got %v, want RESOURCE_EXHAUSTED (a sample needs %d bytes of scratch)", err, need)
			}
			for _, want := range []string{fmt.Sprintf("needs %d bytes of worker scratch", need), c.says, "--memory-budget"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			waitUntil(t, "the budget back to what it held before", func() bool { return e.srv.budget.InUse() == base })
		})
	}
}

// TestScratchPerSample: a job on a set that does not give its images'
// sizes (a YOLO one), whose scratch at its output's size fits the budget
// but whose samples' images do not (a Mosaic of imgsz 32 decodes each of
// its 300-500 pixel photos whole before load_image's resize, on a budget
// of a few hundred KB), gets
// per-sample errors naming the memory budget and the sizes, reserved from
// each image's header before it is decoded (or from its files' sizes
// before they are read): no over-committed budget, no
// crash. The budget is back to what it held before after.
func TestScratchPerSample(t *testing.T) {
	images, yaml := photosSegments(t)
	e := startServer(t, Config{Datasets: map[string]string{"seg": images}, Annotations: map[string]string{"seg": yaml}, Workers: 2, MemoryBudget: 400 << 10})
	base := e.srv.budget.InUse() // the annotations, for good
	job := smallJob("seg", 1)
	job.Job.Transform.Ops = []*pb.Op{namedOp("YOLOMosaic", numArg("imgsz", 32), numArg("p", 1))}
	msgs := refusedEpoch(t, e, job, "scratch")
	t.Logf("%d errors, the first: %s", len(msgs), msgs[0])
	for _, m := range msgs {
		wants := []string{"memory budget", "worker scratch", "image and 3 partners of up to", "bytes", "--memory-budget"}
		if strings.Contains(m, "sample files:") { // refused its files' buffers, before they were read
			wants = []string{"memory budget", "a sample's files (", "its own and 3 partners'", "bytes", "--memory-budget"}
		}
		for _, want := range wants {
			if !strings.Contains(m, want) {
				t.Fatalf("error %q does not say %q", m, want)
			}
		}
	}
	waitUntil(t, "the budget back to what it held before", func() bool { return e.srv.budget.InUse() == base && e.srv.scratch.Held() == 0 })
}

// rotFirst is a RandomRotation with expand=True, first: the image whole
// at its own size rotated.
var rotFirst = opspec.Wire("RandomRotation", "degrees", []float64{-45, 45}, "expand", true)

// photoSizes are the smallest and the largest of testdata/photos' images,
// in pixels, and the largest's size.
func photoSizes(t *testing.T) (minPx, maxPx int64, maxW, maxH int) {
	t.Helper()
	minPx = math.MaxInt64
	err := filepath.WalkDir("../testdata/photos", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || filepath.Ext(path) != ".jpg" {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		c, err := jpeg.DecodeConfig(f)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		px := int64(c.Width) * int64(c.Height)
		minPx = min(minPx, px)
		if px > maxPx {
			maxPx, maxW, maxH = px, c.Width, c.Height
		}
		return nil
	})
	if err != nil || maxPx == 0 {
		t.Fatalf("photos: %v (%d pixels at most)", err, maxPx)
	}
	return minPx, maxPx, maxW, maxH
}

// photoKeep is what a worker keeps beside its pixels after testdata/photos'
// samples (a read buffer grown to a file and a quarter, the largest C
// decoder's bound it reserved, codec.Header.LibBytes), at least (the
// smallest of each) and at most (the largest).
func photoKeep(t *testing.T) (lo, hi int64) {
	t.Helper()
	minFile, minLib := int64(math.MaxInt64), int64(math.MaxInt64)
	var maxFile, maxLib int64
	err := filepath.WalkDir("../testdata/photos", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".jpg") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hd, err := codec.ParseHeader(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		n, l := int64(len(data)+len(data)/4), hd.LibBytes()
		minFile, maxFile, minLib, maxLib = min(minFile, n), max(maxFile, n), min(minLib, l), max(maxLib, l)
		return nil
	})
	if err != nil || maxFile == 0 {
		t.Fatalf("photos: %v", err)
	}
	return minFile + minLib, maxFile + maxLib
}

// TestScratchDecodePixels: the decode's own pixels are counted in the
// memory budget on a real server of one worker, beside its read buffer
// and the C decoder's bound (photoKeep's range) and the C resampler's
// (up to its bound): a Resize then Normalize
// (made in the worker's planes, then normalized into the batch) raises
// the scratch gauge by exactly its bound, the 48x64 image's 3 planes
// (9216 bytes, pipeline.SampleScratch), and those; a RandomZoomOut then Resize (the
// image decoded at its own size, then pasted on the canvas and resized)
// by the 64x80 image's planes and the image's own (between the smallest
// and the largest photo's), within the bound at the largest photo; a
// RandomRotation with expand=True first, then a Resize, by the room of
// the image rotated (at least the image's own planes), within the bound
// at the largest photo; the budget in use rises with it. Once the stream has ended both are back
// to zero.
func TestScratchDecodePixels(t *testing.T) {
	minPx, maxPx, maxW, maxH := photoSizes(t)
	keepLo, keepHi := photoKeep(t)
	p := 1.0
	norm := opspec.Wire("Normalize", "mean", []float64{0.485, 0.456, 0.406}, "std", []float64{0.229, 0.224, 0.225})
	resize := func(h, w int) *pb.Op { return opspec.Wire("Resize", "size", []int{h, w}) }
	zoom := opspec.Wire("RandomZoomOut", "p", p, "side_range", []float64{1.5, 3})
	cfg := Config{Datasets: map[string]string{"photos": "../testdata/photos"}, Workers: 1, MemoryBudget: 256 << 20}
	for _, c := range []struct {
		name   string
		ops    []*pb.Op
		lo, hi func(bound int64) int64 // what the gauge may read, of the bound at the largest photo
	}{
		{"resize-normalize", []*pb.Op{resize(48, 64), norm},
			func(int64) int64 { return 3 * 48 * 64 }, func(int64) int64 { return 3 * 48 * 64 }},
		{"zoom-out", []*pb.Op{zoom, resize(64, 80)},
			func(int64) int64 { return 3*64*80 + 3*minPx }, func(b int64) int64 { return b }},
		{"rotate-expand-first", []*pb.Op{rotFirst, resize(64, 80)},
			func(int64) int64 { return 3 * minPx }, func(b int64) int64 { return b }},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := smallJob("photos", 4)
			job.Job.Transform.Ops = c.ops
			job.Credits, job.Epochs = 1, 0 // the job runs until the stream ends
			e := startServer(t, cfg)
			j, err := e.srv.newJob(job.Job, jobpkg.Origin{Stream: "probe"})
			if err != nil {
				t.Fatal(err)
			}
			// The C resampler's filters and rows, kept beside the pixels,
			// at most its bound at the largest photo.
			res := pipeline.ResamplerScratch(j.Transform(), maxW, maxH)
			bound := pipeline.SampleScratch(j.Transform(), nil, maxW, maxH) - res
			if c.name == "zoom-out" && bound != 3*64*80+max(3*maxPx, 3*64*80) {
				t.Fatalf("the bound at the largest photo (%dx%d) is %d, want its planes and the output's", maxW, maxH, bound)
			}
			lo, hi := c.lo(bound)+keepLo, c.hi(bound)+keepHi+res
			base := e.srv.budget.InUse()
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			stream := e.feedStream(t, ctx, job)
			if first, err := stream.Recv(); err != nil || first.GetJob() == nil {
				t.Fatalf("first message %v, %v; want JobInfo", first, err)
			}
			if _, end, err := readBatch(stream, 1<<30); err != nil || end != nil {
				t.Fatalf("first batch: %v (end %v)", err, end)
			}
			waitUntilState(t, fmt.Sprintf("the scratch gauge within [%d, %d] and in the budget in use", lo, hi), func() string {
				return fmt.Sprintf("scratch gauge %v, budget in use %v (%d before the job)", gauge(t, e.reg, "stoker_sample_scratch_bytes"),
					gauge(t, e.reg, "stoker_memory_budget_in_use_bytes"), base)
			}, func() bool {
				s := gauge(t, e.reg, "stoker_sample_scratch_bytes")
				return s >= float64(lo) && s <= float64(hi) && gauge(t, e.reg, "stoker_memory_budget_in_use_bytes") >= s+float64(base)
			})
			cancel()
			waitUntilState(t, "the scratch and the budget back to zero", func() string {
				return fmt.Sprintf("scratch %v, in use %v (%d before the job)", gauge(t, e.reg, "stoker_sample_scratch_bytes"), gauge(t, e.reg, "stoker_memory_budget_in_use_bytes"), base)
			}, func() bool {
				return gauge(t, e.reg, "stoker_sample_scratch_bytes") == 0 && e.srv.budget.InUse() == base
			})
		})
	}
}

// TestScratchRotateFirstPerSample: a RandomRotation with expand=True
// first (the image whole at its own size, rotated, then a Resize) on a
// budget whose scratch at the output's size fits, so the job opens, but
// whose photos' rotated rooms (about 1 MB each) do not: every sample
// fails naming the memory budget, its image's size and --memory-budget,
// reserved from its header before it is decoded; the budget is back to
// what it held before after.
func TestScratchRotateFirstPerSample(t *testing.T) {
	e := startServer(t, Config{Datasets: map[string]string{"photos": "../testdata/photos"}, Workers: 2, MemoryBudget: 400 << 10})
	base := e.srv.budget.InUse()
	job := smallJob("photos", 1)
	job.Job.Transform.Ops = []*pb.Op{rotFirst, opspec.Wire("Resize", "size", []int{32, 32})}
	msgs := refusedEpoch(t, e, job, "rotated room")
	t.Logf("%d errors, the first: %s", len(msgs), msgs[0])
	for _, m := range msgs {
		for _, want := range []string{"memory budget", "worker scratch (decoded pixels", "image", "--memory-budget"} {
			if !strings.Contains(m, want) {
				t.Fatalf("error %q does not say %q", m, want)
			}
		}
	}
	waitUntil(t, "the budget back to what it held before", func() bool { return e.srv.budget.InUse() == base && e.srv.scratch.Held() == 0 })
}

// refusedEpoch reads one epoch of job from e and returns its samples'
// errors (and the stream's, when the job's error limit ended it); none
// fails the test, saying what the samples should have been refused.
func refusedEpoch(t *testing.T, e *testEnv, job *pb.OpenJob, what string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	ep, err := readEpoch(e.feedStream(t, ctx, job))
	var msgs []string
	for _, b := range ep.batches {
		for _, se := range b.hdr.GetErrors() {
			msgs = append(msgs, se.GetReason())
		}
	}
	if err != nil {
		msgs = append(msgs, err.Error()) // the job's error limit ended it
	}
	if len(msgs) == 0 {
		t.Fatalf("no sample errors, stream end %v: want the samples refused their %s", err, what)
	}
	return msgs
}

// TestDatasetSizesKeepsHeldOnly: the open-time check's sizes are kept for
// the datasets the server holds, and a job's own mix of them (made per
// job) is computed from its parts and never kept, so that opening jobs
// over mixes does not grow the server's memory job by job.
func TestDatasetSizesKeepsHeldOnly(t *testing.T) {
	a, err := dataset.OpenImageFolder(makeDataset(t, []string{"a", "b"}, 3, false))
	if err != nil {
		t.Fatal(err)
	}
	b, err := dataset.OpenImageFolder(makeDataset(t, []string{"x"}, 2, false))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{datasets: map[string]dataset.Dataset{"a": a, "b": b}}
	want := max(s.datasetSizes(a).file, s.datasetSizes(b).file)
	if want <= 0 {
		t.Fatalf("largest file %d: want the ImageFolders' sizes known", want)
	}
	for range 50 {
		m, err := dataset.NewMixed([]dataset.MixPart{{Name: "a", DS: a, Weight: 1}, {Name: "b", DS: b, Weight: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.datasetSizes(m).file; got != want {
			t.Fatalf("a mix's largest file %d, want its parts' %d", got, want)
		}
	}
	other, err := dataset.OpenImageFolder(makeDataset(t, []string{"z"}, 1, false))
	if err != nil {
		t.Fatal(err)
	}
	s.datasetSizes(other)
	n := 0
	s.dsSizes.Range(func(any, any) bool { n++; return true })
	if n != 2 {
		t.Fatalf("%d datasets' sizes kept after 50 mixes and one dataset not held: want the 2 held", n)
	}
}
