package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/stoker-dev/stoker/internal/helptext"
)

// drainFlags is `stoker drain`'s flag set. Deploy manifests are checked
// against it.
func drainFlags() (fs *flag.FlagSet, pid *int, timeout *time.Duration) {
	fs = flag.NewFlagSet("drain", flag.ExitOnError)
	pid = fs.Int("pid", 1, "the stoker serve process to drain (1: the container's own)")
	timeout = fs.Duration("timeout", 25*time.Second, "give up waiting after this long (keep it under the pod's terminationGracePeriodSeconds)")
	fs.Usage = helptext.Usage(fs, helptext.Head("drain", "[flags]", "Sends a stoker serve (its --pid) SIGTERM and waits for it to drain and exit: a pod's preStop hook (health NOT_SERVING, new leases turned away, its in-flight batches finished)."))
	return fs, pid, timeout
}

// runDrain is `stoker drain`, a container's preStop hook: it starts a
// serve's drain (SIGTERM: health NOT_SERVING, new leases turned away, the
// leases in flight finished and sent, Work streams ended, Feed streams
// given --grace) and waits until the process has exited. In a container
// the hook's process ends with it; Kubernetes then sends its own SIGTERM to
// a process that is already gone.
func runDrain(args []string) error {
	fs, pid, timeout := drainFlags()
	fs.Parse(args)
	if fs.NArg() > 0 || *pid < 1 {
		return fmt.Errorf("drain: want [--pid N] [--timeout D], got %q", args)
	}
	if err := syscall.Kill(*pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("drain: signal %d: %w", *pid, err)
	}
	deadline := time.Now().Add(*timeout)
	for time.Now().Before(deadline) {
		if gone(*pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("drain: process %d still running after %v", *pid, *timeout)
}

// gone reports whether process pid has exited (it no longer exists, or is
// a zombie its parent has not reaped yet).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses.
	for i := len(st) - 1; i > 0; i-- {
		if st[i] == ')' {
			return i+2 < len(st) && st[i+2] == 'Z'
		}
	}
	return false
}
