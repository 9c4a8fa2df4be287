// Package errs holds the pipeline's sentinel errors and the clipping of
// outside names for messages: a leaf (the standard library only) that the
// pipeline's rooms (the datasets, the root's codec and executor) share, so
// that an error one of them returns is errors.Is the same sentinel in all
// of them. The pipeline and pipeline/dataset export these sentinels under
// their own names (errs.Corrupt, dataset.ErrCorrupt, ...): the same
// values.
package errs

import (
	"errors"
	"unicode/utf8"
)

// Sentinel errors. Every error the pipeline returns for bad input wraps one
// of them (test with errors.Is); the server maps them to status codes.
var (
	// Corrupt: the file is not a decodable image (truncated, corrupt,
	// zero bytes, not an image at all).
	Corrupt = errors.New("corrupt image")
	// TooLarge: the file or the image it declares is over a limit (file
	// size cap, pixel budget, progressive scan cap).
	TooLarge = errors.New("image too large")
	// Unsupported: a valid file or request the pipeline does not handle
	// (an unknown format, an op in an order it cannot fuse, a bad
	// parameter).
	Unsupported = errors.New("unsupported")
)

// Clip is s cut to at most n bytes at a character's start, marked when
// cut: names and messages that come from outside input (a store's keys, a
// manifest's strings) go into errors, logs and batch headers bounded.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
