package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeWarnsWhenExposed: `stoker serve` says, one warning line each,
// when its gRPC listener is reachable from other machines with no client
// authentication, and when --pprof is served on a non-loopback --metrics
// address; it says nothing of the kind otherwise.
func TestServeWarnsWhenExposed(t *testing.T) {
	ctx := processTest(t, 5*time.Minute)
	ds := writeDataset(t, 4, 2, 0)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const (
		plain = "listening on a non-loopback address in plaintext and without tokens"
		pprof = "--pprof on a non-loopback --metrics address"
	)
	for _, tc := range []struct {
		name            string
		listen, metrics string
		args            []string
		want            []string
	}{
		{"everything exposed", "0.0.0.0:0", "0.0.0.0:0", []string{"--pprof"}, []string{plain, pprof}},
		{"tokens, metrics without pprof", "0.0.0.0:0", "0.0.0.0:0", []string{"--auth-tokens", tokens}, nil},
		{"loopback", "127.0.0.1:0", "127.0.0.1:0", []string{"--pprof"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startServe(t, ctx, serveConfig{name: tc.name, listen: tc.listen, metrics: tc.metrics, dataset: ds, workers: 1, args: tc.args})
			// The warnings come before the "listening" line.
			waitFor(t, ctx, hangGuard, "the listening line", func() bool { return len(p.findLogs("listening", nil)) == 1 })
			var warned []string
			for _, r := range p.logRecords() {
				if msg, _ := r["msg"].(string); r["level"] == "WARN" && strings.Contains(msg, "non-loopback") {
					warned = append(warned, msg)
				}
			}
			if len(warned) != len(tc.want) {
				t.Fatalf("warnings %q; want one each of %q", warned, tc.want)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(warned[i], w) {
					t.Errorf("warning %q; want %q", warned[i], w)
				}
			}
		})
	}
}

// TestServeRefusesPlaintextPeerToken: a coordinator whose peer token could
// never be sent (plaintext to a non-loopback peer) refuses to start, saying
// what to add, instead of starting and leaving its trainers waiting.
func TestServeRefusesPlaintextPeerToken(t *testing.T) {
	ctx := processTest(t, 5*time.Minute)
	ds := writeDataset(t, 4, 2, 0)
	tokens := filepath.Join(t.TempDir(), "peer-token")
	if err := os.WriteFile(tokens, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, peers := range []string{"cpu1.invalid:7070", "127.0.0.1:7070,10.255.0.1:7070", "dns:///stoker-workers.invalid:7070"} {
		cctx, cancel := context.WithTimeout(ctx, hangGuard)
		out, err := exec.CommandContext(cctx, stokerBinary(t), "serve", "--listen", "127.0.0.1:0", "--dataset", "ds="+ds,
			"--peers", peers, "--peer-token-file", tokens).CombinedOutput()
		timedOut := cctx.Err() != nil
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 || timedOut {
			t.Fatalf("--peers %s: %v, want a non-zero exit at start\n%s", peers, err, out)
		}
		for _, w := range []string{"--peer-ca", "--peer-insecure-token", "plaintext"} {
			if !strings.Contains(string(out), w) {
				t.Errorf("--peers %s: the refusal does not say %q:\n%s", peers, w, out)
			}
		}
	}
	// Told it may, it starts (its peers unreachable: no matter here).
	startServe(t, ctx, serveConfig{name: "allowed", dataset: ds, workers: 1, peers: "cpu1.invalid:7070",
		args: []string{"--peer-token-file", tokens, "--peer-insecure-token"}})
	startServe(t, ctx, serveConfig{name: "loopback", dataset: ds, workers: 1, peers: "127.0.0.1:1",
		args: []string{"--peer-token-file", tokens}})
}
