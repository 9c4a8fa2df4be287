package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// cmdContext is cancelled by SIGINT or SIGTERM.
func cmdContext() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return ctx
}
