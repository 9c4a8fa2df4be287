package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stoker-dev/stoker/pipeline/errs"
	"github.com/stoker-dev/stoker/pipeline/source"
	"github.com/stoker-dev/stoker/server/internal/coord"
	"github.com/stoker-dev/stoker/server/internal/limits"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestToStatus(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code codes.Code
	}{
		{"unsupported", fmt.Errorf("%w: transform: bad", errs.Unsupported), codes.InvalidArgument},
		{"too large", fmt.Errorf("x.jpg: %w", errs.TooLarge), codes.ResourceExhausted},
		{"corrupt", fmt.Errorf("%w: truncated", errs.Corrupt), codes.DataLoss},
		{"canceled", context.Canceled, codes.Canceled},
		{"wrapped canceled", fmt.Errorf("fill: %w", context.Canceled), codes.Canceled},
		{"deadline", context.DeadlineExceeded, codes.DeadlineExceeded},
		{"status passes through", status.Error(codes.NotFound, "nope"), codes.NotFound},
		{"other", io.ErrUnexpectedEOF, codes.Internal},
		{"memory budget", fmt.Errorf("%w: a job needs 9 bytes", limits.ErrMemoryBudget), codes.ResourceExhausted},
		{"every maker refused", fmt.Errorf("%w: a:1: %w", coord.ErrNoMaker, status.Error(codes.NotFound, "unknown dataset")), codes.FailedPrecondition},
		{"batch failed", fmt.Errorf("%w: last: %w", coord.ErrBatchFailed, status.Error(codes.DataLoss, "x")), codes.Unavailable},
		{"wrapped peer status", fmt.Errorf("peer a:1: %w", status.Error(codes.PermissionDenied, "no")), codes.PermissionDenied},
		{"plain", errors.New("boom"), codes.Internal},
		{"store unavailable", fmt.Errorf("s3://b: %w: gave up", source.ErrUnavailable), codes.Unavailable},
		{"store lied", fmt.Errorf("s3://b: x: %w: no Content-Range", source.ErrProtocol), codes.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := toStatus(tc.err)
			st, ok := status.FromError(got)
			if !ok || st.Code() != tc.code {
				t.Fatalf("toStatus(%v) = %v, want code %v", tc.err, got, tc.code)
			}
			if st.Message() != tc.err.Error() && tc.name != "status passes through" {
				t.Errorf("message %q, want %q", st.Message(), tc.err.Error())
			}
		})
	}
	if toStatus(nil) != nil {
		t.Error("toStatus(nil) != nil")
	}
}
