package main

// The stall attribution checked against runs whose bottleneck is known:
// real `stoker serve` processes, a real trainer (the Go client) in this
// process, the verdict read from the Status RPC as `stoker status` reads
// it. Each scenario is lopsided by construction (a trainer that consumes
// at once against one decode goroutine, a store a second away, a disk
// 50 ms an open, a link of 30 KB/s), so that the answer does not depend on the machine's speed or
// load; no figure of time is compared with a constant: the verdict is a
// classification of measured shares, and the test counts verdicts.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stoker-dev/stoker/client"
	"github.com/stoker-dev/stoker/internal/faultproxy"
	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// verdictsWanted is how many verdicts (past the job's start) a scenario
// reads; more than half must name its bottleneck.
const verdictsWanted = 8

// trainer runs a Go-client trainer of spec against addr until the test
// stops it or its epochs end: it takes each batch and sleeps step before
// asking for the next (0: a trainer that consumes at once). done is closed
// when it stops.
type trainer struct {
	done    chan struct{}
	err     error
	batches int
	cancel  context.CancelFunc
}

func startTrainer(t *testing.T, ctx context.Context, addr string, spec *stokerv1.JobSpec, step time.Duration, opts ...client.LoaderOption) *trainer {
	t.Helper()
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	tr := &trainer{done: make(chan struct{}), cancel: cancel}
	l := c.Loader(spec, opts...)
	go func() {
		defer close(tr.done)
		defer c.Close()
		defer l.Close()
		for {
			b, err := l.Next(ctx)
			if err != nil {
				if !errors.Is(err, io.EOF) && ctx.Err() == nil {
					tr.err = err
				}
				return
			}
			b.Release()
			tr.batches++
			if step > 0 {
				select {
				case <-time.After(step):
				case <-ctx.Done():
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-tr.done })
	return tr
}

// stop ends the trainer and reports what went wrong with it.
func (tr *trainer) stop(t *testing.T) {
	t.Helper()
	tr.cancel()
	<-tr.done
	if tr.err != nil {
		t.Errorf("trainer: %v", tr.err)
	}
}

// readVerdicts asks addr's Status every 200 ms until it has n statuses of
// its one job past its start (bottleneck not "starting"), the trainer
// stops, or ctx ends.
func readVerdicts(t *testing.T, ctx context.Context, addr string, tr *trainer, n int) []*stokerv1.JobStatus {
	t.Helper()
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []*stokerv1.JobStatus
	for len(out) < n {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-tr.done:
			return out
		case <-ctx.Done():
			t.Fatalf("%d of %d verdicts read when the test's deadline passed: %v", len(out), n, verdictList(out))
		}
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		for _, j := range st.GetJobs() {
			if j.GetBottleneck() != "" && j.GetBottleneck() != "starting" {
				out = append(out, j)
			}
		}
	}
	return out
}

func verdictList(js []*stokerv1.JobStatus) string {
	var b strings.Builder
	for _, j := range js {
		fmt.Fprintf(&b, "\n  %s: %s (stall %.2f, step %.2f, sending %.2f, credit wait %.2f, making %v)", j.GetBottleneck(), j.GetVerdict(),
			j.GetInputStallRatio(), j.GetTrainerStepRatio(), j.GetSendRatio(), j.GetCreditWaitRatio(), j.GetMaking())
	}
	return b.String()
}

// expectVerdict checks that more than half of the verdicts name want and
// say says.
func expectVerdict(t *testing.T, js []*stokerv1.JobStatus, want, says string) {
	t.Helper()
	if len(js) < verdictsWanted {
		t.Fatalf("%d verdicts past the job's start, want %d:%s", len(js), verdictsWanted, verdictList(js))
	}
	n := 0
	for _, j := range js {
		if j.GetBottleneck() == want && strings.Contains(j.GetVerdict(), says) {
			n++
		}
	}
	if 2*n <= len(js) {
		t.Errorf("%d of %d verdicts name %s (saying %q), want most:%s", n, len(js), want, says, verdictList(js))
	} else {
		t.Logf("%d of %d verdicts name %s; the last: %s", n, len(js), want, verdictList(js[len(js)-1:]))
	}
}

// TestStallTooFewMakers: a trainer that consumes each batch at once
// against one decode goroutine is starved by the decoding: the verdict is
// decode-bound on 1 local core, and stoker status, its metrics and
// `stoker status --watch` say so.
func TestStallTooFewMakers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 3*time.Minute)
	srv := startServe(t, ctx, serveConfig{name: "one core", dataset: writeDataset(t, 64, 2, 0), workers: 1})
	tr := startTrainer(t, ctx, srv.addr, testJob(8, 1), 0)
	js := readVerdicts(t, ctx, srv.addr, tr, verdictsWanted)
	expectVerdict(t, js, "decode", "decode-bound on 1 local core: add peers or cores")

	var out strings.Builder
	if err := statusTo(&out, []string{srv.addr}); err != nil {
		t.Fatal(err)
	}
	t.Logf("stoker status:\n%s", out.String())
	if !strings.Contains(out.String(), "where the input stalls") || !strings.Contains(out.String(), "core wait ") {
		t.Errorf("stoker status shows no stage shares:\n%s", out.String())
	}
	ms, err := srv.metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sumSeries(ms, "stoker_making_share", `stage="decode"`) <= 0 || sumSeries(ms, "stoker_making_share") < 0.99 {
		t.Errorf("stoker_making_share: decode %v, all stages %v; want decode > 0, all about 1",
			sumSeries(ms, "stoker_making_share", `stage="decode"`), sumSeries(ms, "stoker_making_share"))
	}
	if sumSeries(ms, "stoker_bottleneck") != 1 {
		t.Errorf("stoker_bottleneck: %v series set, want one", sumSeries(ms, "stoker_bottleneck"))
	}
	tr.stop(t)
}

// TestStallSlowTrainer: a trainer that sleeps a second per
// batch of 4 against two decode goroutines never waits: the verdict names
// the trainer; with a GPU monitor (a simulated GPU, the file serve reads
// in NVML's place), whether its GPU is busy or idles.
func TestStallSlowTrainer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 4*time.Minute)
	data := writeDataset(t, 64, 2, 0)
	for _, tc := range []struct {
		name, idle, says string
	}{
		{"no GPU monitor", "", "the trainer is the bottleneck: it waits for input"},
		{"busy GPU", "0.01", "the trainer is the bottleneck: the GPU is busy"},
		{"idle GPU", "0.40", "the trainer is the bottleneck, not its input: its GPU idles 40%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var args []string
			if tc.idle != "" {
				args = []string{"--bench-gpu-idle-file", simulatedGPU(t, tc.idle)}
			}
			srv := startServe(t, ctx, serveConfig{name: "slow trainer", dataset: data, workers: 2, args: args})
			tr := startTrainer(t, ctx, srv.addr, testJob(4, 1), time.Second)
			expectVerdict(t, readVerdicts(t, ctx, srv.addr, tr, verdictsWanted), "trainer", tc.says)
			tr.stop(t)
		})
	}
}

// simulatedGPU writes idle to a file, again every half second (serve
// takes a file older than gpu.FileMaxAge for a simulator that stopped),
// until the test ends; it returns the file's path.
func simulatedGPU(t *testing.T, idle string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpu-idle")
	write := func() error {
		if err := os.WriteFile(path+".tmp", []byte(idle+"\n"), 0o644); err != nil {
			return err
		}
		return os.Rename(path+".tmp", path)
	}
	if err := write(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
				write()
			}
		}
	}()
	t.Cleanup(func() { close(done); <-stopped })
	return path
}

// TestStallSlowStore: a dataset in a bucket a second away (a real S3
// server behind a proxy that adds a second to every request) starves a
// trainer that consumes at once: the verdict says reading is slow.
func TestStallSlowStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve and versitygw processes")
	}
	parallelTest(t)
	ctx := processTest(t, 4*time.Minute)
	data := writeDataset(t, 160, 2, 0)
	s := s3Store(t)
	s.PutTree(t, "bkt", "slow/", data)
	runIndexCmd(t, ctx, s.Env(), s.URL("bkt", "slow/"))
	_, env := faultProxy(t, s, 1, faultproxy.Plan{Latency: time.Second})
	srv := startServe(t, ctx, serveConfig{name: "slow store", dataset: s.URL("bkt", "slow/"), workers: 2,
		args: []string{"--lease-timeout", "30s"}, env: env})
	// One epoch: a second would be read from the byte cache.
	tr := startTrainer(t, ctx, srv.addr, testJob(2, 1), 0, client.WithEpochs(1))
	expectVerdict(t, readVerdicts(t, ctx, srv.addr, tr, verdictsWanted), "read", "reading is slow")
	tr.stop(t)
}

// TestStallSlowDisk: a local dataset on a disk that takes 50 ms to open
// a file (strace delays every openat and openat2 of the serve process; the
// files are read through the kernel as ever, stoker has no hook for it)
// starves a trainer that consumes at once: the verdict says reading is
// slow.
func TestStallSlowDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a stoker serve process under strace")
	}
	wrap := slowOpens(t, 50*time.Millisecond)
	ctx := processTest(t, 4*time.Minute)
	srv := startServe(t, ctx, serveConfig{name: "slow disk", dataset: writeDataset(t, 64, 2, 0), workers: 2, wrap: wrap})
	killTracee(t, srv)
	tr := startTrainer(t, ctx, srv.addr, testJob(2, 1), 0)
	expectVerdict(t, readVerdicts(t, ctx, srv.addr, tr, verdictsWanted), "read", "reading is slow")
	tr.stop(t)
}

// slowOpens is the command that runs a program with every openat and
// openat2 of it (and of its threads) delayed by d: strace with a seccomp
// filter, so that no other system call stops. It fails the test where
// strace is missing (make apt installs it), and skips it, saying why, only
// where the kernel refuses to let it trace (no ptrace in a container).
func slowOpens(t *testing.T, d time.Duration) []string {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatalf("needs strace to slow a local disk's opens (make apt installs it): %v", err)
	}
	wrap := []string{strace, "-f", "--seccomp-bpf", "-qq", "-o", "/dev/null", "-e", "trace=openat,openat2",
		"-e", fmt.Sprintf("inject=openat,openat2:delay_enter=%dus", d.Microseconds())}
	if out, err := exec.Command(wrap[0], append(wrap[1:len(wrap):len(wrap)], "true")...).CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace or seccomp refused): %v: %s", err, strings.TrimSpace(string(out)))
	}
	return wrap
}

// killTracee kills the program strace runs for srv when the test ends,
// before srv's own cleanup kills strace (which would leave it running).
func killTracee(t *testing.T, srv *serveProc) {
	t.Helper()
	pid := srv.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("strace (pid %d) has children %q, want the one stoker serve", pid, f)
	}
	child, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
}

// TestStallPeers: a coordinator that decodes nothing itself (--workers 0)
// leases to one peer. Behind a link of 30 KB/s, the peer makes each batch
// in a fraction of the time its pixels take on the wire: network-bound to
// that peer. On loopback, with one decode goroutine against a trainer that
// consumes at once: the peer is slow.
func TestStallPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 4*time.Minute)
	data := writeDataset(t, 64, 2, 0)
	t.Run("network", func(t *testing.T) {
		peer := startServe(t, ctx, serveConfig{name: "peer", dataset: data, workers: 2})
		link := throttledLink(t, peer.addr, 30<<10)
		coord := startServe(t, ctx, serveConfig{name: "coordinator", dataset: data, workers: 0, peers: link,
			args: []string{"--lease-timeout", "60s"}})
		tr := startTrainer(t, ctx, coord.addr, testJob(4, 1), 0)
		expectVerdict(t, readVerdicts(t, ctx, coord.addr, tr, verdictsWanted), "network", "network-bound to peer "+link)
		tr.stop(t)
	})
	t.Run("slow peer", func(t *testing.T) {
		peer := startServe(t, ctx, serveConfig{name: "peer", dataset: data, workers: 1})
		coord := startServe(t, ctx, serveConfig{name: "coordinator", dataset: data, workers: 0, peers: peer.addr})
		tr := startTrainer(t, ctx, coord.addr, testJob(8, 1), 0)
		expectVerdict(t, readVerdicts(t, ctx, coord.addr, tr, verdictsWanted), "peer", "waiting for peers' leases: peer "+peer.addr+" is slow")
		tr.stop(t)
	})
}

// throttledLink is a TCP proxy on loopback to target whose answers (target
// to client) pass at about rate bytes a second: a slow network to a peer.
// Requests pass at once. It closes with the test.
func throttledLink(t *testing.T, target string, rate int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); slowCopy(in, out, rate); in.Close() }()
		}
	}()
	return ln.Addr().String()
}

// slowCopy copies src to dst in pieces of a tenth of rate, a tenth of a
// second apart at the least.
func slowCopy(dst io.Writer, src io.Reader, rate int) {
	buf := make([]byte, max(rate/10, 1))
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			time.Sleep(time.Duration(n) * time.Second / time.Duration(rate))
		}
		if err != nil {
			return
		}
	}
}
