package job

import (
	"strings"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/ops"
	"github.com/stoker-dev/stoker/pipeline/transform"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// maxStopOpName bounds a name in JobSpec.stop_ops (the longest op kind is
// under 32 bytes).
const maxStopOpName = 64

// stopEpochOf is t with spec's stop_epoch (JobSpec.stop_epoch and
// stop_ops: from that epoch on, the ops of those kinds are off), or t
// itself when it has none. A name that is no op of t, an op that cannot
// be switched off, stop_ops without stop_epoch: INVALID_ARGUMENT, saying
// why.
func stopEpochOf(spec *stokerv1.JobSpec, t *transform.Transform) (*transform.Transform, error) {
	names := spec.GetStopOps()
	if spec.GetStopEpoch() == 0 {
		if len(names) > 0 {
			return nil, status.Errorf(codes.InvalidArgument, "stop_ops %s without stop_epoch: say from which epoch they are off (stop_epoch, counted from 0; Loader(stop_epoch=...))",
				Truncate(strings.Join(names, ", "), 256))
		}
		return t, nil
	}
	var kinds []ops.OpKind
	for _, n := range names {
		if len(n) > maxStopOpName {
			return nil, status.Errorf(codes.InvalidArgument, "stop_ops: a name of %d bytes (%q): want an op's kind, as D-FINE's policy names its classes", len(n), Truncate(n, 64))
		}
		kinds = append(kinds, ops.OpKind(n))
	}
	st, err := t.WithStopEpoch(spec.GetStopEpoch(), kinds)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), errs.Unsupported.Error()+": "))
	}
	return st, nil
}
