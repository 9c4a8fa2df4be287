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

// petsServer is an in-process server of n synthetic images of 2 classes
// ("pets") on loopback, and a client of it; both end with the test, or
// when stop is called.
func petsServer(t *testing.T, n int) (addr string, c *client.Client, stop func()) {
	t.Helper()
	dir := t.TempDir()
	if err := bench.WriteSyntheticSet(context.Background(), filepath.Join(dir, "data"), n, 2, 1); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Datasets: map[string]string{"pets": filepath.Join(dir, "data")}, Workers: 2},
		slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	gs, _, err := srv.GRPCServer()
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(gs.Stop)
	c, err = client.New(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return lis.Addr().String(), c, gs.Stop
}

// TestStatusCommand runs stoker status against a real server with a
// trainer at work: one row for its job, with the advisor's line.
func TestStatusCommand(t *testing.T) {
	addr, c, _ := petsServer(t, 40)
	dir := t.TempDir()
	l := c.Loader(&stokerv1.JobSpec{Dataset: "pets", Transform: &stokerv1.TransformSpec{Preset: "imagenet-eval"}, BatchSize: 8, Seed: 3})
	defer l.Close()
	// The trainer steps until the server has published its job's status
	// with advice (its controller publishes every half second): an event,
	// however long a loaded machine takes to it; the deadline only turns a
	// hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for published := false; !published; {
		b, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		time.Sleep(20 * time.Millisecond) // a step
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		jobs := st.GetJobs()
		published = len(jobs) == 1 && jobs[0].GetAdvice() != "" && jobs[0].GetStarvationSignal() != ""
	}
	out := filepath.Join(dir, "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := statusTo(f, []string{addr}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	text, _ := os.ReadFile(out)
	for _, want := range []string{"2 local decode goroutines", "1 jobs", "pets-r0-", "local ", "advice", "(trainer wait)"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("status output lacks %q:\n%s", want, text)
		}
	}
	if !strings.Contains(string(text), "fine") && !strings.Contains(string(text), "more workers") && !strings.Contains(string(text), "limit") &&
		!strings.Contains(string(text), "not taking batches") && !strings.Contains(string(text), "no makers measured yet") &&
		!strings.Contains(string(text), "measuring (the job is starting)") {
		t.Errorf("no advice line:\n%s", text)
	}
}

// TestStatusTLS: `stoker status` against a real TLS `stoker serve` without
// --tls-ca says that the server speaks TLS, not "connection reset by
// peer"; so does a mutual-TLS one; with --tls-ca it answers; a closed port
// is not taken for TLS.
func TestStatusTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	ctx := processTest(t, 5*time.Minute)
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "server", "localhost")
	data := writeDataset(t, 8, 2, 0)
	tlsSrv := launchServe(t, serveConfig{name: "TLS serve", dataset: data, workers: 1,
		args: []string{"--tls-cert", cert, "--tls-key", key}})
	mtlsSrv := launchServe(t, serveConfig{name: "mutual TLS serve", dataset: data, workers: 1,
		args: []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", pki.caFile}})
	tlsSrv.waitReady(t, ctx)
	mtlsSrv.waitReady(t, ctx)
	const want = "the server speaks TLS: give --tls-ca"
	for _, p := range []*serveProc{tlsSrv, mtlsSrv} {
		err := statusTo(io.Discard, []string{"--timeout", "20s", p.addr})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s without --tls-ca: %v; want %q", p.name, err, want)
		} else {
			t.Logf("%s without --tls-ca: %v", p.name, err)
		}
	}
	_, port, _ := net.SplitHostPort(tlsSrv.addr)
	var buf strings.Builder
	if err := statusTo(&buf, []string{"--tls-ca", pki.caFile, "localhost:" + port}); err != nil {
		t.Errorf("with --tls-ca: %v", err)
	} else if !strings.Contains(buf.String(), "local decode goroutines") {
		t.Errorf("with --tls-ca: %s", buf.String())
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close()
	if err := statusTo(io.Discard, []string{"--timeout", "5s", closed}); err == nil || strings.Contains(err.Error(), "TLS") {
		t.Errorf("a closed port: %v; want an error that does not blame TLS", err)
	}
}
