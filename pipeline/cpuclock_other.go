//go:build !(linux || darwin || freebsd)

package pipeline

import "time"

var cpuEpoch = time.Now()

// threadCPU is a monotonic wall clock where no per-thread CPU clock is
// read: a sample is charged the time its worker spent on it.
func threadCPU() time.Duration { return time.Since(cpuEpoch) }
