package job

import (
	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline/transform"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NewTransform compiles a wire TransformSpec: a preset name or an op list,
// exactly one of the two. A bad layout is a status error
// (InvalidArgument); a spec the pipeline refuses, the pipeline's error
// (the server's error table maps it).
func NewTransform(spec *stokerv1.TransformSpec, layout stokerv1.Layout) (*transform.Transform, error) {
	return NewTransformData(spec, layout, 0, 0)
}

// NewTransformData is NewTransform for a dataset whose images are at most
// w x h (0: not known; COCO's annotations list them): the bound of an op
// list without a max_size whose geometry needs one.
func NewTransformData(spec *stokerv1.TransformSpec, layout stokerv1.Layout, w, h int) (*transform.Transform, error) {
	var l transform.Layout
	switch layout {
	case stokerv1.Layout_LAYOUT_UNSPECIFIED, stokerv1.Layout_LAYOUT_NCHW:
		l = transform.CHW
	case stokerv1.Layout_LAYOUT_NHWC:
		l = transform.HWC
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown layout %d", layout)
	}
	return opspec.TransformData(spec, l, w, h)
}
