package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
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
	t, err := opspec.Transform(spec, l)
	return t, toStatus(err)
}
