package bucket

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"

	"github.com/stoker-dev/stoker/pipeline/source"
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
	kindNoHost         // the store's host does not exist (DNS): not retried
	kindProtocol       // the answer broke the store's protocol: not retried
)

// String is the kind's name in metrics (the outcome label).
func (k kind) String() string {
	return [...]string{"ok", source.OutcomeThrottled, "error", "timeout", "changed", "not_found", "denied", "invalid", "no_host", "protocol"}[k]
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
	case errors.Is(err, source.ErrProtocol):
		return kindProtocol
	case errors.Is(err, source.ErrChanged):
		return kindChanged
	case timedOut:
		return kindTimeout
	case credentialsMissing(err):
		// No credential to sign with: the SDK's chain found none (the AWS
		// SDK ends it at EC2 instance metadata, which may answer 403).
		return kindDenied
	}
	if strings.Contains(err.Error(), "not permitted for non-TLS") {
		return kindInvalid // Azure's token credentials over http: no retry mends that
	}
	if _, ok := noSuchHost(err); ok {
		// Before the providers' codes: gocloud calls a DNS failure NotFound
		// (an Azure account name that does not exist), which it is not.
		return kindNoHost
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
		case status >= 400 && status != http.StatusRequestTimeout,
			status >= 300 && status < 400: // S3's 301: the bucket is in another region
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

// described is an error whose message is describe's, unwrapping to the
// provider's own.
type described struct{ err error }

func (d described) Error() string { return describe(d.err) }
func (d described) Unwrap() error { return d.err }

// describe is err's message, short: an Azure error's is its request, its
// status and code, where the SDK's runs to a dozen lines with the
// response's XML.
func describe(err error) string {
	var ae *azcore.ResponseError
	if !errors.As(err, &ae) {
		return err.Error()
	}
	s := fmt.Sprintf("HTTP %d %s", ae.StatusCode, ae.ErrorCode)
	if r := ae.RawResponse; r != nil && r.Request != nil && r.Request.URL != nil {
		u := *r.Request.URL
		u.RawQuery = "" // a SAS token's signature goes no further
		s += " (" + r.Request.Method + " " + u.String() + ")"
	}
	return s
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
