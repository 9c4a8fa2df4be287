// Package buildlock serializes the tests' builds of the stoker binary
// across test processes: go test runs packages' test binaries side by
// side (cmd/stoker's and bench's both build cmd/stoker), and two go
// builds at once each compile every package the go build cache lacks,
// where one after the other the second finds the first's.
package buildlock

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Take takes the lock (a flock on a file in the temporary directory, one
// per user) and returns the function that releases it. Where no lock file
// can be made or locked the build goes on unlocked: the builds may then
// overlap, nothing worse.
func Take() (unlock func()) {
	name := filepath.Join(os.TempDir(), fmt.Sprintf("stoker-test-build-%d.lock", os.Getuid()))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() }
}
