package storetest

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// startTimeout bounds how long a store may take to answer after it starts:
// a hang becomes a failure that says so. It is no performance claim: a
// store answers in well under a second on an idle machine.
const startTimeout = 60 * time.Second

// stopTimeout bounds the wait for a killed store to be reaped.
const stopTimeout = 30 * time.Second

// tool is a pinned store binary: where `make setup` puts it and what it
// must be.
type tool struct {
	name    string // file name in .bin
	envVar  string // overrides the path
	module  string // the main module go install built
	version string // its pinned version (the Makefile's)
}

// path returns the tool's binary, or fails the test saying how to get it:
// the one $envVar names, else repo-root/.bin/name, which must be the
// pinned version.
func (tl tool) path(t T) string {
	t.Helper()
	if p := os.Getenv(tl.envVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v (unset it to use the one make setup installs)", tl.envVar, p, err)
		}
		if v, err := tl.builtVersion(p); err != nil || v != tl.version {
			t.Logf("%s=%s is not %s %s (%s, %v): using it as asked", tl.envVar, p, tl.module, tl.version, v, err)
		}
		return p
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("%s: %v", tl.name, err)
	}
	p := filepath.Join(root, ".bin", tl.name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s %s is not installed (%v): run make setup (or make stores), or set %s to a %s binary",
			tl.name, tl.version, err, tl.envVar, tl.name)
	}
	v, err := tl.builtVersion(p)
	if err != nil {
		t.Fatalf("%s: %v: run make setup to reinstall it", p, err)
	}
	if v != tl.version {
		t.Fatalf("%s is %s %s, the tests want %s: run make setup", p, tl.module, v, tl.version)
	}
	return p
}

// builtVersion reads the main module's version that go install recorded
// in the binary (the program's own --version says only "git").
func (tl tool) builtVersion(p string) (string, error) {
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		return "", err
	}
	if bi.Main.Path != tl.module {
		return "", fmt.Errorf("built from %s, not %s", bi.Main.Path, tl.module)
	}
	return bi.Main.Version, nil
}

// RepoRoot is the stoker module's root: the nearest directory above the
// working directory (a package's, under go test) whose go.mod declares
// github.com/stoker-dev/stoker.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil {
			if strings.HasPrefix(string(data), "module github.com/stoker-dev/stoker\n") {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no stoker checkout above %s (want the go.mod of github.com/stoker-dev/stoker)", dir)
		}
	}
}

// errExited says a store exited before it answered: most likely another
// process took its port in the meantime, so the caller tries another.
var errExited = errors.New("exited before it answered")

// proc is a store's process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	out     *tail
	exited  chan struct{}
	waitErr error
	once    sync.Once
}

// startProc starts exe and waits until ready says it answers, it exits
// (errExited) or startTimeout passes. The process gets env as its whole
// environment, so nothing in the test's (a developer's VGW_PORT, say)
// changes what it does.
func startProc(name, exe string, args, env []string, ready func(context.Context) error) (*proc, error) {
	p := &proc{name: name, out: &tail{max: 64 << 10}, exited: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = dieWithParent()
	started := make(chan error, 1)
	go func() {
		// The parent-death signal is the starting thread's: this goroutine
		// keeps that thread, pinned, for as long as the store runs, so that
		// no other goroutine exiting pinned to it takes the store down too.
		runtime.LockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = ready(ctx)
		cancel()
		if last == nil {
			return p, nil
		}
		select {
		case <-tick.C:
		case <-p.exited:
			return nil, fmt.Errorf("%s %w (%v); its output:\n%s", name, errExited, p.waitErr, p.out)
		case <-deadline.C:
			p.stop()
			return nil, fmt.Errorf("%s did not answer within %v (last: %v); its output:\n%s", name, startTimeout, last, p.out)
		}
	}
}

// stop kills the process and waits for it; it is safe to call twice. The
// store is killed, not asked to stop: SIGKILL cannot be ignored, so how
// the test was started (nohup, SIGINT ignored) changes nothing, and the
// tests need nothing from a store's shutdown.
func (p *proc) stop() error {
	var err error
	p.once.Do(func() {
		p.cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			err = fmt.Errorf("%s (pid %d) still not reaped %v after SIGKILL", p.name, p.cmd.Process.Pid, stopTimeout)
		}
	})
	return err
}

// cleanup stops the process at the end of the test, and shows its output
// when the test failed.
func (p *proc) cleanup(t T) {
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.out)
		}
	})
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tail) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(b), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
