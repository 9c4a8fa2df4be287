//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWhileLocked: a server given --while-locked serves while a process
// holds a shared flock(2) on the file (the Python client's local default
// holds one from each process using it), and once none does, removes its
// --addr-file and stops as on SIGTERM (exit status 0), keeping the lock
// exclusively until it exits. Events only: the server answers with the
// lock held, then its exit is awaited under the test's deadline.
func TestWhileLocked(t *testing.T) {
	ctx := processTest(t, 2*time.Minute)
	lock := filepath.Join(t.TempDir(), "users.lock")
	f, err := os.Create(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, ctx, serveConfig{name: "local", dataset: writeDataset(t, 4, 2, 0), workers: 1,
		args: []string{"--while-locked", lock}})
	if _, err := p.metrics(ctx); err != nil { // it serves with the lock held
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		t.Fatalf("the server exited while a process held its lock: %v", p.waitErr)
	default:
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-ctx.Done():
		t.Fatalf("the server still runs after its lock was released: %v", ctx.Err())
	}
	if p.waitErr != nil {
		t.Fatalf("exit: %v", p.waitErr)
	}
	if _, err := os.Stat(p.addrFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--addr-file left behind: %v", err)
	}
	if len(p.findLogs("no process holds --while-locked's lock: stopping", nil)) != 1 {
		t.Errorf("no log line says why it stopped")
	}
}

// TestWhileLockedMissingFile: a --while-locked file that does not exist
// is refused at start, naming the flag.
func TestWhileLockedMissingFile(t *testing.T) {
	ctx := processTest(t, 2*time.Minute)
	p := launchServe(t, serveConfig{name: "local", dataset: writeDataset(t, 4, 2, 0), workers: 1,
		args: []string{"--while-locked", filepath.Join(t.TempDir(), "none")}})
	select {
	case <-p.exited:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if p.waitErr == nil || !strings.Contains(p.logs.String(), "--while-locked") {
		t.Fatalf("want a failed start naming --while-locked; exit %v, log:\n%s", p.waitErr, p.logs.String())
	}
}
