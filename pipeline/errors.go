package pipeline

import "errors"

// Sentinel errors. Every error this package returns for bad input wraps one
// of them (test with errors.Is); the server maps them to status codes.
var (
	// ErrCorrupt: the file is not a decodable image (truncated, corrupt,
	// zero bytes, not an image at all).
	ErrCorrupt = errors.New("corrupt image")
	// ErrTooLarge: the file or the image it declares is over a limit (file
	// size cap, pixel budget, progressive scan cap).
	ErrTooLarge = errors.New("image too large")
	// ErrUnsupported: a valid file or request this package does not handle
	// (an unknown format, an op in an order it cannot fuse, a bad parameter).
	ErrUnsupported = errors.New("unsupported")
)
