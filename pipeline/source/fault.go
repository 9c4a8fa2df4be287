package source

import "errors"

// IsStoreFault reports whether err, a failed read, is the store's fault
// rather than the object's: the store did not answer usefully within the
// retry policy (ErrUnavailable: unreachable, refusing connections,
// throttling, 5xx or timing out on every try, or the retry budget spent),
// it refused the credentials (ErrDenied), or its answer broke the store's
// protocol (ErrProtocol: a ranged read answered with the whole object, an
// answer without a version, a malformed or oversized listing, a redirect
// to another host). Such a failure says nothing about the sample: the
// same read succeeds once the store is back, honest, or the credentials
// are fixed.
//
// It is the one place that decides "the store's fault or the file's";
// everything else is the file's (ErrChanged, ErrNotExist, a file that does
// not decode). A sample that failed by the store's fault must never be
// padded or dropped as a bad file would be: its batch fails instead (see
// pipeline's fail policies), so that nothing is silently lost and a
// resumed epoch is byte for byte a clean one.
func IsStoreFault(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrDenied) || errors.Is(err, ErrProtocol)
}
