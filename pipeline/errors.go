package pipeline

import "github.com/stoker-dev/stoker/pipeline/internal/errs"

// Sentinel errors. Every error this package returns for bad input wraps one
// of them (test with errors.Is); the server maps them to status codes.
// They are pipeline/internal/errs' sentinels, which the pipeline's rooms
// (pipeline/dataset among them) wrap too: the same values.
var (
	// ErrCorrupt: the file is not a decodable image (truncated, corrupt,
	// zero bytes, not an image at all).
	ErrCorrupt = errs.Corrupt
	// ErrTooLarge: the file or the image it declares is over a limit (file
	// size cap, pixel budget, progressive scan cap).
	ErrTooLarge = errs.TooLarge
	// ErrUnsupported: a valid file or request this package does not handle
	// (an unknown format, an op in an order it cannot fuse, a bad parameter).
	ErrUnsupported = errs.Unsupported
)
