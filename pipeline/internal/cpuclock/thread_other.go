//go:build !(linux || darwin || freebsd)

package cpuclock

import "time"

var cpuEpoch = time.Now()

// thread is a monotonic wall clock where no per-thread CPU clock is
// read: a sample is charged the time its worker spent on it.
func thread() time.Duration { return time.Since(cpuEpoch) }
