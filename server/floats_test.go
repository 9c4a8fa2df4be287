package server

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stoker-dev/stoker/internal/opspec"
	opspkg "github.com/stoker-dev/stoker/pipeline/ops"
	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// validOpLists are transforms a server accepts, between them holding every
// op of the registry that takes a number, each with its numbers at valid
// values.
func validOpLists() [][]*pb.Op {
	w := opspec.Wire
	return [][]*pb.Op{
		{
			w("RandomResizedCrop", "size", 32, "scale", []float64{0.5, 1}, "ratio", []float64{0.75, 1.25}),
			flipOp(proto.Float64(0.5)),
			w("ColorJitter", "brightness", 0.2, "contrast", 0.2, "saturation", 0.2, "hue", 0.1),
			w("Normalize", "mean", []float64{0.5, 0.5, 0.5}, "std", []float64{0.2, 0.2, 0.2}),
		},
		{
			w("Resize", "size", []int{40, 40}),
			w("CenterCrop", "size", 32),
			w("RandomVerticalFlip", "p", 0.5),
			w("RandomGrayscale", "p", 0.2),
			w("GaussianBlur", "kernel_size", []int{5, 5}, "sigma", []float64{0.1, 2}),
			w("RandomSolarize", "threshold", 128, "p", 0.2),
			w("RandomPosterize", "bits", 4, "p", 0.2),
			w("RandomInvert", "p", 0.2),
			w("RandomEqualize", "p", 0.2),
			w("RandomAutocontrast", "p", 0.2),
			w("RandomAdjustSharpness", "sharpness_factor", 2, "p", 0.2),
			w("RandomRotation", "degrees", []float64{-10, 10}, "fill", []float64{1, 2, 3}, "center", []float64{4, 5}),
			w("RandomAffine", "degrees", []float64{-10, 10}, "translate", []float64{0.1, 0.1}, "scale", []float64{0.9, 1.1},
				"shear", []float64{-5, 5, -5, 5}, "fill", []float64{1, 2, 3}, "center", []float64{4, 5}),
			w("RandomErasing", "p", 0.2, "scale", []float64{0.02, 0.3}, "ratio", []float64{0.3, 3.3}, "value", []float64{1, 2, 3}),
			w("RandomErasing", "value", "random", "noise_mean", []float64{0.5, 0.5, 0.5}, "noise_std", []float64{0.2, 0.2, 0.2}, "count", []int{1, 2}),
			w("RandomPerspective", "distortion_scale", 0.4, "p", 0.5, "fill", []float64{1, 2, 3}),
			w("RandomApply", "p", 0.8, "transforms", []*pb.Op{
				w("ColorJitter", "brightness", []float64{0.5, 1.5}, "contrast", []float64{0.5, 1.5}, "saturation", []float64{0.5, 1.5}, "hue", []float64{-0.1, 0.1}),
			}),
			w("RandomChoice", "p", []float64{1, 2}, "transforms", []*pb.Op{
				w("RandomInvert"),
				w("RandomOrder", "transforms", []*pb.Op{w("Grayscale", "num_output_channels", 3)}),
			}),
			w("TrivialAugmentWide", "num_magnitude_bins", 31, "fill", []float64{1, 2, 3}),
			w("RandAugment", "num_ops", 2, "magnitude", 9, "num_magnitude_bins", 31, "fill", []float64{1, 2, 3}),
			w("AutoAugment", "fill", []float64{1, 2, 3}),
			w("AugMix", "severity", 3, "mixture_width", 3, "chain_depth", 2, "alpha", 1, "fill", []float64{1, 2, 3}),
			w("TimmRandAugment", "config", "rand-m9-mstd0.5-inc1", "fill", []float64{1, 2, 3}),
			w("TimmAutoAugment", "config", "v0r-mstd0.5", "fill", []float64{1, 2, 3}),
			w("TimmAugMix", "config", "augmix-m5-w4-d2", "fill", []float64{1, 2, 3}),
		},
		{ // the turns swap the sides: a Resize after them fixes the size again
			w("Resize", "size", []int{40, 48}),
			w("RandomRotate90", "p", 0.5),
			w("Resize", "size", []int{32, 32}),
		},
		{
			w("Pad", "padding", []int{4}, "fill", []float64{1, 2, 3}),
			w("RandomCrop", "size", 32, "padding", []int{2}, "pad_if_needed", true, "fill", []float64{1, 2, 3}),
		},
		{
			w("RandomZoomOut", "fill", []float64{1, 2, 3}, "side_range", []float64{1, 2}, "p", 0.5),
			w("Resize", "size", []int{32, 32}),
		},
		{
			w("RandomPhotometricDistort", "brightness", []float64{0.9, 1.1}, "contrast", []float64{0.5, 1.5}, "saturation", []float64{0.5, 1.5},
				"hue", []float64{-0.1, 0.1}, "p", 0.5),
			w("Resize", "size", []int{32, 32}),
		},
		{ // large-scale jitter
			w("ScaleJitter", "target_size", []int{48, 64}, "scale_range", []float64{0.5, 1.5}),
			w("FixedSizeCrop", "size", 32, "fill", []float64{1, 2, 3}),
		},
		{ // per-sample sizes (targets)
			w("RandomShortestSize", "min_size", []int{24, 32}, "max_size", 48),
			w("SanitizeBoundingBoxes", "min_size", 1, "min_area", 1),
		},
		{
			w("RandomResize", "min_size", 40, "max_size", 48),
			w("CenterCrop", "size", 32),
		},
		{ // the segmentation references' geometry
			w("RandomResize", "min_size", 20, "max_size", 48),
			withArgs(w("PadIfSmaller", "size", 32), typedFill([]float64{1, 2, 3}, 255)),
			w("RandomCrop", "size", 32),
		},
		{ // a job with targets (describe's "det": no keypoints, so no SanitizeKeyPoints, which takes no number)
			w("RandomResizedCrop", "size", 32),
			w("SanitizeBoundingBoxes", "min_size", 2, "min_area", 3),
			w("ClampKeyPoints"),
			w("ClampBoundingBoxes", "clamping_mode", "hard"),
		},
		{ // ultralytics' Mosaic, a named op (its partners read with each sample)
			{Op: &pb.Op_Named{Named: &pb.NamedOp{Name: "YOLOMosaic", Args: []*pb.NamedArg{
				{Name: "imgsz", Value: &pb.NamedArg_Number{Number: 32}}, {Name: "p", Value: &pb.NamedArg_Number{Number: 1}}}}}},
			{Op: &pb.Op_Named{Named: &pb.NamedOp{Name: "YOLOMixUp", Args: []*pb.NamedArg{{Name: "p", Value: &pb.NamedArg_Number{Number: 0.5}}}}}},
		},
		{ // ultralytics' CopyPaste (flip mode) in the Mosaic's pre_transform (targets: it pastes the labels' segments)
			namedOp("YOLOMosaic", numArg("imgsz", 32)),
			namedOp("YOLOCopyPaste", numArg("p", 0.5), &pb.NamedArg{Name: "mode", Value: &pb.NamedArg_Text{Text: "flip"}}),
			namedOp("YOLOMixUp", numArg("p", 0.5)),
			namedOp("YOLOCutMix", numArg("p", 0.5), numArg("beta", 1), numArg("num_areas", 3)),
		},
		{ // YOLOX's MixUp after the Mosaic's warp (targets: it mixes a sample with boxes alone)
			namedOp("YOLOMosaic", numArg("imgsz", 32)),
			namedOp("YOLORandomPerspective", numArg("translate", 0.1), numArg("scale", 0.5),
				&pb.NamedArg{Name: "size", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: []float64{32, 32}}}}),
			namedOp("YOLOXMixUp", numArg("p", 0.5), &pb.NamedArg{Name: "mixup_scale", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: []float64{0.5, 1.5}}}}),
		},
		{ // the DETR recipes' geometry (targets)
			w("RandomIoUCrop", "min_scale", 0.3, "max_scale", 1, "min_aspect_ratio", 0.5, "max_aspect_ratio", 2, "sampler_options", []float64{0, 0.5, 1},
				"trials", 40, "p", 1),
			w("Resize", "size", []int{32, 32}),
		},
		{ // the YOLO family: NamedOps (op_yolo.go)
			namedOp("YOLOLoadImage", numArg("imgsz", 48)),
			namedOp("YOLOLetterBox", &pb.NamedArg{Name: "new_shape", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: []float64{32, 40}}}},
				&pb.NamedArg{Name: "scaleup", Value: &pb.NamedArg_Flag{Flag: false}}, numArg("stride", 32)),
			namedOp("YOLORandomPerspective", numArg("degrees", 5), numArg("translate", 0.1), numArg("scale", 0.5), numArg("shear", 2), numArg("perspective", 0.0005)),
			namedOp("YOLORandomHSV", numArg("hgain", 0.015), numArg("sgain", 0.7), numArg("vgain", 0.4)),
			namedOp("YOLORandomFlip", numArg("p", 0.5), &pb.NamedArg{Name: "direction", Value: &pb.NamedArg_Text{Text: "vertical"}}),
		},
		// the vision-language resizes (each sample its own size)
		{w("AnyResResize", "grid_pinpoints", []int{32, 32, 32, 64, 64, 32}, "patch", 16, "tokens_grid", 2, "base_tokens", 4, "max_patches", 8)},
		{w("SmartResize", "min_pixels", 1024, "max_pixels", 8192, "factor", 16)},
		{w("NaFlexResize", "patch_size", 16, "max_num_patches", 64)},
		{w("TileResize", "tile_size", 28, "min_tiles", 1, "max_tiles", 6, "tokens_per_tile", 16)},
		{w("PadToSquare", "fill", []float64{127, 0, 255}), w("Resize", "size", []int{32, 40})},
	}
}

// typedFill is torchvision's fill per type, {tv_tensors.Image: image,
// tv_tensors.Mask: mask}, as a NamedOp's fill (image nil: None).
func typedFill(image []float64, mask float64) *pb.NamedArg {
	t := &pb.TypedFill{Mask: mask}
	if image != nil {
		t.Image = &pb.Numbers{Values: image}
	}
	return &pb.NamedArg{Name: "fill", Value: &pb.NamedArg_TypedFill{TypedFill: t}}
}

// withArgs is op (a NamedOp) with args added.
func withArgs(op *pb.Op, args ...*pb.NamedArg) *pb.Op {
	n := op.GetNamed()
	n.Args = append(n.Args, args...)
	return op
}

// namedOp is an op sent by name (a NamedOp), numArg one of its numbers.
func namedOp(name string, args ...*pb.NamedArg) *pb.Op {
	return &pb.Op{Op: &pb.Op_Named{Named: &pb.NamedOp{Name: name, Args: args}}}
}

func numArg(name string, v float64) *pb.NamedArg {
	return &pb.NamedArg{Name: name, Value: &pb.NamedArg_Number{Number: v}}
}

// targetsOnly says whether ops act on targets (SanitizeBoundingBoxes,
// RandomIoUCrop, ...): a job of them needs an annotated dataset and
// JobSpec.targets.
func targetsOnly(ops []*pb.Op) bool {
	for _, op := range ops {
		switch op.GetNamed().GetName() {
		case "SanitizeBoundingBoxes", "RandomIoUCrop", "ClampBoundingBoxes", "YOLOCopyPaste", "YOLOCutMix", "YOLOXMixUp":
			return true
		}
	}
	return false
}

// numberSlot is one number of an op list's arguments: where it is, and
// how to set it.
type numberSlot struct {
	op, name string
	set      func(float64)
}

// numberSlots are every number of ops' arguments (a number, a tuple's
// values, a fill per type's image values and mask), the ops of containers
// too, in order.
func numberSlots(ops []*pb.Op, where string) []numberSlot {
	var out []numberSlot
	for i, op := range ops {
		n := op.GetNamed()
		at := fmt.Sprintf("%sop %d (%s)", where, i, n.GetName())
		for _, a := range n.GetArgs() {
			switch v := a.GetValue().(type) {
			case *pb.NamedArg_Number:
				out = append(out, numberSlot{n.GetName(), fmt.Sprintf("%s.%s", at, a.GetName()), func(x float64) { v.Number = x }})
			case *pb.NamedArg_Numbers:
				for k := range v.Numbers.GetValues() {
					out = append(out, numberSlot{n.GetName(), fmt.Sprintf("%s.%s[%d]", at, a.GetName(), k), func(x float64) { v.Numbers.Values[k] = x }})
				}
			case *pb.NamedArg_TypedFill:
				for k := range v.TypedFill.GetImage().GetValues() {
					out = append(out, numberSlot{n.GetName(), fmt.Sprintf("%s.%s.image[%d]", at, a.GetName(), k), func(x float64) { v.TypedFill.Image.Values[k] = x }})
				}
				out = append(out, numberSlot{n.GetName(), fmt.Sprintf("%s.%s.mask", at, a.GetName()), func(x float64) { v.TypedFill.Mask = x }})
			case *pb.NamedArg_Ops:
				out = append(out, numberSlots(v.Ops.GetOps(), at+" > ")...)
			}
		}
	}
	return out
}

// TestOpFloatsRefuseNonFinite: NaN, +Inf or -Inf in any number of any
// op's arguments (each on the wire a double: a number, a tuple's value, a
// fill per type's) gets INVALID_ARGUMENT from a real server, never a job.
// Every number validOpLists gives is spoiled in turn, and every op of the
// registry that takes a number must have an example there giving one, so
// a new op is covered or fails this test.
func TestOpFloatsRefuseNonFinite(t *testing.T) {
	ann, _ := photosCOCO(t)
	e := newEnv(t, Config{Datasets: map[string]string{"tiny": makeDataset(t, []string{"a", "b", "c"}, 13, true), "det": "../testdata/photos"},
		Annotations: map[string]string{"det": ann}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	describe := func(ops []*pb.Op) error {
		job := &pb.JobSpec{Dataset: "tiny", BatchSize: 4, Transform: &pb.TransformSpec{Ops: ops}}
		if targetsOnly(ops) {
			job.Dataset, job.Targets = "det", true
		}
		_, err := e.client.DescribeJob(ctx, &pb.DescribeJobRequest{Job: job})
		return err
	}
	covered := map[string]bool{}
	for _, ops := range validOpLists() {
		if err := describe(ops); err != nil {
			t.Fatalf("a valid transform refused: %v", err)
		}
		for _, s := range numberSlots(ops, "") {
			covered[s.op] = true
		}
	}
	numeric := map[string]bool{"float": true, "int": true, "range": true, "size": true, "fill": true, "floats": true, "ints": true, "typed_fill": true}
	for _, s := range opspkg.OpSchemas() {
		for _, p := range s.Params {
			if numeric[p.Type] && !covered[s.Name] {
				t.Errorf("op %s takes numbers (%s) and has no valid example giving one in validOpLists: add one", s.Name, p.Name)
				break
			}
		}
	}
	checked := 0
	for l := range validOpLists() {
		for k := range numberSlots(validOpLists()[l], "") {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				ops := validOpLists()[l]
				slot := numberSlots(ops, "")[k]
				slot.set(bad)
				if err := describe(ops); status.Code(err) != codes.InvalidArgument {
					t.Errorf("%s=%v: %v, want InvalidArgument", slot.name, bad, err)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no number found in any op")
	}
	t.Logf("%d non-finite values refused", checked)
}

// TestDegenerateRangesRefused: finite values that leave nothing to make (an
// RRC ratio whose every crop rounds to 0 pixels, a Normalize std whose
// outputs are all infinite) are refused when the job opens, with
// INVALID_ARGUMENT saying why, not accepted and then failed sample by
// sample.
func TestDegenerateRangesRefused(t *testing.T) {
	e := newEnv(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for _, tc := range []struct {
		name string
		ops  []*pb.Op
		want string
	}{
		{"rrc ratio tiny", []*pb.Op{opspec.Wire("RandomResizedCrop", "size", 32, "ratio", []float64{1e-300, 1e-299})},
			"every crop would be empty"},
		{"rrc ratio huge", []*pb.Op{opspec.Wire("RandomResizedCrop", "size", 32, "ratio", []float64{1e299, 1e300})},
			"every crop would be empty"},
		{"normalize std 1e-300", []*pb.Op{rrcOp(32), opspec.Wire("Normalize", "mean", []float64{0.5, 0.5, 0.5}, "std", []float64{0.2, 1e-300, 0.2})},
			"(1 + |mean|) / std at most"},
	} {
		open := smallJob("tiny", 8)
		open.Job.Transform.Ops = tc.ops
		_, err := e.client.DescribeJob(ctx, &pb.DescribeJobRequest{Job: open.Job})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s, DescribeJob: got %v; want InvalidArgument saying %q", tc.name, err, tc.want)
		}
		if err := recvErr(e.feedStream(t, ctx, open)); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s, Feed: got %v; want InvalidArgument saying %q", tc.name, err, tc.want)
		}
	}
}
