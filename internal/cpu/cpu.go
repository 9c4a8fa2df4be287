// Package cpu holds the process's CPU bookkeeping that the server and the
// benchmarks share.
package cpu

import (
	"runtime"
	"syscall"
	"time"
)

// SpareP makes GOMAXPROCS at least workers+1. Decode workers spend most of
// their time in cgo calls of a few hundred microseconds; when every P is in
// such a call, the runtime's sysmon retakes each P after 20 us and hands it
// around, and every call pays for thread handoffs (measured: 14% of a
// one-thread benchmark's time in the kernel, 9% with a spare P). An idle
// spare P costs nothing.
func SpareP(workers int) {
	if runtime.GOMAXPROCS(0) < workers+1 {
		runtime.GOMAXPROCS(workers + 1)
	}
}

// ProcessTime is the process's user plus system CPU time so far.
func ProcessTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
