package pipeline

import (
	"runtime"
	"time"

	"github.com/stoker-dev/stoker/pipeline/internal/cpuclock"
)

// A CPUClock reads the CPU time the calling OS thread has used. An
// Executor given one (WithCPUClock) locks each worker to its own thread
// and reads it before and after every sample, so what a sample is
// charged is the CPU its read, decode and transform took on that thread
// (the C kernels run on the calling thread), whatever else the host runs.
type CPUClock func() time.Duration

// ThreadCPUClock is the OS's per-thread CPU clock
// (clock_gettime(CLOCK_THREAD_CPUTIME_ID) on Linux and the other unixes;
// a monotonic wall clock elsewhere, which still charges a sample the time
// its worker spent on it): pipeline/internal/cpuclock's.
func ThreadCPUClock() time.Duration { return cpuclock.Thread() }

// WithCPUClock has an Executor's weighted schedule share the workers by
// the CPU time each queue's samples took, read with c on the worker's
// thread, rather than by samples: a queue's virtual time advances by the
// CPU its samples used over its weight (see ScheduleWeighted). Default
// nil: every sample counts alike (one cpuUnit), as it did before. The
// server gives ThreadCPUClock; tests give a virtual clock.
func WithCPUClock(c CPUClock) Option { return func(o *options) { o.cpu = c } }

// cpuUnit is the CPU time a queue's virtual time counts as 1 (a sample's
// worth without a CPUClock): a millisecond, about what a 224 px training
// sample costs, so that virtual times stay in the range the rebase and the
// weight bounds were chosen for.
const cpuUnit = time.Millisecond

// lockThread pins the calling worker to its OS thread when the Executor
// reads a per-thread clock: otherwise the goroutine could move between
// threads within a sample and the clock would read another thread's time.
// The worker unpins with the func returned as it exits: a goroutine that
// exits pinned takes its thread down with it, and with the thread any
// child process started from it with a parent-death signal (the tests'
// object stores were killed that way when a server closed).
func (e *Executor) lockThread() (unlock func()) {
	if e.cpu == nil {
		return func() {}
	}
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
