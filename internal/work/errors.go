package work

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/pipeline"
)

// ErrRefused marks a worker's refusal of a job: unknown dataset, another
// fingerprint, a spec or batch it will not make. Asking it again for the
// same job gets the same answer.
var ErrRefused = errors.New("job refused")

// ErrNotConnected is returned by Make while the peer has no Work stream.
var ErrNotConnected = errors.New("peer not connected")

// ErrBusy is returned by Make when the worker has as many leases in flight
// as it takes (from all of this process's jobs): not a failure, the batch
// is simply to be leased again, here later or elsewhere.
var ErrBusy = errors.New("peer busy")

// ErrDraining is returned by Make for a lease the worker turned away, or
// ended its stream over, because it is shutting down (it answers new
// leases with UNAVAILABLE and finishes those in flight). Not a failure:
// the batch is to be leased elsewhere. The peer is not Ready from then
// until a new stream opens.
var ErrDraining = errors.New("peer draining")

// ErrDecoder is returned (wrapped) while the peer is refused because its
// decoder would make other bytes than this process's (another output
// version, decode path, libjpeg-turbo, architecture or multiply-add
// fusion): it is pipeline.ErrOtherBytes, and the peer is never Ready.
var ErrDecoder = pipeline.ErrOtherBytes

// leaseErrors is the one table from the status code of a LeaseFailed to
// the sentinel error Make returns (wrapping the status); a code not in
// it is the lease's own failure.
var leaseErrors = map[codes.Code]error{
	codes.NotFound:           ErrRefused,
	codes.FailedPrecondition: ErrRefused,
	codes.InvalidArgument:    ErrRefused,
	codes.Unimplemented:      ErrRefused,
	// Its lease limit or memory budget: lease it again, later or
	// elsewhere.
	codes.ResourceExhausted: ErrBusy,
	// The worker drains (or its executor closed): it takes no more leases
	// on this stream.
	codes.Unavailable: ErrDraining,
	// The worker ended the lease's job (no lease named it for a while):
	// the next lease registers it again.
	codes.Aborted: ErrBusy,
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
