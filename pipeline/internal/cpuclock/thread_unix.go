//go:build linux || darwin || freebsd

package cpuclock

import (
	"time"

	"golang.org/x/sys/unix"
)

// thread is the calling thread's CPU time (a system call where the
// vDSO does not serve it: well under a microsecond, once per sample).
func thread() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}
