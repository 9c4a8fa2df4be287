package job

import (
	"fmt"
	"math"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// Defaults of JobSpec.max_sample_errors: a few corrupt files pass, a
// broken dataset does not.
const (
	defaultMaxSampleErrors        = 10
	defaultMaxSampleErrorFraction = 0.001
)

// ErrorLimit is a job's JobSpec.max_sample_errors, checked.
type ErrorLimit struct {
	count    uint64
	fraction float64
}

// ErrorLimitOf checks spec's max_sample_errors (unset: the defaults).
func ErrorLimitOf(spec *stokerv1.JobSpec) (ErrorLimit, error) {
	l := spec.GetMaxSampleErrors()
	if l == nil {
		return ErrorLimit{defaultMaxSampleErrors, defaultMaxSampleErrorFraction}, nil
	}
	f := l.GetFraction()
	if math.IsNaN(f) || f < 0 || f > 1 {
		return ErrorLimit{}, status.Errorf(codes.InvalidArgument, "max_sample_errors.fraction %v: want 0..1 (a fraction of the epoch's samples)", f)
	}
	return ErrorLimit{l.GetCount(), f}, nil
}

// Bound is the most failed samples an epoch of samples may have.
func (l ErrorLimit) Bound(samples uint64) uint64 {
	return max(l.count, uint64(l.fraction*float64(samples)))
}

// String says the limit as a user sets it.
func (l ErrorLimit) String() string {
	switch {
	case l.fraction == 0:
		return fmt.Sprintf("%d", l.count)
	case l.count == 0:
		return fmt.Sprintf("%g of the epoch's samples", l.fraction)
	}
	return fmt.Sprintf("%d, or %g of the epoch's samples when more", l.count, l.fraction)
}
