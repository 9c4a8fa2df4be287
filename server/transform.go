package server

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// newTransform compiles a wire TransformSpec: a preset name or an op list,
// exactly one of the two. Errors are status errors (InvalidArgument), with
// the pipeline's message when it is the pipeline that refuses.
func newTransform(spec *stokerv1.TransformSpec, layout stokerv1.Layout) (*pipeline.Transform, error) {
	var l pipeline.Layout
	switch layout {
	case stokerv1.Layout_LAYOUT_UNSPECIFIED, stokerv1.Layout_LAYOUT_NCHW:
		l = pipeline.CHW
	case stokerv1.Layout_LAYOUT_NHWC:
		l = pipeline.HWC
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown layout %d", layout)
	}
	hasPreset, hasOps := spec.GetPreset() != "", len(spec.GetOps()) > 0
	if hasPreset == hasOps {
		return nil, status.Error(codes.InvalidArgument, "transform: set exactly one of preset and ops")
	}
	var (
		t   *pipeline.Transform
		err error
	)
	if hasPreset {
		if p := spec.GetPreset(); len(p) > maxPresetName {
			return nil, status.Errorf(codes.InvalidArgument, "transform preset name %q of %d bytes: the limit is %d (known: %s)",
				truncate(p, 64), len(p), maxPresetName, strings.Join(pipeline.PresetNames(), ", "))
		}
		t, err = pipeline.ParseTransform(spec.GetPreset(), l)
	} else {
		var ops []pipeline.Op
		ops, err = opsFromProto(spec.GetOps())
		if err == nil {
			t, err = pipeline.NewTransform(l, ops...)
		}
	}
	return t, toStatus(err)
}

// opsFromProto converts wire ops to pipeline ops. Defaults are the
// pipeline's (zero fields), except RandomHorizontalFlip's p: unset means 0.5
// on the wire, and 0 is an explicit "never".
func opsFromProto(in []*stokerv1.Op) ([]pipeline.Op, error) {
	ops := make([]pipeline.Op, 0, len(in))
	for i, o := range in {
		var op pipeline.Op
		switch x := o.GetOp().(type) {
		case *stokerv1.Op_RandomResizedCrop:
			r := x.RandomResizedCrop
			op = pipeline.Op{
				Kind:  pipeline.OpRandomResizedCrop,
				Size:  [2]int{int(r.GetHeight()), int(r.GetWidth())},
				Scale: [2]float64{r.GetScaleMin(), r.GetScaleMax()},
				Ratio: [2]float64{r.GetRatioMin(), r.GetRatioMax()},
			}
		case *stokerv1.Op_Resize:
			op = pipeline.Op{Kind: pipeline.OpResize, Size: [2]int{int(x.Resize.GetHeight()), int(x.Resize.GetWidth())}}
		case *stokerv1.Op_CenterCrop:
			op = pipeline.Op{Kind: pipeline.OpCenterCrop, Size: [2]int{int(x.CenterCrop.GetHeight()), int(x.CenterCrop.GetWidth())}}
		case *stokerv1.Op_RandomHorizontalFlip:
			p := 0.5
			if x.RandomHorizontalFlip.P != nil {
				p = x.RandomHorizontalFlip.GetP()
			}
			op = pipeline.Op{Kind: pipeline.OpRandomHorizontalFlip, P: p}
		case *stokerv1.Op_ColorJitter:
			c := x.ColorJitter
			op = pipeline.Op{Kind: pipeline.OpColorJitter, Brightness: c.GetBrightness(), Contrast: c.GetContrast(), Saturation: c.GetSaturation()}
		case *stokerv1.Op_Normalize:
			n := x.Normalize
			if len(n.GetMean()) != 3 || len(n.GetStd()) != 3 {
				return nil, fmt.Errorf("%w: transform: Normalize needs 3 means and 3 stds, got %d and %d", pipeline.ErrUnsupported, len(n.GetMean()), len(n.GetStd()))
			}
			op = pipeline.Op{Kind: pipeline.OpNormalize, Mean: [3]float64(n.GetMean()), Std: [3]float64(n.GetStd())}
		default:
			return nil, fmt.Errorf("%w: transform: op %d is empty", pipeline.ErrUnsupported, i)
		}
		ops = append(ops, op)
	}
	return ops, nil
}
