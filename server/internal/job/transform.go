package job

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/opspec"
	"github.com/stoker-dev/stoker/pipeline"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// NewTransform compiles a wire TransformSpec: a preset name or an op list,
// exactly one of the two. A bad layout is a status error
// (InvalidArgument); a spec the pipeline refuses, the pipeline's error
// (the server's error table maps it).
func NewTransform(spec *stokerv1.TransformSpec, layout stokerv1.Layout) (*pipeline.Transform, error) {
	var l pipeline.Layout
	switch layout {
	case stokerv1.Layout_LAYOUT_UNSPECIFIED, stokerv1.Layout_LAYOUT_NCHW:
		l = pipeline.CHW
	case stokerv1.Layout_LAYOUT_NHWC:
		l = pipeline.HWC
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown layout %d", layout)
	}
	return opspec.Transform(spec, l)
}
