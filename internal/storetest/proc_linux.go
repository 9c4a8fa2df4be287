package storetest

import "syscall"

// dieWithParent has the kernel kill the store when the thread that started
// it exits, so a test binary that dies (a panic, a go test -timeout) leaves
// no store running. Go keeps its threads for the life of the process
// unless a goroutine exits locked to one, which nothing here does.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
