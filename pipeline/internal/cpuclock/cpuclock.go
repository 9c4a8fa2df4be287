// Package cpuclock reads the CPU time the calling OS thread has used: the
// clock an Executor given one (pipeline.WithCPUClock) charges each sample
// by. A leaf below the pipeline's executor, apart from the system-call
// wrappers (golang.org/x/sys/unix) it reads the clock with.
package cpuclock

import "time"

// Thread is the OS's per-thread CPU clock
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID) on Linux and the other unixes;
// a monotonic wall clock elsewhere, which still charges a sample the time
// its worker spent on it).
func Thread() time.Duration { return thread() }
