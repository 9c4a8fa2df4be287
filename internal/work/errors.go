package work

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/internal/lease"
	"github.com/stoker-dev/stoker/pipeline"
)

// ErrNotConnected is returned by Make while the peer has no Work stream.
var ErrNotConnected = errors.New("peer not connected")

// ErrDecoder is returned (wrapped) while the peer is refused because its
// decoder would make other bytes than this process's (another output
// version, decode path, libjpeg-turbo, architecture or multiply-add
// fusion): it is pipeline.ErrOtherBytes, and the peer is never Ready.
var ErrDecoder = pipeline.ErrOtherBytes

// leaseErrors is the one table from the status code of a LeaseFailed to
// the sentinel error Make returns (wrapping the status); a code not in
// it is the lease's own failure.
var leaseErrors = map[codes.Code]error{
	codes.NotFound:           lease.ErrRefused,
	codes.FailedPrecondition: lease.ErrRefused,
	codes.InvalidArgument:    lease.ErrRefused,
	codes.Unimplemented:      lease.ErrRefused,
	// Its lease limit or memory budget: lease it again, later or
	// elsewhere.
	codes.ResourceExhausted: lease.ErrBusy,
	// The worker drains (or its executor closed): it takes no more leases
	// on this stream.
	codes.Unavailable: lease.ErrDraining,
	// The worker ended the lease's job (no lease named it for a while):
	// the next lease registers it again.
	codes.Aborted: lease.ErrBusy,
}

// leaseError is the error Make returns for a lease the worker failed with
// code and msg.
func leaseError(code codes.Code, msg string) error {
	err := status.Error(code, msg)
	if sentinel := leaseErrors[code]; sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}
