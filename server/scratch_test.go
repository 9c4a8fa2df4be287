package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
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
// rotated, a Mosaic with the overlap mask (with and without the partner
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
		&pb.Op{Op: &pb.Op_RandomRotation{RandomRotation: &pb.RandomRotation{Degrees: &pb.Range{Min: -30, Max: 30}, Expand: true}}},
		&pb.Op{Op: &pb.Op_Resize{Resize: &pb.Resize{Height: 40, Width: 40}}})
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
	}{{"masks", det, masks}, {"mosaic", noCache, mosaic}, {"mosaic-cached", cached, mosaic}, {"yolo", seg, yolo}}
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
			// scratch, reserved.
			scratch, inUse := gauge(t, e.reg, "stoker_sample_scratch_bytes"), gauge(t, e.reg, "stoker_memory_budget_in_use_bytes")
			if scratch <= 0 || inUse < scratch+float64(base) {
				t.Fatalf("while the job runs: scratch gauge %v, budget in use %v (%d of it the annotations'): want scratch above 0, within the budget in use", scratch, inUse, base)
			}
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

// TestScratchRefusedAtOpen: a job one of whose samples needs more
// scratch than the batch budget has beside its batch buffers is refused
// when it opens, RESOURCE_EXHAUSTED, naming the sizes and
// --memory-budget: a Mosaic of imgsz 640 (its canvas, images and warp
// planes, tens of MB, whatever its images), and masks rotated on a COCO
// set whose annotations give its images' sizes (a few MB for its
// largest, which the output's 32x32 alone would not need). The budget is
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
		&pb.Op{Op: &pb.Op_RandomRotation{RandomRotation: &pb.RandomRotation{Degrees: &pb.Range{Min: -30, Max: 30}}}})
	for _, c := range []struct {
		name string
		cfg  Config
		job  *pb.OpenJob
		says string
	}{
		{"mosaic", Config{Datasets: map[string]string{"seg": images}, Annotations: map[string]string{"seg": yaml}, Workers: 2, MemoryBudget: 24 << 20, PartnerBudget: -1},
			mosaic, "at the output's size"},
		{"coco-masks", Config{Datasets: map[string]string{"det": "../testdata/photos"}, Annotations: map[string]string{"det": ann}, Workers: 2, MemoryBudget: 24 << 20},
			masks, "for images of up to 478x466, as its dataset's annotations give them"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := startServer(t, c.cfg)
			base := e.srv.budget.InUse() // the annotations, for good
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			_, err := e.feedStream(t, ctx, c.job).Recv()
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
			}
			for _, want := range []string{"bytes of worker scratch", c.says, "--memory-budget"} {
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
// but whose samples' images do not (the YOLO kernels' planes of 300-500
// pixel photos, loaded to 32, on a budget of a few hundred KB), gets
// per-sample errors naming the memory budget and the sizes, reserved from
// each image's header before it is decoded: no over-committed budget, no
// crash. The budget is back to what it held before after.
func TestScratchPerSample(t *testing.T) {
	images, yaml := photosSegments(t)
	e := startServer(t, Config{Datasets: map[string]string{"seg": images}, Annotations: map[string]string{"seg": yaml}, Workers: 2, MemoryBudget: 400 << 10})
	base := e.srv.budget.InUse() // the annotations, for good
	job := smallJob("seg", 1)
	job.Job.Transform.Ops = []*pb.Op{namedOp("YOLOLoadImage", numArg("imgsz", 32)),
		namedOp("YOLOLetterBox", &pb.NamedArg{Name: "new_shape", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: []float64{32, 32}}}})}
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
		t.Fatalf("no sample errors, stream end %v: want the samples refused their scratch", err)
	}
	t.Logf("%d errors, the first: %s", len(msgs), msgs[0])
	for _, m := range msgs {
		for _, want := range []string{"memory budget", "worker scratch", "image needs", "bytes", "--memory-budget"} {
			if !strings.Contains(m, want) {
				t.Fatalf("error %q does not say %q", m, want)
			}
		}
	}
	waitUntil(t, "the budget back to what it held before", func() bool { return e.srv.budget.InUse() == base && e.srv.scratch.Held() == 0 })
}
