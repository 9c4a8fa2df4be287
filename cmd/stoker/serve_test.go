package main

import (
	"bytes"
	"context"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
	"github.com/stoker-dev/stoker/server"
)

// TestServe runs the real binary: it must come up on a free port, say so in
// the address file, answer health and ListDatasets, and exit 0 on SIGTERM.
func TestServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := stokerBinary(t) // the one go build -o stoker . of this test binary's run
	data := filepath.Join(dir, "data")
	for _, class := range []string{"cat", "dog"} {
		if err := os.MkdirAll(filepath.Join(data, class), 0o755); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, image.NewGray(image.Rect(0, 0, 16, 16)), nil); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"1.jpg", "2.jpg"} {
			if err := os.WriteFile(filepath.Join(data, class, name), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	addrFile := filepath.Join(dir, "addr")
	var logs syncBuffer
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--addr-file", addrFile,
		"--dataset", "pets="+data, "--workers", "2", "--metrics", "127.0.0.1:0", "--log-format", "json")
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	var addr string
	for deadline := time.Now().Add(hangGuard); addr == ""; {
		if b, err := os.ReadFile(addrFile); err == nil {
			addr = strings.TrimSpace(string(b))
		}
		select {
		case <-exited:
			t.Fatalf("stoker serve exited early: %v\n%s", waitErr, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address in %s after %v\n%s", addrFile, hangGuard, logs.String())
		}
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for _, service := range []string{"", "stoker.v1.FeedService"} {
		h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v, %v; want SERVING", service, h, err)
		}
	}
	resp, err := stokerv1.NewFeedServiceClient(conn).ListDatasets(ctx, &stokerv1.ListDatasetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ds := resp.GetDatasets(); len(ds) != 1 || ds[0].GetName() != "pets" || ds[0].GetSize() != 4 || len(ds[0].GetClasses()) != 2 {
		t.Errorf("ListDatasets: %v", ds)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("exit after SIGTERM: %v, want 0\n%s", waitErr, logs.String())
		}
	case <-time.After(hangGuard):
		t.Fatalf("still running %v after SIGTERM\n%s", hangGuard, logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"listening","addr":"`+addr+`"`) {
		t.Errorf("no listening line with addr %s in the log:\n%s", addr, logs.String())
	}
}

// syncBuffer is a bytes.Buffer the child's stderr copier and the test may
// use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAcceptWorkFlag: --accept-work is a bool flag that, unless given,
// leaves the server's role to decide (nil: on unless --peers).
func TestAcceptWorkFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want *bool
	}{
		{nil, nil},
		{[]string{"--accept-work"}, ptr(true)},
		{[]string{"--accept-work=false"}, ptr(false)},
		{[]string{"--accept-work=true", "--peers", "a:1"}, ptr(true)},
	} {
		cfg := server.Config{Datasets: map[string]string{}}
		fs, _ := serveFlags(&cfg)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if (cfg.AcceptWork == nil) != (tc.want == nil) || cfg.AcceptWork != nil && *cfg.AcceptWork != *tc.want {
			t.Errorf("%v: AcceptWork %v, want %v", tc.args, cfg.AcceptWork, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
