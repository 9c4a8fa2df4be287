//go:build linux

package pipeline

import (
	"runtime"
	"syscall"
	"unsafe"
)

// Linux capabilities that let a process read files whatever their mode.
const (
	capDACOverride   = 1
	capDACReadSearch = 2
	capVersion3      = 0x20080522
)

type capHeader struct {
	version uint32
	pid     int32
}

type capData struct{ effective, permitted, inheritable uint32 }

// asUnprivileged runs f with file permission checks in force even when the
// test runs as root: on a locked OS thread whose effective capabilities
// lack CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (capabilities are per
// thread on Linux, and the runtime makes no new threads from a locked
// one). f must do its file system calls on its own goroutine. The thread
// gets its capabilities back after f; if that fails it stays locked, and
// ends with the goroutine. It reports false, without running f, when the
// capabilities cannot be changed.
func asUnprivileged(f func()) bool {
	runtime.LockOSThread()
	hdr := capHeader{version: capVersion3}
	var saved [2]capData
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&saved[0])), 0); e != 0 {
		runtime.UnlockOSThread()
		return false
	}
	dropped := saved
	dropped[0].effective &^= 1<<capDACOverride | 1<<capDACReadSearch
	hdr = capHeader{version: capVersion3}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&dropped[0])), 0); e != 0 {
		runtime.UnlockOSThread()
		return false
	}
	defer func() {
		hdr := capHeader{version: capVersion3}
		if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&saved[0])), 0); e == 0 {
			runtime.UnlockOSThread()
		}
	}()
	f()
	return true
}
