package source

import (
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
)

// kind is what a request's outcome means for a retry.
type kind int

const (
	kindOK        kind = iota
	kindThrottled      // 503 SlowDown, 429: retried, counted apart
	kindTransient      // other 5xx, resets, truncated bodies: retried
	kindTimeout        // no answer within the request deadline: retried
	kindChanged        // 412, 416: the object is not the one indexed
	kindNotFound       // 404
	kindDenied         // 401, 403
	kindInvalid        // another 4xx: retrying would not help
)

// String is the kind's name in metrics (the outcome label).
func (k kind) String() string {
	return [...]string{"ok", "throttled", "error", "timeout", "changed", "not_found", "denied", "invalid"}[k]
}

// throttleCodes are the error codes providers use for "slow down".
var throttleCodes = map[string]bool{
	"SlowDown": true, "Throttling": true, "ThrottlingException": true, "RequestLimitExceeded": true,
	"TooManyRequests": true, "RequestThrottled": true, "ServerBusy": true, "rateLimitExceeded": true,
}

// classify says what err, a try's error, means. timedOut: the try's own
// deadline passed.
func classify(err error, timedOut bool) kind {
	switch {
	case err == nil:
		return kindOK
	case errors.Is(err, ErrChanged):
		return kindChanged
	case timedOut:
		return kindTimeout
	}
	if code, ok := providerCode(err); ok && throttleCodes[code] {
		return kindThrottled
	}
	if status, ok := httpStatus(err); ok {
		switch {
		case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
			return kindThrottled
		case status >= 500:
			return kindTransient
		case status == http.StatusPreconditionFailed || status == http.StatusRequestedRangeNotSatisfiable:
			return kindChanged
		case status == http.StatusNotFound:
			return kindNotFound
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			return kindDenied
		case status >= 400 && status != http.StatusRequestTimeout:
			return kindInvalid
		}
		return kindTransient
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return kindNotFound
	case gcerrors.PermissionDenied:
		return kindDenied
	case gcerrors.FailedPrecondition:
		return kindChanged
	case gcerrors.ResourceExhausted:
		return kindThrottled
	case gcerrors.InvalidArgument:
		return kindInvalid
	}
	// What is left is the network: resets, refused connections, bodies
	// cut short, and errors nobody classified. All are worth another try,
	// within the policy's bound.
	return kindTransient
}

// httpStatus digs the HTTP status out of a provider's error.
func httpStatus(err error) (int, bool) {
	var sc interface{ HTTPStatusCode() int } // aws-sdk-go-v2 (smithy-go)
	if errors.As(err, &sc) {
		return sc.HTTPStatusCode(), true
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code, true
	}
	var ae *azcore.ResponseError
	if errors.As(err, &ae) {
		return ae.StatusCode, true
	}
	return 0, false
}

// providerCode is a provider's error code ("SlowDown"), where it gives one.
func providerCode(err error) (string, bool) {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode(), true
	}
	var ae *azcore.ResponseError
	if errors.As(err, &ae) {
		return ae.ErrorCode, true
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) && len(ge.Errors) > 0 {
		return ge.Errors[0].Reason, true
	}
	return "", false
}
