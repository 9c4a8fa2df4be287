package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stoker-dev/stoker/bench"
	"github.com/stoker-dev/stoker/client"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// TestStatusCommand runs stoker status against a real server with a
// trainer at work: one row for its job, with the advisor's line.
func TestStatusCommand(t *testing.T) {
	dir := t.TempDir()
	if err := bench.WriteSyntheticSet(context.Background(), filepath.Join(dir, "data"), 40, 2, 1); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Datasets: map[string]string{"pets": filepath.Join(dir, "data")}, Workers: 2},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	gs, _, err := srv.GRPCServer()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	defer srv.Close()
	defer gs.Stop()

	c, err := client.New(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := c.Loader(&stokerv1.JobSpec{Dataset: "pets", Transform: &stokerv1.TransformSpec{Preset: "imagenet-eval"}, BatchSize: 8, Seed: 3})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); {
		b, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		time.Sleep(20 * time.Millisecond) // a step
	}
	out := filepath.Join(dir, "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := statusTo(f, []string{lis.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	text, _ := os.ReadFile(out)
	for _, want := range []string{"2 local decode goroutines", "1 jobs", "pets-r0-", "local ", "advice"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("status output lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(string(text), "fine") && !strings.Contains(string(text), "more workers") && !strings.Contains(string(text), "limit") {
		t.Errorf("no advice line:\n%s", text)
	}
}
