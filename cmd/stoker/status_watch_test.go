package main

import (
	"bufio"
	"context"
	"errors"
	"math"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	stokerv1 "github.com/stoker-dev/stoker/proto/stoker/v1"
)

// wideStatus is a status whose every line would pass 80 columns if
// nothing cut it: long names, many makers, every figure set.
func wideStatus() *stokerv1.StatusResponse {
	long := strings.Repeat("x", 90)
	j := &stokerv1.JobStatus{
		Id: "imagenet-with-a-long-name-r0-" + long, Dataset: "imagenet", Epoch: 12, ImagesPerSecond: 123456,
		BytesPerSecond: 9.9e9, InputStallRatio: 0.45, TrainerStepRatio: 0.55, GpuIdleRatio: -1, Window: 1024, WindowMin: 1,
		WindowMax: 1024, Buffered: 999, SendRatio: 0.02, CreditWaitRatio: 0, WorkersRecommended: math.NaN(),
		Advice: "needs about 40 more workers " + long, Bottleneck: "network",
		Verdict: "network-bound to peer stoker-workers-0.stoker-workers.stoker.svc.cluster.local:7070: 80% of its lease time is the network",
		Making:  &stokerv1.MakingShares{Queue: 1, Read: 1, Decode: 1, Transform: 1, Peer: 1, Network: 1, SecondsPerBatch: 123.45, Batches: 9},
	}
	for i := range 7 {
		j.Makers = append(j.Makers, &stokerv1.MakerStatus{Name: "peer-" + long, Ready: i%2 == 0, BatchesPerSecond: 1000, InFlight: 999,
			BusyRatio: 1, LeaseSeconds: 12.5, NetworkShare: math.NaN(), Unavailable: strings.Repeat("refused ", i)})
	}
	return &stokerv1.StatusResponse{Version: "v9.9.9-" + long, Workers: 128, PeersReady: 64, Jobs: []*stokerv1.JobStatus{j, j}}
}

// TestWatchFrameFits: every line of a --watch frame is at most 80
// columns (or the terminal's width, narrower), whatever the names; the
// verdict and the shares are in it; no NaN.
func TestWatchFrameFits(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, width := range []int{80, 60} {
		lines := watchFrame("stoker-coordinator.example.com:7070", wideStatus(), errors.New("a transient error "+strings.Repeat("y", 100)), now, width)
		text := strings.Join(lines, "\n")
		for i, l := range lines {
			if n := utf8.RuneCountInString(l); n > width {
				t.Errorf("width %d: line %d is %d columns: %q", width, i, n, l)
			}
		}
		for _, want := range []string{"15:04:05", "▶ network-bound to peer", "core wait 100%", "network 100%", "trainer  [", "… 3 more", "no answer"} {
			if !strings.Contains(text, want) {
				t.Errorf("width %d: frame lacks %q:\n%s", width, want, text)
			}
		}
		t.Logf("width %d:\n%s", width, text)
		if strings.Contains(text, "NaN") {
			t.Errorf("frame shows NaN:\n%s", text)
		}
	}
	var b strings.Builder
	drawFrame(&b, watchFrame("a:1", wideStatus(), nil, now, 80), 10)
	out := b.String()
	if !strings.HasPrefix(out, ansiHome) || !strings.HasSuffix(out, ansiClearBelow) || strings.Count(out, "\n") != 9 ||
		!strings.Contains(out, "more lines") {
		t.Errorf("a frame on 10 rows: want home, 9 lines each cleared to its end (the last saying what is left out), the rest cleared:\n%q", out)
	}
}

// TestStatusWatchLines: `stoker status --watch` whose output is not a
// terminal prints a plain line per job per refresh, with the verdict, and
// ends cleanly (exit 0) on SIGTERM.
func TestStatusWatchLines(t *testing.T) {
	if testing.Short() {
		t.Skip("runs stoker serve processes")
	}
	parallelTest(t)
	ctx := processTest(t, 2*time.Minute)
	srv := watchedServer(t, ctx)
	cmd := exec.CommandContext(ctx, stokerBinary(t), "status", "--watch", "--every", "200ms", srv.addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	judged := false
	for !judged && sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "\x1b") {
			t.Fatalf("ANSI codes in plain output: %q", line)
		}
		judged = strings.Contains(line, " ds-r0-") && strings.Contains(line, " decode: decode-bound on 1 local core") &&
			strings.Contains(line, "| step ")
	}
	if !judged {
		t.Fatalf("no line with the job's verdict before the output ended (%v); stderr: %s", sc.Err(), stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Errorf("status --watch after SIGTERM: %v (want exit 0); stderr: %s", err, stderr.String())
	}
}

// TestStatusWatchFlags: --epochs and --watch are two views; a negative
// interval is refused.
func TestStatusWatchFlags(t *testing.T) {
	for _, args := range [][]string{{"--watch", "--epochs", "127.0.0.1:1"}, {"--watch", "--every", "-1s", "127.0.0.1:1"}} {
		err := statusTo(&strings.Builder{}, args)
		if err == nil || !strings.Contains(err.Error(), "--") {
			t.Errorf("status %v: %v, want an error naming the flag", args, err)
		}
	}
}

// watchedServer is a server with one trainer's job running, for `stoker
// status --watch` to show; the trainer stops with the test.
func watchedServer(t *testing.T, ctx context.Context) *serveProc {
	t.Helper()
	srv := startServe(t, ctx, serveConfig{name: "serve", dataset: writeDataset(t, 32, 2, 0), workers: 1})
	tr := startTrainer(t, ctx, srv.addr, testJob(4, 1), 0)
	t.Cleanup(func() { tr.stop(t) })
	return srv
}
