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
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// validOpLists are transforms a server accepts, between them holding every
// op that has a float field, each float at a valid value.
func validOpLists() [][]*pb.Op {
	return [][]*pb.Op{
		{
			{Op: &pb.Op_RandomResizedCrop{RandomResizedCrop: &pb.RandomResizedCrop{Height: 32, ScaleMin: 0.5, ScaleMax: 1, RatioMin: 0.75, RatioMax: 1.25}}},
			flipOp(proto.Float64(0.5)),
			{Op: &pb.Op_ColorJitter{ColorJitter: &pb.ColorJitter{Brightness: 0.2, Contrast: 0.2, Saturation: 0.2, Hue: 0.1,
				BrightnessRange: &pb.Range{Min: 0.5, Max: 1.5}, ContrastRange: &pb.Range{Min: 0.5, Max: 1.5},
				SaturationRange: &pb.Range{Min: 0.5, Max: 1.5}, HueRange: &pb.Range{Min: -0.1, Max: 0.1}}}},
			{Op: &pb.Op_Normalize{Normalize: &pb.Normalize{Mean: []float64{0.5, 0.5, 0.5}, Std: []float64{0.2, 0.2, 0.2}}}},
		},
		{
			{Op: &pb.Op_Resize{Resize: &pb.Resize{Height: 40, Width: 40}}},
			{Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32}}},
			{Op: &pb.Op_RandomVerticalFlip{RandomVerticalFlip: &pb.RandomVerticalFlip{P: proto.Float64(0.5)}}},
			{Op: &pb.Op_RandomGrayscale{RandomGrayscale: &pb.RandomGrayscale{P: proto.Float64(0.2)}}},
			{Op: &pb.Op_GaussianBlur{GaussianBlur: &pb.GaussianBlur{KernelX: 5, KernelY: 5, SigmaMin: 0.1, SigmaMax: 2}}},
			{Op: &pb.Op_RandomSolarize{RandomSolarize: &pb.RandomSolarize{Threshold: 128, P: proto.Float64(0.2)}}},
			{Op: &pb.Op_RandomPosterize{RandomPosterize: &pb.RandomPosterize{Bits: 4, P: proto.Float64(0.2)}}},
			{Op: &pb.Op_RandomInvert{RandomInvert: &pb.RandomInvert{P: proto.Float64(0.2)}}},
			{Op: &pb.Op_RandomEqualize{RandomEqualize: &pb.RandomEqualize{P: proto.Float64(0.2)}}},
			{Op: &pb.Op_RandomAutocontrast{RandomAutocontrast: &pb.RandomAutocontrast{P: proto.Float64(0.2)}}},
			{Op: &pb.Op_RandomAdjustSharpness{RandomAdjustSharpness: &pb.RandomAdjustSharpness{SharpnessFactor: 2, P: proto.Float64(0.2)}}},
			{Op: &pb.Op_RandomRotation{RandomRotation: &pb.RandomRotation{Degrees: &pb.Range{Min: -10, Max: 10}, Fill: []float64{1, 2, 3}, Center: []float64{4, 5}}}},
			{Op: &pb.Op_RandomAffine{RandomAffine: &pb.RandomAffine{Degrees: &pb.Range{Min: -10, Max: 10}, Translate: []float64{0.1, 0.1},
				Scale: &pb.Range{Min: 0.9, Max: 1.1}, Shear: []float64{-5, 5, -5, 5}, Fill: []float64{1, 2, 3}, Center: []float64{4, 5}}}},
			{Op: &pb.Op_RandomErasing{RandomErasing: &pb.RandomErasing{P: proto.Float64(0.2), Scale: &pb.Range{Min: 0.02, Max: 0.3},
				Ratio: &pb.Range{Min: 0.3, Max: 3.3}, Value: []float64{1, 2, 3}, NoiseMean: []float64{0.5, 0.5, 0.5}, NoiseStd: []float64{0.2, 0.2, 0.2}}}},
			{Op: &pb.Op_RandomErasing{RandomErasing: &pb.RandomErasing{RandomValue: true}}},
			{Op: &pb.Op_RandomPerspective{RandomPerspective: &pb.RandomPerspective{DistortionScale: proto.Float64(0.4), P: proto.Float64(0.5), Fill: []float64{1, 2, 3}}}},
			{Op: &pb.Op_RandomApply{RandomApply: &pb.RandomApply{P: proto.Float64(0.8), Ops: []*pb.Op{
				{Op: &pb.Op_ColorJitter{ColorJitter: &pb.ColorJitter{BrightnessRange: &pb.Range{Min: 0.5, Max: 1.5}, Hue: 0.1,
					ContrastRange: &pb.Range{Min: 0.5, Max: 1.5}, SaturationRange: &pb.Range{Min: 0.5, Max: 1.5}, HueRange: &pb.Range{Min: -0.1, Max: 0.1}}}},
			}}}},
			{Op: &pb.Op_RandomChoice{RandomChoice: &pb.RandomChoice{P: []float64{1, 2}, Ops: []*pb.Op{
				{Op: &pb.Op_RandomInvert{RandomInvert: &pb.RandomInvert{}}},
				{Op: &pb.Op_RandomOrder{RandomOrder: &pb.RandomOrder{Ops: []*pb.Op{{Op: &pb.Op_Grayscale{Grayscale: &pb.Grayscale{}}}}}}},
			}}}},
			{Op: &pb.Op_TrivialAugmentWide{TrivialAugmentWide: &pb.TrivialAugmentWide{Fill: []float64{1, 2, 3}}}},
			{Op: &pb.Op_RandAugment{RandAugment: &pb.RandAugment{Fill: []float64{1, 2, 3}}}},
			{Op: &pb.Op_AutoAugment{AutoAugment: &pb.AutoAugment{Fill: []float64{1, 2, 3}}}},
			{Op: &pb.Op_AugMix{AugMix: &pb.AugMix{Alpha: 1, Fill: []float64{1, 2, 3}}}},
			{Op: &pb.Op_TimmRandAugment{TimmRandAugment: &pb.TimmRandAugment{Config: "rand-m9-mstd0.5-inc1", Fill: []float64{1, 2, 3}}}},
			{Op: &pb.Op_TimmAutoAugment{TimmAutoAugment: &pb.TimmAutoAugment{Config: "v0r-mstd0.5", Fill: []float64{1, 2, 3}}}},
			{Op: &pb.Op_TimmAugMix{TimmAugMix: &pb.TimmAugMix{Config: "augmix-m5-w4-d2", Fill: []float64{1, 2, 3}}}},
		},
		{
			{Op: &pb.Op_Pad{Pad: &pb.Pad{Padding: []uint32{4}, Fill: []float64{1, 2, 3}}}},
			{Op: &pb.Op_RandomCrop{RandomCrop: &pb.RandomCrop{Height: 32, Padding: []uint32{2}, PadIfNeeded: true, Fill: []float64{1, 2, 3}}}},
		},
		{
			{Op: &pb.Op_RandomZoomOut{RandomZoomOut: &pb.RandomZoomOut{Fill: []float64{1, 2, 3}, SideRange: &pb.Range{Min: 1, Max: 2}, P: proto.Float64(0.5)}}},
			{Op: &pb.Op_Resize{Resize: &pb.Resize{Height: 32, Width: 32}}},
		},
		{
			{Op: &pb.Op_RandomPhotometricDistort{RandomPhotometricDistort: &pb.RandomPhotometricDistort{Brightness: &pb.Range{Min: 0.9, Max: 1.1},
				Contrast: &pb.Range{Min: 0.5, Max: 1.5}, Saturation: &pb.Range{Min: 0.5, Max: 1.5}, Hue: &pb.Range{Min: -0.1, Max: 0.1}, P: proto.Float64(0.5)}}},
			{Op: &pb.Op_Resize{Resize: &pb.Resize{Height: 32, Width: 32}}},
		},
		{ // large-scale jitter
			{Op: &pb.Op_ScaleJitter{ScaleJitter: &pb.ScaleJitter{TargetHeight: 64, TargetWidth: 48, ScaleRange: &pb.Range{Min: 0.5, Max: 1.5}}}},
			{Op: &pb.Op_FixedSizeCrop{FixedSizeCrop: &pb.FixedSizeCrop{Height: 32, Fill: []float64{1, 2, 3}}}},
		},
		{ // per-sample sizes (targets)
			{Op: &pb.Op_RandomShortestSize{RandomShortestSize: &pb.RandomShortestSize{MinSize: []uint32{24, 32}, MaxSize: proto.Uint32(48)}}},
			{Op: &pb.Op_SanitizeBoundingBoxes{SanitizeBoundingBoxes: &pb.SanitizeBoundingBoxes{MinSize: proto.Float64(1), MinArea: proto.Float64(1)}}},
		},
		{
			{Op: &pb.Op_RandomResize{RandomResize: &pb.RandomResize{MinSize: 40, MaxSize: 48}}},
			{Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32}}},
		},
		{ // the segmentation references' geometry
			{Op: &pb.Op_RandomResize{RandomResize: &pb.RandomResize{MinSize: 20, MaxSize: 48}}},
			{Op: &pb.Op_PadIfSmaller{PadIfSmaller: &pb.PadIfSmaller{Size: 32, Fill: []float64{1, 2, 3}, MaskFill: proto.Float64(255)}}},
			{Op: &pb.Op_RandomCrop{RandomCrop: &pb.RandomCrop{Height: 32}}},
		},
		{ // a job with targets (describe's "det")
			{Op: &pb.Op_RandomResizedCrop{RandomResizedCrop: &pb.RandomResizedCrop{Height: 32}}},
			{Op: &pb.Op_SanitizeBoundingBoxes{SanitizeBoundingBoxes: &pb.SanitizeBoundingBoxes{MinSize: proto.Float64(2), MinArea: proto.Float64(3)}}},
			{Op: &pb.Op_ClampKeyPoints{ClampKeyPoints: &pb.ClampKeyPoints{}}},
			{Op: &pb.Op_SanitizeKeyPoints{SanitizeKeyPoints: &pb.SanitizeKeyPoints{}}},
			{Op: &pb.Op_ClampBoundingBoxes{ClampBoundingBoxes: &pb.ClampBoundingBoxes{ClampingMode: proto.String("hard")}}},
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
		{ // the DETR recipes' geometry (targets)
			{Op: &pb.Op_RandomIouCrop{RandomIouCrop: &pb.RandomIoUCrop{MinScale: proto.Float64(0.3), MaxScale: proto.Float64(1),
				MinAspectRatio: proto.Float64(0.5), MaxAspectRatio: proto.Float64(2), SamplerOptions: []float64{0, 0.5, 1}}}},
			{Op: &pb.Op_Resize{Resize: &pb.Resize{Height: 32, Width: 32}}},
		},
		{ // the YOLO family: NamedOps (op_yolo.go)
			namedOp("YOLOLoadImage", numArg("imgsz", 48)),
			namedOp("YOLOLetterBox", &pb.NamedArg{Name: "new_shape", Value: &pb.NamedArg_Numbers{Numbers: &pb.Numbers{Values: []float64{32, 40}}}},
				&pb.NamedArg{Name: "scaleup", Value: &pb.NamedArg_Flag{Flag: false}}),
			namedOp("YOLORandomPerspective", numArg("degrees", 5), numArg("translate", 0.1), numArg("scale", 0.5), numArg("shear", 2), numArg("perspective", 0.0005)),
			namedOp("YOLORandomHSV", numArg("hgain", 0.015), numArg("sgain", 0.7), numArg("vgain", 0.4)),
			namedOp("YOLORandomFlip", numArg("p", 0.5), &pb.NamedArg{Name: "direction", Value: &pb.NamedArg_Text{Text: "vertical"}}),
		},
	}
}

// namedOp is an op sent by name (a NamedOp), numArg one of its numbers.
func namedOp(name string, args ...*pb.NamedArg) *pb.Op {
	return &pb.Op{Op: &pb.Op_Named{Named: &pb.NamedOp{Name: name, Args: args}}}
}

func numArg(name string, v float64) *pb.NamedArg {
	return &pb.NamedArg{Name: name, Value: &pb.NamedArg_Number{Number: v}}
}

// targetsOnly says whether ops act on targets (SanitizeBoundingBoxes,
// RandomIoUCrop): a
// job of them needs an annotated dataset and JobSpec.targets.
func targetsOnly(ops []*pb.Op) bool {
	for _, op := range ops {
		if op.GetSanitizeBoundingBoxes() != nil || op.GetRandomIouCrop() != nil || op.GetClampBoundingBoxes() != nil ||
			op.GetNamed().GetName() == "YOLOCopyPaste" || op.GetNamed().GetName() == "YOLOCutMix" {
			return true
		}
	}
	return false
}

// TestOpFloatsRefuseNonFinite: NaN, +Inf or -Inf in any float field of any
// op gets INVALID_ARGUMENT from a real server, never a job. The ops and
// their fields are read from the proto descriptors, so a new op or a new
// float field is covered without editing this test; an op with float
// fields that validOpLists lacks fails it.
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
	for _, ops := range validOpLists() {
		if err := describe(ops); err != nil {
			t.Fatalf("a valid transform refused: %v", err)
		}
	}
	oneof := (&pb.Op{}).ProtoReflect().Descriptor().Oneofs().ByName("op")
	if oneof == nil {
		t.Fatal("Op has no oneof op")
	}
	checked := 0
	for i := range oneof.Fields().Len() {
		opField := oneof.Fields().Get(i)
		var floats []protoreflect.FieldDescriptor
		fields := opField.Message().Fields()
		for j := range fields.Len() {
			if k := fields.Get(j).Kind(); k == protoreflect.DoubleKind || k == protoreflect.FloatKind {
				floats = append(floats, fields.Get(j))
			}
		}
		checked += spoilRanges(t, describe, opField)
		if len(floats) == 0 {
			continue
		}
		list, at := findOp(validOpLists(), opField)
		if list == nil {
			t.Errorf("op %s has float fields and no valid example in validOpLists: add one", opField.Name())
			continue
		}
		for _, f := range floats {
			n := 1
			if f.IsList() {
				n = list[at].ProtoReflect().Get(opField).Message().Get(f).List().Len()
				if n == 0 {
					t.Errorf("%s.%s: the valid example has no elements to spoil", opField.Name(), f.Name())
				}
			}
			for idx := range n {
				for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
					name := fmt.Sprintf("%s.%s[%d]=%v", opField.Name(), f.Name(), idx, bad)
					ops, _ := findOp(validOpLists(), opField)
					m := ops[at].ProtoReflect().Mutable(opField).Message()
					v := protoreflect.ValueOfFloat64(bad)
					if f.Kind() == protoreflect.FloatKind {
						v = protoreflect.ValueOfFloat32(float32(bad))
					}
					if f.IsList() {
						m.Mutable(f).List().Set(idx, v)
					} else {
						m.Set(f, v)
					}
					err := describe(ops)
					if status.Code(err) != codes.InvalidArgument {
						t.Errorf("%s: %v, want InvalidArgument", name, err)
					}
					checked++
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no float field found in any op")
	}
	t.Logf("%d non-finite values refused", checked)
}

// findOp returns the first list holding an op set in opField, and its
// position.
func findOp(lists [][]*pb.Op, opField protoreflect.FieldDescriptor) ([]*pb.Op, int) {
	for _, l := range lists {
		for i, op := range l {
			if op.ProtoReflect().Has(opField) {
				return l, i
			}
		}
	}
	return nil, 0
}

// spoilRanges sets each Range field of opField's valid example (its min,
// then its max) to NaN and the infinities, and checks each is refused. It
// returns how many it checked.
func spoilRanges(t *testing.T, describe func([]*pb.Op) error, opField protoreflect.FieldDescriptor) int {
	t.Helper()
	list, at := findOp(validOpLists(), opField)
	if list == nil {
		return 0
	}
	checked := 0
	fields := opField.Message().Fields()
	for j := range fields.Len() {
		f := fields.Get(j)
		if f.Kind() != protoreflect.MessageKind || f.Message().FullName() != "stoker.v1.Range" {
			continue
		}
		if !list[at].ProtoReflect().Get(opField).Message().Has(f) {
			t.Errorf("%s.%s: the valid example does not set it", opField.Name(), f.Name())
			continue
		}
		for _, end := range []protoreflect.Name{"min", "max"} {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				ops, _ := findOp(validOpLists(), opField)
				r := ops[at].ProtoReflect().Mutable(opField).Message().Mutable(f).Message()
				r.Set(r.Descriptor().Fields().ByName(end), protoreflect.ValueOfFloat64(bad))
				if err := describe(ops); status.Code(err) != codes.InvalidArgument {
					t.Errorf("%s.%s.%s=%v: %v, want InvalidArgument", opField.Name(), f.Name(), end, bad, err)
				}
				checked++
			}
		}
	}
	return checked
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
		{"rrc ratio tiny", []*pb.Op{{Op: &pb.Op_RandomResizedCrop{RandomResizedCrop: &pb.RandomResizedCrop{Height: 32, RatioMin: 1e-300, RatioMax: 1e-299}}}},
			"every crop would be empty"},
		{"rrc ratio huge", []*pb.Op{{Op: &pb.Op_RandomResizedCrop{RandomResizedCrop: &pb.RandomResizedCrop{Height: 32, RatioMin: 1e299, RatioMax: 1e300}}}},
			"every crop would be empty"},
		{"normalize std 1e-300", []*pb.Op{rrcOp(32), {Op: &pb.Op_Normalize{Normalize: &pb.Normalize{Mean: []float64{0.5, 0.5, 0.5}, Std: []float64{0.2, 1e-300, 0.2}}}}},
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
