package server

import (
	"strings"
	"testing"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server/internal/job"
)

func rrcOp(size uint32) *pb.Op { return opspec.Wire("RandomResizedCrop", "size", int(size)) }

func flipOp(p *float64) *pb.Op {
	if p == nil {
		return opspec.Wire("RandomHorizontalFlip")
	}
	return opspec.Wire("RandomHorizontalFlip", "p", *p)
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
			opspec.Wire("Resize", "size", 40),
			opspec.Wire("CenterCrop", "size", []int{32, 24}),
			opspec.Wire("ColorJitter", "brightness", 0.4),
			opspec.Wire("Normalize", "mean", []float64{0.5, 0.5, 0.5}, "std", []float64{0.2, 0.2, 0.2}),
		}}, shape: [3]int{3, 32, 24}, float: true},
		{name: "neither", spec: &pb.TransformSpec{}, wantErr: "exactly one"},
		{name: "nil", spec: nil, wantErr: "exactly one"},
		{name: "both", spec: &pb.TransformSpec{Preset: "imagenet-train", Ops: []*pb.Op{rrcOp(32)}}, wantErr: "exactly one"},
		{name: "unknown preset", spec: &pb.TransformSpec{Preset: "nope"}, wantErr: "unknown transform preset"},
		{name: "rrc size 0", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(0)}}, wantErr: "sides must be"},
		{name: "resize shorter side alone", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Resize", "size", 32)}}, wantErr: "varies per image"},
		{name: "empty op", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), {}}}, wantErr: "op 1: the op is empty"},
		{name: "normalize short", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), opspec.Wire("Normalize", "mean", []float64{0.5}, "std", []float64{})}}, wantErr: "Normalize: needs 3 means and 3 stds"},
		{name: "flip p 2", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), flipOp(proto.Float64(2))}}, wantErr: "RandomHorizontalFlip: p: 2: want 0..1"},
		{name: "bad layout", spec: &pb.TransformSpec{Preset: "imagenet-train"}, layout: 7, wantErr: "layout"},
		{name: "rrc random interpolation", spec: &pb.TransformSpec{Ops: []*pb.Op{
			opspec.Wire("RandomResizedCrop", "size", 32, "interpolation", "random"),
		}}, shape: [3]int{3, 32, 32}},
		// timm's RandomErasing: a colour per box (with value='random') and counts of 1..16
		{name: "erasing colour per box, 1..3 boxes", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp("value", "random", "per_box", true, "count", []int{1, 3})}}, shape: [3]int{3, 32, 32}},
		{name: "erasing 16 boxes", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp("count", 16)}}, shape: [3]int{3, 32, 32}},
		{name: "erasing colour without random", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp("per_box", true)}}, wantErr: "RandomErasing: per_box (one random colour per box) is for value='random'"},
		{name: "erasing count 17", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp("count", []int{1, 17})}}, wantErr: "RandomErasing: count [1 17]: want integers 1..16"},
		{name: "erasing count 3..2", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), eraseOp("count", []int{3, 2})}}, wantErr: "(RandomErasing): count 3..2: want 1 <= min <= max <= 16"},
		// timm's AutoAugment: its config strings; nearest refused
		{name: "timm autoaugment v0r", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), opspec.Wire("TimmAutoAugment", "config", "v0r-mstd0.5")}}, shape: [3]int{3, 32, 32}},
		{name: "timm autoaugment 3a", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), opspec.Wire("TimmAutoAugment", "config", "3a-mstd1")}}, shape: [3]int{3, 32, 32}},
		{name: "timm autoaugment v1", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), opspec.Wire("TimmAutoAugment", "config", "v1")}}, wantErr: "want original, originalr, v0, v0r or 3a"},
		{name: "timm autoaugment nearest", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), opspec.Wire("TimmAutoAugment", "config", "v0", "interpolation", "nearest")}}, wantErr: "interpolation nearest: timm's AutoAugment resamples with bilinear, bicubic"},
		// timm's AugMix: its config strings, blended too
		{name: "timm augmix", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), opspec.Wire("TimmAugMix", "config", "augmix-m5-w4-d2-a0.5")}}, shape: [3]int{3, 32, 32}},
		{name: "timm augmix blended", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), opspec.Wire("TimmAugMix", "config", "augmix-b1")}}, shape: [3]int{3, 32, 32}},
		{name: "timm augmix width 17", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32), opspec.Wire("TimmAugMix", "config", "augmix-w17")}}, wantErr: "w17: want an integer 1..16"},
		// Pad's forms: 1, 2 or 4 values (torchvision's), before or after the crop
		{name: "pad 1 then crop", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Pad", "padding", []int{4}), opspec.Wire("CenterCrop", "size", []int{32, 24})}}, shape: [3]int{3, 32, 24}},
		{name: "crop then pad 2", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("CenterCrop", "size", []int{32, 24}), opspec.Wire("Pad", "padding", []int{1, 2}, "fill", []float64{5})}}, shape: [3]int{3, 32 + 2*2, 24 + 2*1}},
		{name: "crop then pad 4", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("CenterCrop", "size", []int{32, 24}), opspec.Wire("Pad", "padding", []int{1, 2, 3, 4}, "fill", []float64{5, 6, 7})}}, shape: [3]int{3, 32 + 2 + 4, 24 + 1 + 3}},
		{name: "pad 3 values", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Pad", "padding", []int{1, 2, 3}), opspec.Wire("CenterCrop", "size", []int{32, 24})}}, wantErr: "Pad: padding of 3 values: want 1, 2 or 4"},
		{name: "pad none", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Pad"), opspec.Wire("CenterCrop", "size", []int{32, 24})}}, wantErr: "Pad: padding is required"},
		{name: "pad reflect", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Pad", "padding", []int{1}, "padding_mode", "reflect"), opspec.Wire("CenterCrop", "size", []int{32, 24})}}, wantErr: "Pad: padding_mode \"reflect\": stoker pads with a constant fill only"},
		{name: "pad fill 2 values", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Pad", "padding", []int{1}, "fill", []float64{1, 2}), opspec.Wire("CenterCrop", "size", []int{32, 24})}}, wantErr: "Pad: fill has 2 values: want 1 or 3"},
		{name: "pad alone", spec: &pb.TransformSpec{Ops: []*pb.Op{opspec.Wire("Pad", "padding", []int{1})}}, wantErr: "Pad alone gives a size that varies per image"},
		{name: "policy bicubic", spec: &pb.TransformSpec{Ops: []*pb.Op{rrcOp(32),
			opspec.Wire("TrivialAugmentWide", "num_magnitude_bins", 31, "interpolation", "bicubic"),
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

// eraseOp is a RandomErasing of kv, opspec.Wire's names and values.
func eraseOp(kv ...any) *pb.Op { return opspec.Wire("RandomErasing", kv...) }
