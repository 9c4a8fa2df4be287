package main

import (
	"context"
	"io"
	"log/slog"
	"math"
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
	var job *stokerv1.JobStatus
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
		// Published with advice, and with the CPU its samples took.
		published = len(jobs) == 1 && jobs[0].GetAdvice() != "" && jobs[0].GetStarvationSignal() != "" && jobs[0].GetCpuSecondsPerSample() > 0
		if published {
			job = jobs[0]
		}
	}
	if p, w := job.GetPredictedCpuSecondsPerSample(), job.GetWorstCpuSecondsPerSample(); !(p > 0 && w >= p && p < 0.01) {
		t.Errorf("imagenet-eval's predicted CPU per sample %v s, worst %v s: want 0 < predicted <= worst, under 10 ms", p, w)
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
	cpu := cpuFigure(job.GetPredictedCpuSecondsPerSample()) + ", " + cpuFigure(job.GetWorstCpuSecondsPerSample()) + ", "
	for _, want := range []string{"2 local decode goroutines", "1 jobs", "pets-r0-", "local ", "advice", "(trainer wait)", " sequential ", "cpu/sample (model, worst, measured)", cpu} {
		if !strings.Contains(string(text), want) {
			t.Errorf("status output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(string(text), "NaN") {
		t.Errorf("status shows NaN (want — until a figure exists):\n%s", text)
	}
	if !strings.Contains(string(text), "fine") && !strings.Contains(string(text), "more workers") && !strings.Contains(string(text), "limit") &&
		!strings.Contains(string(text), "not taking batches") && !strings.Contains(string(text), "no makers measured yet") &&
		!strings.Contains(string(text), "measuring (the job is starting)") {
		t.Errorf("no advice line:\n%s", text)
	}
}

// TestStatusShowsShuffle: the table names each job's shuffle, as the
// server says it (JobStatus.shuffle), and "-" for a server that does not.
func TestStatusShowsShuffle(t *testing.T) {
	var buf strings.Builder
	printStatus(&buf, "addr", &stokerv1.StatusResponse{Jobs: []*stokerv1.JobStatus{
		{Id: "a", Dataset: "shards", Shuffle: "block W=4"}, {Id: "b", Dataset: "photos", Shuffle: "global"}, {Id: "c", Dataset: "old"},
	}})
	lines := strings.Split(buf.String(), "\n")
	if len(lines) < 6 || !strings.HasPrefix(lines[2], "job ") {
		t.Fatalf("status table:\n%s", buf.String())
	}
	col := strings.Index(lines[2], "shuffle")
	for i, want := range []string{"block W=4", "global", "-"} {
		if col < 0 || !strings.HasPrefix(lines[3+i][col:], want+" ") {
			t.Errorf("job %d's shuffle column does not read %q:\n%s", i, want, buf.String())
		}
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

// TestStatusNoFigureYet: a job that has just started has no worker
// recommendation (and no rates) yet; the server sends NaN for them, and
// status shows "—", never "NaN".
func TestStatusNoFigureYet(t *testing.T) {
	nan := math.NaN()
	st := &stokerv1.StatusResponse{Version: "v1", Workers: 2, Jobs: []*stokerv1.JobStatus{{
		Id: "pets-r0-1", Dataset: "pets", WorldSize: 1, ImagesPerSecond: nan, BytesPerSecond: nan, InputStallRatio: nan,
		GpuIdleRatio: nan, Starvation: nan, StarvationSignal: "trainer wait", WorkersRecommended: nan,
		Advice: "measuring (the job is starting)",
		Makers: []*stokerv1.MakerStatus{{Name: "local", Ready: true, BatchesPerSecond: nan, BusyBatchesPerSecond: nan, BusyRatio: nan}},
	}}}
	var buf strings.Builder
	printStatus(&buf, "127.0.0.1:7070", st)
	out := buf.String()
	if strings.Contains(out, "NaN") || strings.Count(out, "—") != 8 {
		t.Errorf("want — for each figure not measured yet, no NaN:\n%s", out)
	}
	t.Logf("\n%s", out)
}

// TestStatusBackedOff: a maker a job backs off (its leases slow or
// failing in a row) is marked, with how much longer and why.
func TestStatusBackedOff(t *testing.T) {
	st := &stokerv1.StatusResponse{Version: "v1", Workers: 0, Jobs: []*stokerv1.JobStatus{{
		Id: "pets-r0-1", Dataset: "pets", WorldSize: 1, Makers: []*stokerv1.MakerStatus{
			{Name: "10.0.0.1:7070", Ready: true, BatchesPerSecond: 12},
			{Name: "10.0.0.2:7070", Ready: true, BackoffSeconds: 25.6, FailuresInARow: 8},
		},
	}}}
	var buf strings.Builder
	printStatus(&buf, "127.0.0.1:7070", st)
	out := buf.String()
	if !strings.Contains(out, "10.0.0.2:7070 0.0/0 0.0 0% (backed off 25.6s: 8 slow or failed leases in a row)") ||
		strings.Count(out, "backed off") != 1 {
		t.Errorf("want the second maker marked backed off, and only it:\n%s", out)
	}
	t.Logf("\n%s", out)
}

// TestStatusDefaultAddress: without an ADDR, status asks 127.0.0.1:7070,
// where stoker serve listens by default (the two defaults are one); a host
// without a port is asked on 7070 too.
func TestStatusDefaultAddress(t *testing.T) {
	fs, _ := serveFlags(&server.Config{Datasets: map[string]string{}})
	if listen := fs.Lookup("listen").DefValue; listen != defaultStatusAddr {
		t.Fatalf("serve --listen defaults to %s, status to %s", listen, defaultStatusAddr)
	}
	for _, args := range [][]string{{"--timeout", "5s"}, {"--timeout", "5s", "127.0.0.1"}} {
		var buf strings.Builder
		err := statusTo(&buf, args)
		// Whether or not a server listens there on this machine, the
		// answer (or the error) names the address asked.
		if err == nil && !strings.HasPrefix(buf.String(), "127.0.0.1:7070: stoker ") ||
			err != nil && !strings.Contains(err.Error(), "is `stoker serve` running at 127.0.0.1:7070?") {
			t.Errorf("status %v: %v\n%s", args, err, buf.String())
		} else {
			t.Logf("status %v: %v %s", args, err, buf.String())
		}
	}
}

// TestStatusClosedPort: status of an address nothing listens at says so and
// asks whether stoker serve runs there.
func TestStatusClosedPort(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	err = statusTo(io.Discard, []string{"--timeout", "5s", addr})
	if want := "is `stoker serve` running at " + addr + "?"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("status of a closed port: %v; want %q", err, want)
	}
}
