package storetest

import "syscall"

// dieWithParent has the kernel kill the store when the thread that started
// it exits, so a test binary that dies (a panic, a go test -timeout) leaves
// no store running. Go ends a thread when a goroutine exits locked to it:
// startProc starts the store from a goroutine that holds its thread locked
// until the store exits.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
