//go:build !linux

package beneath

import "os"

// Reader is the Linux fast path of reading a dataset's files
// (beneath_linux.go); elsewhere every read takes os.Root's.
type Reader struct{}

// New returns nil: no fast path here.
func New(*os.Root) *Reader { return nil }

// Close does nothing.
func (r *Reader) Close() {}

// Read takes nothing: ok is false.
func (r *Reader) Read(name string, want, max int64, buf []byte) ([]byte, bool) {
	return nil, false
}
