package bench

// `stoker bench scale --perf DIR`: each server process recorded by Linux
// perf over the measured epochs (cpu-clock samples with call graphs), for
// a profile of where a coordinator's and a worker's CPU goes
// (bench/perf_shares.py sorts it into copies, system calls, protobuf, gRPC
// and the rest).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// perfRecord starts `perf record` on each of procs, writing
// DIR/r<round>-<config>-<process>.data (config "4peers", "4peers-noaffinity"
// with affinity off, "4peers-before"); stop ends the recordings (SIGINT,
// on which perf writes its file) and waits for them.
func (b *scaleBench) perfRecord(procs []*scaleProc, run scaleRun) (stop func() error, err error) {
	config := strings.ReplaceAll(configName(run.Peers), " ", "")
	if run.Affinity == "off" {
		config += "-noaffinity"
	}
	if run.Before {
		config += "-before"
	}
	var cmds []*exec.Cmd
	var logs []*tailWriter
	stop = func() error {
		var errs []error
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGINT)
		}
		for i, c := range cmds {
			done := make(chan error, 1)
			go func() { done <- c.Wait() }()
			select {
			case err := <-done:
				// perf re-raises the SIGINT it ended on once its file is
				// written.
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
						err = nil
					}
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("perf record: %w\n%s", err, logs[i].String()))
				}
			case <-time.After(30 * time.Second):
				c.Process.Kill()
				<-done
				errs = append(errs, errors.New("perf record: still running 30 s after SIGINT: killed"))
			}
		}
		return errors.Join(errs...)
	}
	for _, p := range procs {
		name := strings.ReplaceAll(p.name, " ", "")
		out := filepath.Join(b.o.perfDir, fmt.Sprintf("r%d-%s-%s.data", run.Round, config, name))
		log := &tailWriter{max: 4 << 10}
		c := exec.Command(b.o.perf, "record", "-q", "-e", "cpu-clock", "-F", "999", "-g", "-p", strconv.Itoa(p.cmd.Process.Pid), "-o", out)
		c.Stdout, c.Stderr = log, log
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("perf record: %w", err)
		}
		cmds, logs = append(cmds, c), append(logs, log)
	}
	// perf attaches to the process's threads before it samples; a moment
	// for that, so the first batches are not missed.
	time.Sleep(200 * time.Millisecond)
	return stop, nil
}

// perfSetup checks --perf: the perf binary, and DIR made.
func perfSetup(dir string) (string, error) {
	path, err := exec.LookPath("perf")
	if err != nil {
		return "", fmt.Errorf("bench scale: --perf needs Linux perf: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bench scale: --perf: %w", err)
	}
	return path, nil
}
