package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/server"
)

// closedPort is a loopback address nothing listens at.
func closedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// TestUnreachableSaysWhatToDo: every call to a closed port fails with
// Unavailable and a message that asks whether stoker serve runs there,
// naming the address, not with gRPC's dial error alone.
func TestUnreachableSaysWhatToDo(t *testing.T) {
	addr := closedPort(t)
	c := newClient(t, addr)
	want := "is `stoker serve` running at " + addr + "?"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, errList := c.ListDatasets(ctx)
	_, errStatus := c.Status(ctx)
	_, errDescribe := c.Describe(ctx, spec(4), 0, 0)
	l := c.Loader(spec(4))
	defer l.Close()
	_, errNext := l.Next(ctx)
	for name, err := range map[string]error{"ListDatasets": errList, "Status": errStatus, "Describe": errDescribe, "Loader.Next": errNext} {
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want Unavailable saying %q", name, err, want)
		}
	}
	t.Logf("Loader.Next: %v", errNext)
}

// TestNoPortIsStokersPort: a target without a port is dialled on 7070,
// stoker serve's default, never silently on gRPC's 443, and the messages
// name it.
func TestNoPortIsStokersPort(t *testing.T) {
	for in, want := range map[string]string{"gpu-box": "gpu-box:7070", "dns:///gpu-box": "dns:///gpu-box:7070", "[::1]": "[::1]:7070", "gpu-box:9000": "gpu-box:9000"} {
		c := newClient(t, in)
		if c.Target() != want {
			t.Errorf("New(%q).Target() = %q, want %q", in, c.Target(), want)
		}
	}
}

// TestServerGoneMidStream: a server that stops under a running loader
// ends it with Unavailable and a message that asks whether stoker serve
// still runs there (not a TLS hint, not gRPC's words alone).
func TestServerGoneMidStream(t *testing.T) {
	srv, err := server.New(server.Config{Datasets: map[string]string{"tiny": makeDataset(t, []string{"a", "b"}, 8)}, Workers: 1},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	gs, _, err := srv.GRPCServer()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, gs)
	c := newClient(t, addr)
	l := c.Loader(spec(2), client.WithPrefetch(1))
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := l.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	gs.Stop() // the connection goes with it
	for err == nil {
		if b, err = l.Next(ctx); err == nil {
			b.Release()
		}
	}
	want := "is `stoker serve` still running at " + addr
	if errors.Is(err, io.EOF) || status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "TLS") {
		t.Errorf("Next after the server stopped: %v; want Unavailable saying %q", err, want)
	}
	t.Logf("Next after the server stopped: %v", err)
}
