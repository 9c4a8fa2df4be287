package server

import (
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/ops"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
)

func rrcOp(size uint32) *pb.Op {
	return &pb.Op{Op: &pb.Op_RandomResizedCrop{RandomResizedCrop: &pb.RandomResizedCrop{Height: size}}}
}

func flipOp(p *float64) *pb.Op {
	return &pb.Op{Op: &pb.Op_RandomHorizontalFlip{RandomHorizontalFlip: &pb.RandomHorizontalFlip{P: p}}}
}

func TestNewTransform(t *testing.T) {
	tests := []struct {
		name    string
		spec    *pb.TransformSpec
		layout  pb.Layout
		wantErr string // substring; "" means success
		shape   [3]int
		flipP   float64
		float   bool
	}{
		{name: "preset train", spec: &pb.TransformSpec{Preset: "imagenet-train"}, shape: [3]int{3, 224, 224}, flipP: 0.5},
		{name: "preset eval nhwc", spec: &pb.TransformSpec{Preset: "imagenet-eval"}, layout: pb.Layout_LAYOUT_NHWC, shape: [3]int{224, 224, 3}},
		{name: "ops, flip p unset is 0.5", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), flipOp(nil)}}, shape: [3]int{3, 32, 32}, flipP: 0.5},
		{name: "ops, flip p 0 is kept", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), flipOp(proto.Float64(0))}}, layout: pb.Layout_LAYOUT_NCHW, shape: [3]int{3, 32, 32}},
		{name: "resize and crop", spec: &pb.TransformSpec{Ops: []*pb.Op{
			{Op: &pb.Op_Resize{Resize: &pb.Resize{Height: 40}}},
			{Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32, Width: 24}}},
			{Op: &pb.Op_ColorJitter{ColorJitter: &pb.ColorJitter{Brightness: 0.4}}},
			{Op: &pb.Op_Normalize{Normalize: &pb.Normalize{Mean: []float64{0.5, 0.5, 0.5}, Std: []float64{0.2, 0.2, 0.2}}}},
		}}, shape: [3]int{3, 32, 24}, float: true},
		{name: "neither", spec: &pb.TransformSpec{}, wantErr: "exactly one"},
		{name: "nil", spec: nil, wantErr: "exactly one"},
		{name: "both", spec: &pb.TransformSpec{Preset: "imagenet-train", Ops: []*pb.Op{rrcOp(32)}}, wantErr: "exactly one"},
		{name: "unknown preset", spec: &pb.TransformSpec{Preset: "nope"}, wantErr: "unknown transform preset"},
		{name: "rrc size 0", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(0)}}, wantErr: "sides must be"},
		{name: "resize shorter side alone", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_Resize{Resize: &pb.Resize{Height: 32}}}}}, wantErr: "varies per image"},
		{name: "empty op", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {}}}, wantErr: "op 1: the op is empty"},
		{name: "normalize short", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {Op: &pb.Op_Normalize{Normalize: &pb.Normalize{Mean: []float64{0.5}}}}}}, wantErr: "3 means"},
		{name: "flip p 2", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), flipOp(proto.Float64(2))}}, wantErr: "p=2"},
		{name: "bad layout", spec: &pb.TransformSpec{Preset: "imagenet-train"}, layout: 7, wantErr: "layout"},
		{name: "rrc random interpolation", spec: &pb.TransformSpec{Ops: []*pb.Op{
			{Op: &pb.Op_RandomResizedCrop{RandomResizedCrop: &pb.RandomResizedCrop{Height: 32, RandomInterpolation: true}}},
		}}, shape: [3]int{3, 32, 32}},
		{name: "rrc random and bicubic", spec: &pb.TransformSpec{Ops: []*pb.Op{
			{Op: &pb.Op_RandomResizedCrop{RandomResizedCrop: &pb.RandomResizedCrop{Height: 32, RandomInterpolation: true,
				Interpolation: pb.Interpolation_INTERPOLATION_BICUBIC}}},
		}}, wantErr: "random_interpolation draws bilinear or bicubic"},
		// timm's RandomErasing: a colour per box (with random_value) and counts of 1..16
		{name: "erasing colour per box, 1..3 boxes", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp(&pb.RandomErasing{RandomValue: true, RandomColor: true, MinCount: 1, MaxCount: 3})}}, shape: [3]int{3, 32, 32}},
		{name: "erasing 16 boxes", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp(&pb.RandomErasing{MinCount: 16})}}, shape: [3]int{3, 32, 32}},
		{name: "erasing colour without random", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp(&pb.RandomErasing{RandomColor: true})}}, wantErr: "random_color (one random colour per box) needs random_value"},
		{name: "erasing count 17", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp(&pb.RandomErasing{MaxCount: 17})}}, wantErr: "min_count 0, max_count 17: want 1 <= min_count <= max_count <= 16"},
		{name: "erasing count 3..2", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp(&pb.RandomErasing{MinCount: 3, MaxCount: 2})}}, wantErr: "min_count 3, max_count 2"},
		// timm's AutoAugment: its config strings; nearest refused
		{name: "timm autoaugment v0r", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {Op: &pb.Op_TimmAutoAugment{TimmAutoAugment: &pb.TimmAutoAugment{Config: "v0r-mstd0.5"}}}}}, shape: [3]int{3, 32, 32}},
		{name: "timm autoaugment 3a", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {Op: &pb.Op_TimmAutoAugment{TimmAutoAugment: &pb.TimmAutoAugment{Config: "3a-mstd1"}}}}}, shape: [3]int{3, 32, 32}},
		{name: "timm autoaugment v1", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {Op: &pb.Op_TimmAutoAugment{TimmAutoAugment: &pb.TimmAutoAugment{Config: "v1"}}}}}, wantErr: "want original, originalr, v0, v0r or 3a"},
		{name: "timm autoaugment nearest", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {Op: &pb.Op_TimmAutoAugment{TimmAutoAugment: &pb.TimmAutoAugment{Config: "v0", Interpolation: pb.Interpolation_INTERPOLATION_NEAREST}}}}}, wantErr: "interpolation nearest: timm's AutoAugment resamples with bilinear, bicubic"},
		// timm's AugMix: its config strings, blended too
		{name: "timm augmix", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {Op: &pb.Op_TimmAugMix{TimmAugMix: &pb.TimmAugMix{Config: "augmix-m5-w4-d2-a0.5"}}}}}, shape: [3]int{3, 32, 32}},
		{name: "timm augmix blended", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {Op: &pb.Op_TimmAugMix{TimmAugMix: &pb.TimmAugMix{Config: "augmix-b1"}}}}}, shape: [3]int{3, 32, 32}},
		{name: "timm augmix width 17", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {Op: &pb.Op_TimmAugMix{TimmAugMix: &pb.TimmAugMix{Config: "augmix-w17"}}}}}, wantErr: "w17: want an integer 1..16"},
		// Pad's wire forms: 1, 2 or 4 values (torchvision's), before or after the crop
		{name: "pad 1 then crop", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_Pad{Pad: &pb.Pad{Padding: []uint32{4}}}}, {Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32, Width: 24}}}}}, shape: [3]int{3, 32, 24}},
		{name: "crop then pad 2", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32, Width: 24}}}, {Op: &pb.Op_Pad{Pad: &pb.Pad{Padding: []uint32{1, 2}, Fill: []float64{5}}}}}}, shape: [3]int{3, 32 + 2*2, 24 + 2*1}},
		{name: "crop then pad 4", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32, Width: 24}}}, {Op: &pb.Op_Pad{Pad: &pb.Pad{Padding: []uint32{1, 2, 3, 4}, Fill: []float64{5, 6, 7}}}}}}, shape: [3]int{3, 32 + 2 + 4, 24 + 1 + 3}},
		{name: "pad 3 values", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_Pad{Pad: &pb.Pad{Padding: []uint32{1, 2, 3}}}}, {Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32, Width: 24}}}}}, wantErr: "Pad padding of 3 values: want 1, 2 or 4"},
		{name: "pad none", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_Pad{Pad: &pb.Pad{}}}, {Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32, Width: 24}}}}}, wantErr: "Pad without padding"},
		{name: "pad reflect", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_Pad{Pad: &pb.Pad{Padding: []uint32{1}, PaddingMode: "reflect"}}}, {Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32, Width: 24}}}}}, wantErr: "Pad padding_mode \"reflect\": stoker pads with a constant fill only"},
		{name: "pad fill 2 values", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_Pad{Pad: &pb.Pad{Padding: []uint32{1}, Fill: []float64{1, 2}}}}, {Op: &pb.Op_CenterCrop{CenterCrop: &pb.CenterCrop{Height: 32, Width: 24}}}}}, wantErr: "Pad fill of 2 values: want 1 or 3"},
		{name: "pad alone", spec: &pb.TransformSpec{Ops: []*pb.Op{{Op: &pb.Op_Pad{Pad: &pb.Pad{Padding: []uint32{1}}}}}}, wantErr: "Pad alone gives a size that varies per image"},
		{name: "policy bicubic", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32),
			{Op: &pb.Op_TrivialAugmentWide{TrivialAugmentWide: &pb.TrivialAugmentWide{NumMagnitudeBins: 31,
				Interpolation: pb.Interpolation_INTERPOLATION_BICUBIC}}},
		}}, shape: [3]int{3, 32, 32}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := job.NewTransform(tc.spec, tc.layout)
			err = toStatus(err) // the server maps the pipeline's refusals
			if tc.wantErr != "" {
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want InvalidArgument containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr.Shape() != tc.shape || tr.Float() != tc.float {
				t.Errorf("shape %v float %v, want %v %v", tr.Shape(), tr.Float(), tc.shape, tc.float)
			}
			for _, op := range tr.Ops() {
				if op.Kind == ops.OpRandomHorizontalFlip && op.P != tc.flipP {
					t.Errorf("flip p = %v, want %v", op.P, tc.flipP)
				}
			}
		})
	}
}

func eraseOp(e *pb.RandomErasing) *pb.Op { return &pb.Op{Op: &pb.Op_RandomErasing{RandomErasing: e}} }
