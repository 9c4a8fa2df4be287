//go:build !unix

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
)

// openUsers refuses --while-locked, which needs flock(2).
func openUsers(path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	return nil, errors.New("serve: --while-locked needs flock(2) (Unix)")
}

func whileLocked(ctx context.Context, f *os.File, addrFile string, log *slog.Logger) context.Context {
	return ctx
}
