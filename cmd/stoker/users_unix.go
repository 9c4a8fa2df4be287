//go:build unix

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"
)

// usersPoll is how often --while-locked's file is tried.
const usersPoll = time.Second

// openUsers opens --while-locked's file at start (nil for none), so that a
// missing one is refused before the server listens.
func openUsers(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("serve: --while-locked: %w", err)
	}
	return f, nil
}

// whileLocked is --while-locked: it returns a context cancelled, as by
// SIGTERM, once no process holds a shared flock(2) on f. The Python
// client's local default (stoker.Loader given a dataset path) holds one
// from each process that uses this server, so the server outlives the
// rank that started it and ends with the last one, however that one ends
// (the kernel drops a dead process's locks, SIGKILL included). Once the
// server takes the exclusive lock it keeps it until it exits, and removes
// addrFile first: a process that takes its shared lock after that waits
// for this server to be gone, finds no address and starts another.
func whileLocked(ctx context.Context, f *os.File, addrFile string, log *slog.Logger) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(usersPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
				continue // a user holds it
			}
			if addrFile != "" {
				os.Remove(addrFile)
			}
			log.Info("no process holds --while-locked's lock: stopping", "file", f.Name())
			cancel()
			return // f stays open, and locked, until the process exits
		}
	}()
	return ctx
}
